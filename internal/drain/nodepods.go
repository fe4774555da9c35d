// SPDX-License-Identifier: Apache-2.0

package drain

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/client-go/tools/cache"
)

// NodePods serves every drain of a process from one shared pod informer: a drain lists its
// node's pods from the informer's node index and follows them (deletions, late arrivals)
// through the informer's events, instead of sending a list and opening a watch of its own.
//
// Why it matters at scale: the API server's priority and fairness charges every pod write
// for the watches on pods (a seat more for every ten watches). With a thousand drains, each
// with a watch of its own, every eviction was charged for all their watches
// (docs/benchmarks.md), and the evictions went at a fraction of the rate it could take.
type NodePods struct {
	informer cache.SharedIndexInformer

	mu        sync.RWMutex
	followers map[string]map[*tracker]struct{} // node name -> the trackers of its drains
}

// NewNodePods makes inf keep Pods (KeepPod), indexes it by node and registers the event
// handler that feeds the drains; call it before the informer starts, and let nothing else
// read it: it holds Pods, not corev1.Pods.
func NewNodePods(inf cache.SharedIndexInformer) (*NodePods, error) {
	if err := inf.SetTransform(KeepPod); err != nil {
		return nil, fmt.Errorf("keep pods for drains: %w", err)
	}
	if err := IndexByNodeName(inf); err != nil {
		return nil, fmt.Errorf("index pods by node: %w", err)
	}
	p := &NodePods{informer: inf, followers: map[string]map[*tracker]struct{}{}}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { p.dispatch(obj, false) },
		UpdateFunc: func(_, obj any) { p.dispatch(obj, false) },
		DeleteFunc: func(obj any) { p.dispatch(obj, true) },
	}); err != nil {
		return nil, fmt.Errorf("watch pods for drains: %w", err)
	}
	return p, nil
}

// follow reports every change to the node's pods to tr until stop is called. Called before
// the drain lists the node's pods from the index, it misses nothing: the informer updates its
// index before it tells the handlers, so a change the list did not show reaches tr afterwards.
func (p *NodePods) follow(node string, tr *tracker) (stop func()) {
	p.mu.Lock()
	if p.followers[node] == nil {
		p.followers[node] = map[*tracker]struct{}{}
	}
	p.followers[node][tr] = struct{}{}
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		delete(p.followers[node], tr)
		if len(p.followers[node]) == 0 {
			delete(p.followers, node)
		}
		p.mu.Unlock()
	}
}

// podsOn waits for the informer's first list (until ctx ends) and returns the node's pods
// (the informer's objects: read only).
func (p *NodePods) podsOn(ctx context.Context, node string) ([]*Pod, error) {
	if !p.informer.HasSynced() && !cache.WaitForCacheSync(ctx.Done(), p.informer.HasSynced) {
		return nil, fmt.Errorf("list pods on node %s: the pod informer has not listed the cluster's pods yet: %w", node, ctx.Err())
	}
	pods, _, err := InformerLister{Informer: p.informer}.PodsOnNode(ctx, node)
	return pods, err
}

// cachedOn returns the node's pods as the informer holds them now (read only), and false
// before its first list: no wait, no request.
func (p *NodePods) cachedOn(node string) ([]*Pod, bool) {
	if !p.informer.HasSynced() {
		return nil, false
	}
	pods, _, err := InformerLister{Informer: p.informer}.PodsOnNode(context.Background(), node)
	return pods, err == nil
}

// dispatch hands one informer event to the trackers of the pod's node, if it is being drained.
func (p *NodePods) dispatch(obj any, deleted bool) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		// The informer's watch broke and its relist no longer shows the pod: it is gone.
		obj, deleted = tomb.Obj, true
	}
	pod, ok := podOf(obj)
	if !ok || pod.Spec.NodeName == "" {
		return
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	for tr := range p.followers[pod.Spec.NodeName] {
		if deleted {
			tr.markGone(pod.UID, time.Now())
		}
		tr.seen(pod, deleted)
	}
}

// Following is how many drains the informer feeds now (for tests and debugging).
func (p *NodePods) Following() int {
	p.mu.RLock()
	defer p.mu.RUnlock()
	n := 0
	for _, trs := range p.followers {
		n += len(trs)
	}
	return n
}
