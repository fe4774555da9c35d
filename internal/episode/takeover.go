// SPDX-License-Identifier: Apache-2.0

package episode

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"lifeboat.dev/lifeboat/internal/nodes"
)

// takeoverFresh is how long the list a term begins with stands in for a node's own read.
const takeoverFresh = 10 * time.Second

// takeoverPage is how many nodes one page of that list holds.
const takeoverPage = 500

// Takeover is the list of the nodes read when this replica began to lead. A drain is decided
// on a fresh enough read of its node (see Handler.Reconcile): one made after the previous
// leader's work stopped, since the previous leader is the writer whose records the informer
// may not show yet. A list read at the start of the term is such a read for every node at
// once, where the reconciles would otherwise read each node they take over one by one, all in
// the term's first seconds. Each node's copy serves its first reconcile of the term only,
// within takeoverFresh; later ones read their node as ever (they follow this leader's own
// writes). The zero of a nil *Takeover is no list: each reconcile reads its node.
type Takeover struct {
	client kubernetes.Interface
	now    func() time.Time

	mu    sync.Mutex
	nodes map[string]*corev1.Node
	until time.Time
}

// NewTakeover reads the nodes through client.
func NewTakeover(client kubernetes.Interface) *Takeover {
	return &Takeover{client: client, now: time.Now}
}

// Read lists every node, a page at a time, for the first reconciles of this term. Call it
// once the term has begun (the previous leader's work has stopped) and before the reconciler
// starts; an error leaves each reconcile to read its own node.
func (t *Takeover) Read(ctx context.Context) (int, error) {
	// An earlier term's list predates this term's previous leader: never let it stand in.
	t.mu.Lock()
	t.nodes = nil
	t.mu.Unlock()
	read := map[string]*corev1.Node{}
	opts := metav1.ListOptions{Limit: takeoverPage}
	for {
		list, err := t.client.CoreV1().Nodes().List(ctx, opts)
		if err != nil {
			return 0, fmt.Errorf("list nodes: %w", err)
		}
		for i := range list.Items {
			read[list.Items[i].Name] = keptByDrain(&list.Items[i])
		}
		if opts.Continue = list.Continue; opts.Continue == "" {
			break
		}
	}
	t.mu.Lock()
	t.nodes, t.until = read, t.now().Add(takeoverFresh)
	t.mu.Unlock()
	return len(read), nil
}

// take returns the node's copy from the list, once, while the list stands; else nil.
func (t *Takeover) take(name string) *corev1.Node {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.now().After(t.until) {
		t.nodes = nil
		return nil
	}
	n := t.nodes[name]
	delete(t.nodes, name)
	return n
}

// freshEnough is a read of the node made after this term began: the list's copy, or the
// informer's copy (cached) when a later write produced it; nil when the reconcile must read
// the node itself.
func (t *Takeover) freshEnough(cached *corev1.Node) *corev1.Node {
	listed := t.take(cached.Name)
	switch {
	case listed == nil:
		return nil
	case nodes.WrittenAfter(cached, listed):
		return keptByDrain(cached.DeepCopy())
	}
	return listed
}
