// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/episode"
	"lifeboat.dev/lifeboat/internal/episode/driver"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/panics"
	"lifeboat.dev/lifeboat/internal/record"
)

// maxDraining bounds the nodes reconciled at once, most of them draining (a drain mostly
// waits on a pod watch). Intake (WORKERS) cordons a burst first; the client's rate limit
// bounds the API requests of all drains together.
const maxDraining = 1000

// newEpisodes builds the driver of every node's interruption episode (the one both modes
// share), reading nodes from the informer, and decides what wakes a node: an informer event
// on a node whose record has work (pending notices, or an episode whose instance booted
// again). An update wakes a node only when it changes its work (episode.Wakes), so the
// reconciler's own renewals do not undo the backoff. Because the work lives on the Node, a
// restarted process or a new leader finds it in the informer's first list and goes on.
//
// The informer runs on a standby too (a warm cache): working says whether the work loop runs,
// and until it does no node is offered, nor an invalid record reported. offer is what the
// work loop calls on every node of the cache when it starts.
func newEpisodes(informer cache.SharedIndexInformer, handler *episode.Handler, cfg *config.Config, m *metrics.Metrics, log *slog.Logger,
	working func() bool) (episodes *driver.Driver, offer func(*corev1.Node), err error) {
	episodes, err = driver.New(driver.Options{Reconciler: handler, Nodes: driver.CachedNodes{Indexer: informer.GetIndexer()}, Workers: maxDraining,
		FirstRetry: time.Second, MaxRetry: time.Minute, Name: "lifeboat-node-episodes", Panics: m, Logger: log})
	if err != nil {
		return nil, nil, err
	}
	// The informer's goroutine reads each node's record, which is input: a panic drops that
	// event only.
	offer = func(n *corev1.Node) {
		if !working() {
			return
		}
		defer panics.Recover(panics.NodeEvent, log, m, nil, "node", n.Name)
		if hasWork(n, handler, cfg) {
			episodes.Add(n.Name)
		}
	}
	_, err = informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if n, ok := obj.(*corev1.Node); ok {
				offer(n)
			}
		},
		UpdateFunc: func(old, obj any) {
			o, _ := old.(*corev1.Node)
			if n, ok := obj.(*corev1.Node); ok {
				defer panics.Recover(panics.NodeEvent, log, m, nil, "node", n.Name)
				if episode.Wakes(o, n, handler.Origin()) {
					offer(n)
				}
			}
		},
	})
	if err != nil {
		episodes.ShutDown()
		return nil, nil, err
	}
	return episodes, offer, nil
}

// hasWork reports whether the node's record has work (episode.HasWork): pending notices, an
// episode that is over, its instance booted again or the node taken back by an operator (given
// back, its condition cleared, without waiting for a next notice), or what a newer Lifeboat
// left. An invalid record is reported, and never acted on.
func hasWork(n *corev1.Node, handler *episode.Handler, cfg *config.Config) bool {
	if n.Annotations[record.Annotation] == "" {
		return false
	}
	rec, err := record.Read(n)
	if err != nil {
		handler.ReportInvalidRecord(n, err)
		return false
	}
	return episode.HasWork(n, rec, cfg, handler.Origin())
}

// runEpisodes runs the driver until ctx ends or stop is called; stop returns once its
// workers have.
func runEpisodes(ctx context.Context, episodes *driver.Driver) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); episodes.Run(ctx) }()
	return func() { cancel(); <-done }
}
