// SPDX-License-Identifier: Apache-2.0

// Package nodes changes Node objects without losing another writer's data.
//
// Every write is a JSON merge patch that holds only the changed fields plus the
// resourceVersion the change was computed from. The API server refuses the patch with 409
// Conflict if the Node changed since, and the writer then re-reads it and recomputes the
// change. This matters most for spec.taints, which the API replaces as a whole list: a patch
// built from a stale copy would silently delete taints added meanwhile. A merge patch rather
// than an Update also keeps fields this client's API version does not know.
//
// "Nothing to change" is only concluded on a fresh read, never on a cached copy.
//
// A write is computed first from the newest copy at hand: the caller's, or the node
// informer's when the process keeps one (UseCache) and a later write produced it. A write
// that waited its turn (the node condition, a drain's last record write) would otherwise
// start from a copy another write of this process had already made stale.
package nodes

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
)

// Edit changes a node in place. It is called on a private copy, possibly several times (once
// per attempt), and must decide from the node it is given, not from earlier calls.
type Edit func(n *corev1.Node)

// Writer applies edits to nodes.
type Writer struct {
	client kubernetes.Interface
	// DryRun computes changes but never writes them.
	DryRun bool
	// Conflicts counts patches refused because the node had changed; for tests and metrics.
	Conflicts func()
	// Clock stamps the condition's heartbeat and transition times; default the real clock.
	Clock clock.PassiveClock
	// cached looks up the informer's copy of a node (UseCache).
	cached atomic.Pointer[func(name string) *corev1.Node]
}

// UseCache has each write start from the informer's copy of its node (lookup returns nil when
// it has none) where that copy is newer than the caller's. Safe to call while writes run.
func (w *Writer) UseCache(lookup func(name string) *corev1.Node) { w.cached.Store(&lookup) }

// startFrom is the copy a write is computed from first: hint, or the informer's copy when a
// later write produced it (a copy of the informer's object, which is shared).
func (w *Writer) startFrom(name string, hint *corev1.Node) *corev1.Node {
	lookup := w.cached.Load()
	if lookup == nil {
		return hint
	}
	if cached := (*lookup)(name); cached != nil && WrittenAfter(cached, hint) {
		return cached.DeepCopy()
	}
	return hint
}

// WrittenAfter reports whether a later write produced a than b, as their resourceVersions
// tell: etcd's revisions, which grow with every write. The API calls them opaque, so this
// only chooses between copies: a wrong choice costs a conflict and a read, never a wrong
// write, since a patch carries the resourceVersion it was computed from. True when b is nil;
// false when either does not read as a revision.
func WrittenAfter(a, b *corev1.Node) bool {
	if b == nil {
		return true
	}
	ra, errA := strconv.ParseUint(a.ResourceVersion, 10, 64)
	rb, errB := strconv.ParseUint(b.ResourceVersion, 10, 64)
	return errA == nil && errB == nil && ra > rb
}

// NewWriter returns a Writer that uses client.
func NewWriter(client kubernetes.Interface) *Writer { return &Writer{client: client} }

// Result says what an Apply did.
type Result struct {
	Node    *corev1.Node // the node after the change (or as read, when nothing changed)
	Changed bool         // a patch was written (or, in dry-run, would have been)
	Patch   []byte       // the last patch sent or, in dry-run, computed
}

// Conflict retries. Every 409 means another writer made progress; kubelet, autoscalers and
// other controllers may all write one node, so Lifeboat keeps trying until its context (which
// carries the notice's deadline) ends, waiting a jittered 10 ms growing to 1 s between
// attempts, and never more than maxAttempts times.
const (
	firstConflictDelay = 10 * time.Millisecond
	maxConflictDelay   = time.Second
	maxAttempts        = 200
)

