// SPDX-License-Identifier: Apache-2.0

// Package volumes waits until the volumes of the pods a drain evicted are detached from the
// node: their VolumeAttachments are gone. A replacement pod on another node cannot attach an
// EBS volume still attached here; it waits on Multi-Attach errors for minutes if the instance
// is terminated first (the attach/detach controller only gives up on the old node after six).
package volumes

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"

	"lifeboat.dev/lifeboat/internal/detach"
	"lifeboat.dev/lifeboat/internal/kube"
)

// Wait is the volume-detachment wait. VolumeAttachments are read from one cluster-wide
// informer, started on the first wait and shared by every node: waiting costs no request
// beyond one GET per claim (to learn its volume).
type Wait struct {
	client   kubernetes.Interface
	interval time.Duration

	start  sync.Once
	lister storagelisters.VolumeAttachmentLister
	synced cache.InformerSynced
	stop   context.Context

	mu      sync.Mutex
	volumes map[string]string // claim ("namespace/name") → its PersistentVolume, once bound
}

// New returns the wait; it starts its informer under ctx when first used.
func New(ctx context.Context, client kubernetes.Interface) *Wait {
	return &Wait{client: client, interval: time.Second, stop: ctx, volumes: map[string]string{}}
}

func (w *Wait) Name() string            { return "volumes" }
func (w *Wait) Interval() time.Duration { return w.interval }

// Held lists the attachments to s.Node of the volumes bound to s.Claims, as "pv/attachment".
func (w *Wait) Held(ctx context.Context, s detach.Subject) ([]string, error) {
	if len(s.Claims) == 0 {
		return nil, nil
	}
	if err := w.started(ctx); err != nil {
		return nil, err
	}
	pvs := map[string]bool{}
	for _, claim := range s.Claims {
		pv, err := w.volumeOf(ctx, claim)
		if err != nil {
			return nil, err
		}
		if pv != "" {
			pvs[pv] = true
		}
	}
	attachments, err := w.lister.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	var held []string
	for _, va := range attachments {
		if pv := va.Spec.Source.PersistentVolumeName; va.Spec.NodeName == s.Node && pv != nil && pvs[*pv] {
			held = append(held, *pv+"/"+va.Name)
		}
	}
	slices.Sort(held)
	return held, nil
}

// volumeOf is the PersistentVolume the claim is bound to ("" for a claim that is gone or
// unbound: nothing of it can be attached).
func (w *Wait) volumeOf(ctx context.Context, claim string) (string, error) {
	w.mu.Lock()
	pv, known := w.volumes[claim]
	w.mu.Unlock()
	if known {
		return pv, nil
	}
	namespace, name, ok := strings.Cut(claim, "/")
	if !ok {
		return "", fmt.Errorf("claim %q: want namespace/name", claim)
	}
	pvc, err := w.client.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return "", nil
	case apierrors.IsForbidden(err):
		return "", fmt.Errorf("%w: cannot read PersistentVolumeClaim %s: %v", detach.ErrSkip, claim, err)
	case err != nil:
		return "", fmt.Errorf("read PersistentVolumeClaim %s: %w", claim, err)
	}
	pv = pvc.Spec.VolumeName
	if pv != "" { // a claim's volume never changes once bound
		w.mu.Lock()
		w.volumes[claim] = pv
		w.mu.Unlock()
	}
	return pv, nil
}

// started starts the informer once and waits for its first list.
func (w *Wait) started(ctx context.Context) error {
	w.start.Do(func() {
		factory := informers.NewSharedInformerFactoryWithOptions(w.client, 0, informers.WithTransform(kube.DropManagedFields))
		informer := factory.Storage().V1().VolumeAttachments()
		w.lister, w.synced = informer.Lister(), informer.Informer().HasSynced
		factory.Start(w.stop.Done())
	})
	syncCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), w.synced) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%w: VolumeAttachments could not be listed within 30 s (is volumeattachments list/watch granted?)", detach.ErrSkip)
	}
	return nil
}

// Compile-time check.
var _ detach.Wait = (*Wait)(nil)
