// SPDX-License-Identifier: Apache-2.0

package kube

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
)

// Informer transforms: an informer keeps every object it watches for the life of the process,
// so at the scale of an Availability Zone (thousands of Nodes, tens of thousands of Pods) what
// it keeps is most of the controller's memory. They drop what Lifeboat never reads. Node
// writes are merge patches of the fields Lifeboat edits (nodes.Writer), so nothing dropped
// here can be written back. The drains' pod informer keeps a smaller type of its own
// (drain.KeepPod).

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
