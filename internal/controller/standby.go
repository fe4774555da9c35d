// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"errors"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	toolscache "k8s.io/client-go/tools/cache"

	"lifeboat.dev/lifeboat/internal/episode/driver"
	"lifeboat.dev/lifeboat/internal/kube"
	"lifeboat.dev/lifeboat/internal/ownership"
)

// warm is what a replica keeps ready whether it leads or not, so that a new leader works the
// moment it holds the Lease: the node informer with the ownership resolver's index and the
// reconciler's handlers, the per-node reconciler (its workers idle), and the drains' shared
// pod informer. A standby keeps the caches synced with one list and one watch each, and
// writes nothing: the reconciler's handlers offer nodes only while the work loop runs, which
// offers every node once when it starts (work).
type warm struct {
	factory  informers.SharedInformerFactory
	nodes    toolscache.SharedIndexInformer
	resolver *ownership.Resolver
	episodes *driver.Driver
	offer    func(*corev1.Node) // to the reconciler, while the work loop runs
	stop     func()
	synced   atomic.Bool // the node informer has listed the cluster's nodes
}

// warmUp builds and starts what the work loop needs; stop takes it down.
func (c *Controller) warmUp() (w *warm, err error) {
	w = &warm{factory: informers.NewSharedInformerFactoryWithOptions(c.client, 0, informers.WithTransform(kube.TrimNode))}
	w.nodes = w.factory.Core().V1().Nodes().Informer()
	if w.resolver, err = ownership.NewResolver(w.nodes, c.instances, ownership.Options{
		CheckManagedTag: c.cfg.CheckTagBeforeDraining, ManagedTag: c.cfg.ManagedTag,
		ClusterName: c.cfg.ClusterName, UseProviderID: c.cfg.UseProviderID,
		Claims: c.claimReports(),
	}); err != nil {
		return nil, err
	}
	if w.episodes, w.offer, err = newEpisodes(w.nodes, c.handler, c.cfg, c.metrics, c.log, c.working.Load); err != nil {
		return nil, err
	}
	// The drains' claims follow the informer: renewed only once another origin waits.
	if err := c.handler.FollowNodes(w.nodes); err != nil {
		w.episodes.ShutDown()
		return nil, err
	}
	stopPods := func() {}
	if c.cfg.UseAPIServerCache {
		// Drains read one shared pod informer rather than each listing and watching its node's
		// pods. Nothing waits for it: intake and cordons do not need it, and a drain waits for
		// its first list itself.
		if stopPods, err = c.shareNodePods(); err != nil {
			w.episodes.ShutDown()
			return nil, err
		}
	}
	done := make(chan struct{})
	w.factory.Start(done)
	go func() {
		if toolscache.WaitForCacheSync(done, w.nodes.HasSynced) {
			w.synced.Store(true)
		}
	}()
	c.warmed.Store(w)
	w.stop = func() {
		c.warmed.Store(nil)
		close(done)
		w.factory.Shutdown()
		stopPods()
		w.episodes.ShutDown()
	}
	return w, nil
}

// offerAll offers the reconciler every node with work, as the informer's first list did
// while no work loop ran to take it.
func (w *warm) offerAll(offer func(*corev1.Node)) {
	for _, obj := range w.nodes.GetStore().List() {
		if n, ok := obj.(*corev1.Node); ok {
			offer(n)
		}
	}
}

// standbyReady is a standby's readiness: its caches are synced, so that it can take over at
// once (the chart's disruption budget counts on it when the leader's own pod is evicted).
func (c *Controller) standbyReady() error {
	w := c.warmed.Load()
	switch {
	case w == nil:
		return errors.New("standby: not started")
	case !w.synced.Load():
		return errors.New("standby: the node informer has not listed the cluster's nodes yet")
	case c.cfg.UseAPIServerCache && !c.podsSynced.Load():
		return errors.New("standby: the drains' pod informer has not listed the cluster's pods yet")
	}
	return nil
}