// Apply reads the node, applies the edits to a copy and writes the difference with a
// resourceVersion precondition, retrying from a fresh read on conflict. hint, when not nil, is
// a recent copy of the node used for the first attempt to save a read; it is never trusted to
// decide that nothing needs to change. what describes the change for error messages.
func (w *Writer) Apply(ctx context.Context, name string, hint *corev1.Node, what string, edits ...Edit) (Result, error) {
	current := w.startFrom(name, hint)
	if current != nil {
		if _, _, changed, err := plan(current, edits); err == nil && !changed {
			current = nil // maybe stale: decide "nothing to do" on a fresh read
		}
	}
	var res Result
	attempt := func() error {
		if current == nil {
			n, err := w.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			current = n
		}
		desired, patch, changed, err := plan(current, edits)
		if err != nil {
			return err
		}
		if !changed {
			res = Result{Node: current}
			return nil
		}
		if w.DryRun {
			res = Result{Node: desired, Changed: true, Patch: patch}
			return nil
		}
		updated, err := w.client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		if err != nil {
			return err
		}
		res = Result{Node: updated, Changed: true, Patch: patch}
		return nil
	}
	if err := w.retry(ctx, name, what, attempt, func() { current = nil }); err != nil {
		return Result{}, err
	}
	return res, nil
}

// retry runs attempt until it succeeds, fails with another error than a conflict, or has had
// maxAttempts; after each conflict it calls reread (the next attempt starts from a fresh read)
// and waits a jittered, growing delay.
func (w *Writer) retry(ctx context.Context, name, what string, attempt func() error, reread func()) error {
	delay := firstConflictDelay
	for i := 1; ; i++ {
		err := attempt()
		if err == nil {
			return nil
		}
		if !apierrors.IsConflict(err) || i == maxAttempts {
			return fmt.Errorf("node %s: %s: %w", name, what, err)
		}
		if w.Conflicts != nil {
			w.Conflicts()
		}
		reread() // the node changed since the copy the patch came from
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %s: %s: gave up after %d conflicts: %w", name, what, i, err)
		case <-time.After(delay/2 + rand.N(delay)):
		}
		delay = min(delay*3/2, maxConflictDelay)
	}
}

// plan applies the edits to a copy of current and returns the copy and the patch to it.
func plan(current *corev1.Node, edits []Edit) (*corev1.Node, []byte, bool, error) {
	desired := current.DeepCopy()
	for _, e := range edits {
		e(desired)
	}
	patch, changed, err := mergePatch(current, desired)
	return desired, patch, changed, err
}

// mergePatch builds a JSON merge patch from current to desired over the fields Lifeboat
// edits (labels, annotations, taints, unschedulable), with current's resourceVersion as a
// precondition. changed is false when they do not differ.
func mergePatch(current, desired *corev1.Node) (patch []byte, changed bool, err error) {
	meta := map[string]any{}
	spec := map[string]any{}
	if d := mapDiff(current.Labels, desired.Labels); d != nil {
		meta["labels"] = d
	}
	if d := mapDiff(current.Annotations, desired.Annotations); d != nil {
		meta["annotations"] = d
	}
	if !slices.EqualFunc(current.Spec.Taints, desired.Spec.Taints, taintEqual) {
		// A merge patch replaces a list whole, which is why the precondition is essential.
		if len(desired.Spec.Taints) == 0 {
			spec["taints"] = nil
		} else {
			spec["taints"] = desired.Spec.Taints
		}
	}
	if current.Spec.Unschedulable != desired.Spec.Unschedulable {
		spec["unschedulable"] = desired.Spec.Unschedulable
	}
	if len(meta) == 0 && len(spec) == 0 {
		return nil, false, nil
	}
	meta["resourceVersion"] = current.ResourceVersion
	body := map[string]any{"metadata": meta}
	if len(spec) > 0 {
		body["spec"] = spec
	}
	patch, err = json.Marshal(body)
	return patch, true, err
}

// mapDiff is the merge-patch form of the change from a to b: changed keys with their new
// value, removed keys with null; nil when equal.
func mapDiff(a, b map[string]string) map[string]any {
	if maps.Equal(a, b) {
		return nil
	}
	d := map[string]any{}
	for k, v := range b {
		if old, ok := a[k]; !ok || old != v {
			d[k] = v
		}
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			d[k] = nil
		}
	}
	return d
}

func taintEqual(a, b corev1.Taint) bool {
	return a.Key == b.Key && a.Value == b.Value && a.Effect == b.Effect && a.TimeAdded.Equal(b.TimeAdded)
}
