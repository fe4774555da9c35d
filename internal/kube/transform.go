package kube

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
)

// Informer transforms: an informer keeps every object it watches for the life of the process,
// so at the scale of an Availability Zone (thousands of Nodes, tens of thousands of Pods) what
// it keeps is most of the controller's memory. They drop what Lifeboat never reads. Node
// writes are merge patches of the fields Lifeboat edits (nodes.Writer), and pods are never
// written, so nothing dropped here can be written back.

// DropManagedFields removes the server-side-apply bookkeeping, often the largest part of an
// object and never read by Lifeboat. It fits cache.TransformFunc and informers.WithTransform.
func DropManagedFields(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// TrimNode keeps of a Node what Lifeboat reads (metadata, spec, conditions, addresses, node
// info) and drops the rest: managed fields, the image list (up to 50 entries with their
// digests on every node), and the volumes the kubelet reports in use or attached (the
// hand-back reads VolumeAttachments instead). Other objects pass through DropManagedFields.
func TrimNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return DropManagedFields(obj)
	}
	n.ManagedFields = nil
	n.Status.Images = nil
	n.Status.VolumesInUse = nil
	n.Status.VolumesAttached = nil
	return n, nil
}

// TrimPod keeps of a Pod what a drain reads to select, evict and report it: its metadata
// (without managed fields and the last-applied configuration) and, of its spec and status,
// the node, its emptyDir and claim volumes, tolerations, priority, grace period, host
// networking, phase and IP. The containers, their statuses and the conditions, most of a
// pod's size, are dropped. Drains evict by name with the pod's UID as precondition and never
// write a pod back.
func TrimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return DropManagedFields(obj)
	}
	p.ManagedFields = nil
	delete(p.Annotations, corev1.LastAppliedConfigAnnotation)
	// Of the volumes, a drain reads the emptyDirs (local data) and the claims (the hand-back
	// waits for their attachments; a generic ephemeral volume's claim is named after the pod
	// and the volume). The projected token, ConfigMap and Secret volumes every pod has are
	// dropped: a Volume is about 260 bytes before any field, whatever its kind.
	var volumes []corev1.Volume
	for _, v := range p.Spec.Volumes {
		if v.EmptyDir != nil || v.PersistentVolumeClaim != nil || v.Ephemeral != nil {
			volumes = append(volumes, corev1.Volume{Name: v.Name, VolumeSource: corev1.VolumeSource{
				EmptyDir: v.EmptyDir, PersistentVolumeClaim: v.PersistentVolumeClaim, Ephemeral: v.Ephemeral}})
		}
	}
	p.Spec = corev1.PodSpec{
		NodeName: p.Spec.NodeName, Volumes: volumes, Tolerations: p.Spec.Tolerations,
		Priority: p.Spec.Priority, PriorityClassName: p.Spec.PriorityClassName,
		TerminationGracePeriodSeconds: p.Spec.TerminationGracePeriodSeconds, HostNetwork: p.Spec.HostNetwork,
	}
	p.Status = corev1.PodStatus{Phase: p.Status.Phase, PodIP: p.Status.PodIP}
	return p, nil
}
