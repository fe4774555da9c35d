// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// CachedNodes reads nodes from an informer's cache (the controller): a reconcile decides from
// its copy and reads fresh data itself before it writes.
type CachedNodes struct{ cache.Indexer }

// Node is the cached copy of the node, or nil when it is gone.
func (c CachedNodes) Node(_ context.Context, name string) (*corev1.Node, error) {
	obj, exists, err := c.GetByKey(name)
	if err != nil || !exists {
		return nil, err
	}
	n, _ := obj.(*corev1.Node)
	return n, nil
}

// OwnNode reads one node with a Get each time (the agent, which may read only its own node):
// first the copy read at start, so that work a previous process left goes on without another
// request.
type OwnNode struct {
	client  kubernetes.Interface
	mu      sync.Mutex
	atStart *corev1.Node
}

// NewOwnNode reads the node with client, starting with the copy atStart.
func NewOwnNode(client kubernetes.Interface, atStart *corev1.Node) *OwnNode {
	return &OwnNode{client: client, atStart: atStart}
}

// Node is the copy read at start the first time, then a fresh read.
func (o *OwnNode) Node(ctx context.Context, name string) (*corev1.Node, error) {
	o.mu.Lock()
	node := o.atStart
	o.atStart = nil
	o.mu.Unlock()
	if node != nil {
		return node, nil
	}
	return o.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
}
