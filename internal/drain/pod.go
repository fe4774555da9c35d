// SPDX-License-Identifier: Apache-2.0

package drain

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"lifeboat.dev/lifeboat/internal/kube"
)

// Pod is what a drain knows of a pod: enough to select it, evict it by name with its UID as
// precondition, wait for it to go and report it. Its fields carry the paths of corev1.Pod's.
//
// Why not a trimmed corev1.Pod: the shared pod informer keeps one for every pod in the
// cluster, and drains hold their node's pods until they end. A corev1.Pod is large before any
// of its fields is set, its spec most of it; a Pod keeps only what a drain reads. At the
// scale of an Availability Zone (tens of thousands of pods) that is most of the controller's
// memory (docs/benchmarks.md).
type Pod struct {
	// ObjectMeta keeps the name, namespace, UID, resourceVersion, deletion timestamp, the
	// controller's owner reference and the annotations a drain reads (AnnotationDoNotDisrupt,
	// AnnotationSafeToEvict, the mirror pod's). Labels and other annotations are dropped:
	// they can be kilobytes a pod (sidecar injectors, last-applied configurations), and a
	// disruption budget's selector is the API server's to match.
	//
	// The embedded ObjectMeta brings its methods along: String and the protobuf methods see
	// the metadata alone. A Pod is never encoded or sent; it is read.
	metav1.ObjectMeta
	Spec   PodSpec
	Status PodStatus
}

// PodSpec is what a drain reads of a pod's spec.
type PodSpec struct {
	NodeName                      string
	Volumes                       []PodVolume // only those with local data or a claim
	Tolerations                   []corev1.Toleration
	Priority                      *int32
	PriorityClassName             string
	TerminationGracePeriodSeconds *int64
	HostNetwork                   bool
}

// PodVolume is a volume that keeps local data (emptyDir) or names a PersistentVolumeClaim
// (directly, or a generic ephemeral volume's, which is named after the pod and the volume).
type PodVolume struct {
	Name      string
	EmptyDir  bool
	ClaimName string // a persistentVolumeClaim volume's claim
	Ephemeral bool
}

// PodStatus is what a drain reads of a pod's status.
type PodStatus struct {
	Phase corev1.PodPhase
	PodIP string
	// StartTime is when the kubelet accepted the pod: a do-not-disrupt duration counts from it.
	StartTime *metav1.Time
}

// annotationsRead are the only annotations a Pod keeps.
var annotationsRead = []string{AnnotationDoNotDisrupt, AnnotationSafeToEvict, corev1.MirrorPodAnnotationKey}

// NewPod copies what a drain reads of p into a new Pod. p's struct is not kept; its
// tolerations, pointers and deletion timestamp are shared, and nothing writes them.
func NewPod(p *corev1.Pod) *Pod {
	out := &Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
			DeletionTimestamp: p.DeletionTimestamp},
		Spec: PodSpec{NodeName: p.Spec.NodeName, Tolerations: p.Spec.Tolerations, Priority: p.Spec.Priority,
			PriorityClassName: p.Spec.PriorityClassName, TerminationGracePeriodSeconds: p.Spec.TerminationGracePeriodSeconds,
			HostNetwork: p.Spec.HostNetwork},
		Status: PodStatus{Phase: p.Status.Phase, PodIP: p.Status.PodIP, StartTime: p.Status.StartTime},
	}
	if ref := metav1.GetControllerOfNoCopy(p); ref != nil {
		out.OwnerReferences = []metav1.OwnerReference{*ref}
	}
	for _, key := range annotationsRead {
		if v, ok := p.Annotations[key]; ok {
			if out.Annotations == nil {
				out.Annotations = map[string]string{}
			}
			out.Annotations[key] = v
		}
	}
	for _, v := range p.Spec.Volumes {
		switch {
		case v.EmptyDir != nil:
			out.Spec.Volumes = append(out.Spec.Volumes, PodVolume{Name: v.Name, EmptyDir: true})
		case v.PersistentVolumeClaim != nil:
			out.Spec.Volumes = append(out.Spec.Volumes, PodVolume{Name: v.Name, ClaimName: v.PersistentVolumeClaim.ClaimName})
		case v.Ephemeral != nil:
			out.Spec.Volumes = append(out.Spec.Volumes, PodVolume{Name: v.Name, Ephemeral: true})
		}
	}
	return out
}

// PodsOf copies what a drain reads of each of a list's pods.
func PodsOf(items []corev1.Pod) []*Pod {
	out := make([]*Pod, len(items))
	for i := range items {
		out[i] = NewPod(&items[i])
	}
	return out
}

// KeepPod is the pod informer's transform (cache.TransformFunc): it keeps a Pod of each
// corev1.Pod, and passes anything else through with its managed fields dropped. A Pod passes
// unchanged, as the informer requires of a transform.
func KeepPod(obj any) (any, error) {
	switch p := obj.(type) {
	case *corev1.Pod:
		return NewPod(p), nil
	case *Pod:
		return p, nil // already kept, maybe already in the store: not touched
	}
	return kube.DropManagedFields(obj)
}

// podOf reads an informer's or a watch's object as a Pod: the shared informer's are Pods
// already (KeepPod); an informer without the transform, or a watch, hands out corev1.Pods.
func podOf(obj any) (*Pod, bool) {
	switch p := obj.(type) {
	case *Pod:
		return p, true
	case *corev1.Pod:
		return NewPod(p), true
	}
	return nil, false
}

// GetObjectKind makes a Pod a runtime.Object, as informers expect of what they keep; it
// carries no type information.
func (p *Pod) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject makes a Pod a runtime.Object.
func (p *Pod) DeepCopyObject() runtime.Object {
	if c := p.DeepCopy(); c != nil {
		return c
	}
	return nil
}

// DeepCopy copies p and everything it points to. It hides ObjectMeta's DeepCopy, which would
// copy the metadata alone.
func (p *Pod) DeepCopy() *Pod {
	if p == nil {
		return nil
	}
	out := &Pod{ObjectMeta: *p.ObjectMeta.DeepCopy(), Spec: p.Spec, Status: p.Status}
	out.Spec.Volumes = slices.Clone(p.Spec.Volumes)
	if p.Spec.Tolerations != nil {
		out.Spec.Tolerations = make([]corev1.Toleration, len(p.Spec.Tolerations))
		for i := range p.Spec.Tolerations {
			p.Spec.Tolerations[i].DeepCopyInto(&out.Spec.Tolerations[i])
		}
	}
	out.Spec.Priority = clonePointer(p.Spec.Priority)
	out.Spec.TerminationGracePeriodSeconds = clonePointer(p.Spec.TerminationGracePeriodSeconds)
	out.Status.StartTime = clonePointer(p.Status.StartTime)
	return out
}

func clonePointer[T any](v *T) *T {
	if v == nil {
		return nil
	}
	c := *v
	return &c
}
