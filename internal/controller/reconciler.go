package controller

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/interruption"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/record"
)

// maxDraining bounds the nodes reconciled at once, most of them draining (a drain mostly
// waits on a pod watch). Intake (WORKERS) cordons a burst first; the client's rate limit
// bounds the API requests of all drains together.
const maxDraining = 1000

// reconciler drives each node's interruption episode from the record intake left on the Node
// (interruption.Handler.Reconcile): it waits for scheduled starts, drains, completes
// lifecycle actions and reports outcomes. Node informer events put the names of nodes with
// work (pending notices, or an episode whose instance booted again) on a rate-limited
// workqueue, which runs one reconcile per node at a time; a scheduled start comes back with
// AddAfter, a failure with backoff. An update wakes a node only when it changes its work
// (interruption.Wakes), so the reconciler's own renewals do not undo the backoff. Because
// the work lives on the Node, a restarted process or a new leader finds it in the informer's
// first list and goes on.
type reconciler struct {
	handler *interruption.Handler
	cfg     *config.Config
	metrics *metrics.Metrics
	nodes   cache.Indexer
	queue   workqueue.TypedRateLimitingInterface[string]
	log     *slog.Logger
	// reconcile is handler.Reconcile; tests put a panicking one in its place.
	reconcile func(ctx context.Context, node *corev1.Node) (time.Duration, error)
}

func newReconciler(informer cache.SharedIndexInformer, handler *interruption.Handler, cfg *config.Config, m *metrics.Metrics, log *slog.Logger) (*reconciler, error) {
	r := &reconciler{
		handler: handler, cfg: cfg, nodes: informer.GetIndexer(), metrics: m, log: log,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, time.Minute),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "lifeboat-node-episodes"}),
		reconcile: handler.Reconcile,
	}
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { r.offer(obj) },
		UpdateFunc: func(old, obj any) {
			o, _ := old.(*corev1.Node)
			if n, ok := obj.(*corev1.Node); ok && interruption.Wakes(o, n, handler.Origin()) {
				r.offer(n)
			}
		},
	})
	return r, err
}

// offer queues the node if its record has work: pending notices, or an episode whose
// instance booted again (given back, without waiting for a next notice).
func (r *reconciler) offer(obj any) {
	n, ok := obj.(*corev1.Node)
	if !ok || n.Annotations[record.Annotation] == "" {
		return
	}
	rec, err := record.Read(n)
	if err != nil {
		r.handler.ReportInvalidRecord(n, err) // and never acted on
		return
	}
	if len(interruption.Pending(rec, r.cfg, r.handler.Origin())) > 0 || record.BootedAgain(n, rec) {
		r.queue.Add(n.Name)
	}
}

// run works the queue with up to maxDraining workers until ctx ends.
func (r *reconciler) run(ctx context.Context) {
	go func() {
		<-ctx.Done()
		r.queue.ShutDown()
	}()
	var wg sync.WaitGroup
	for range maxDraining {
		wg.Go(func() {
			for {
				name, shutdown := r.queue.Get()
				if shutdown {
					return
				}
				r.process(ctx, name)
				r.queue.Done(name)
			}
		})
	}
	wg.Wait()
}

func (r *reconciler) process(ctx context.Context, name string) {
	obj, exists, err := r.nodes.GetByKey(name)
	if err != nil || !exists {
		r.queue.Forget(name)
		return
	}
	wait, err := r.reconcileSafely(ctx, obj.(*corev1.Node))
	switch {
	case err != nil:
		if ctx.Err() == nil {
			if _, panicked := err.(panicError); !panicked {
				r.log.Warn("node's interruption work not done yet; retrying", "node", name, "err", err)
			}
			r.queue.AddRateLimited(name)
		}
	case wait > 0:
		r.queue.Forget(name)
		r.queue.AddAfter(name, wait)
	default:
		r.queue.Forget(name)
	}
}

// reconcileSafely reconciles one node, turning a panic into an error: the node is retried with
// the queue's backoff like any failure, and the other nodes' workers go on. The panic is
// counted, and logged with the node and the stack, since it is a bug to report. (A panic in a
// goroutine the reconcile started cannot be caught here and still ends the process.)
func (r *reconciler) reconcileSafely(ctx context.Context, node *corev1.Node) (wait time.Duration, err error) {
	defer func() {
		if p := recover(); p != nil {
			r.metrics.ReconcilePanic()
			r.log.Error("reconciling the node panicked; retrying it with backoff", "node", node.Name,
				"retries", r.queue.NumRequeues(node.Name), "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			wait, err = 0, panicError{p}
		}
	}()
	return r.reconcile(ctx, node)
}

// panicError is a recovered panic.
type panicError struct{ value any }

func (e panicError) Error() string { return fmt.Sprintf("panic: %v", e.value) }
