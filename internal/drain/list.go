// SPDX-License-Identifier: Apache-2.0

package drain

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// PodLister lists the pods bound to a node, with the resourceVersion a watch for their
// deletion can start from. The pods may be an informer's own objects: read, never written.
type PodLister interface {
	PodsOnNode(ctx context.Context, node string) (pods []*Pod, resourceVersion string, err error)
}

// APILister lists through the API server: from its watch cache (resourceVersion=0, cheap;
// Lifeboat's default) or, with Quorum, from etcd.
type APILister struct {
	Client kubernetes.Interface
	Quorum bool
}

// PodsOnNode lists the node's pods with a spec.nodeName field selector.
func (l APILister) PodsOnNode(ctx context.Context, node string) ([]*Pod, string, error) {
	opts := metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String()}
	if !l.Quorum {
		opts.ResourceVersion = "0"
	}
	list, err := l.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, opts)
	if err != nil {
		return nil, "", fmt.Errorf("list pods on node %s: %w", node, err)
	}
	return PodsOf(list.Items), list.ResourceVersion, nil
}

// NodeNameIndex indexes pods by spec.nodeName in an informer.
const NodeNameIndex = "spec.nodeName"

// InformerLister lists from a pod informer that has NodeNameIndex (see IndexByNodeName).
type InformerLister struct{ Informer cache.SharedIndexInformer }

// IndexByNodeName adds NodeNameIndex to a pod informer; call it before the informer starts.
// The informer may keep Pods (KeepPod) or corev1.Pods.
func IndexByNodeName(inf cache.SharedIndexInformer) error {
	return inf.AddIndexers(cache.Indexers{NodeNameIndex: func(obj any) ([]string, error) {
		switch pod := obj.(type) {
		case *Pod:
			return nonEmpty(pod.Spec.NodeName), nil
		case *corev1.Pod:
			return nonEmpty(pod.Spec.NodeName), nil
		}
		return nil, nil
	}})
}

func nonEmpty(name string) []string {
	if name == "" {
		return nil
	}
	return []string{name}
}

// PodsOnNode returns the informer's own pods for the node, not copies, when it keeps Pods
// (KeepPod): a drain keeps them until it ends, and a thousand drains at once would hold a
// copy of every pod they drain. They are read, never written (Lifeboat evicts and deletes by
// name and UID). An informer of corev1.Pods is read through NewPod.
func (l InformerLister) PodsOnNode(ctx context.Context, node string) ([]*Pod, string, error) {
	if !l.Informer.HasSynced() {
		return nil, "", fmt.Errorf("list pods on node %s: pod informer not synced yet", node)
	}
	objs, err := l.Informer.GetIndexer().ByIndex(NodeNameIndex, node)
	if err != nil {
		return nil, "", fmt.Errorf("list pods on node %s: %w", node, err)
	}
	pods := make([]*Pod, 0, len(objs))
	for _, o := range objs {
		if pod, ok := podOf(o); ok {
			pods = append(pods, pod)
		}
	}
	return pods, l.Informer.LastSyncResourceVersion(), nil
}
