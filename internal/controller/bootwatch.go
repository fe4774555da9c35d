package controller

import (
	"context"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"lifeboat.dev/lifeboat/internal/interruption"
)

// bootWatch gives back nodes whose instance booted again since their interruption episode
// opened (a Spot stop or hibernation, a scheduled stop, started again): without it such a
// node would stay cordoned until its next notice. Node informer events put the node's name
// on a rate-limited workqueue; one worker ends the episode from a fresh read (the write is
// conflict-safe and decides again on the node it writes), retrying with backoff on failure.
type bootWatch struct {
	handler *interruption.Handler
	nodes   cache.Indexer
	queue   workqueue.TypedRateLimitingInterface[string]
	log     *slog.Logger
}

func newBootWatch(informer cache.SharedIndexInformer, handler *interruption.Handler, log *slog.Logger) (*bootWatch, error) {
	w := &bootWatch{
		handler: handler, nodes: informer.GetIndexer(), log: log,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, time.Minute),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "lifeboat-boot-watch"}),
	}
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { w.offer(obj) },
		UpdateFunc: func(old, obj any) {
			before, ok1 := old.(*corev1.Node)
			after, ok2 := obj.(*corev1.Node)
			if ok1 && ok2 && before.Status.NodeInfo.BootID != after.Status.NodeInfo.BootID {
				w.offer(obj)
			}
		},
	})
	return w, err
}

// offer queues the node if its episode ended by a new boot.
func (w *bootWatch) offer(obj any) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	if rec, err := interruption.ReadRecord(n); err == nil && interruption.BootedAgain(n, rec) {
		w.queue.Add(n.Name)
	}
}

// run works the queue until ctx ends.
func (w *bootWatch) run(ctx context.Context) {
	go func() {
		<-ctx.Done()
		w.queue.ShutDown()
	}()
	for {
		name, shutdown := w.queue.Get()
		if shutdown {
			return
		}
		w.process(ctx, name)
		w.queue.Done(name)
	}
}

func (w *bootWatch) process(ctx context.Context, name string) {
	obj, exists, err := w.nodes.GetByKey(name)
	if err != nil || !exists {
		w.queue.Forget(name)
		return
	}
	if _, err := w.handler.EndBootedEpisode(ctx, obj.(*corev1.Node)); err != nil {
		if ctx.Err() == nil {
			w.log.Warn("cannot give back a node that booted again; retrying", "node", name, "err", err)
			w.queue.AddRateLimited(name)
		}
		return
	}
	w.queue.Forget(name)
}
