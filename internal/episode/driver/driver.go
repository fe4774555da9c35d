// SPDX-License-Identifier: Apache-2.0

// Package driver runs the per-node reconcile that both modes share, and the retry policy of
// their intake. The modes keep what is theirs: where notices come from and what wakes a
// node; the driver takes a node name and sees the node's episode through: it reads the node,
// reconciles it, comes back when the reconcile asks to wait, and backs off after a failure
// or a panic.
package driver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/workqueue"

	"lifeboat.dev/lifeboat/internal/panics"
)

// Reconciler drives one node's episode from the record on the Node. A positive wait asks to
// be called again after it (a scheduled start ahead); an error asks for a retry with backoff.
type Reconciler interface {
	Reconcile(ctx context.Context, node *corev1.Node) (wait time.Duration, err error)
}

// Nodes reads the node to reconcile by name. A nil node without an error means it is gone:
// there is nothing left to do for it.
type Nodes interface {
	Node(ctx context.Context, name string) (*corev1.Node, error)
}

// Options are what a Driver works with. Reconciler and Nodes are required.
type Options struct {
	Reconciler Reconciler
	Nodes      Nodes
	// Workers bounds the nodes reconciled at once (default 1).
	Workers int
	// FirstRetry is the pause after a node's first failure, doubling with each further one up
	// to MaxRetry (defaults: a second, a minute).
	FirstRetry, MaxRetry time.Duration
	// Name names the queue in the workqueue's own metrics.
	Name string
	// Panics counts the reconciles that panicked, under site reconcile (metrics.Metrics).
	Panics panics.Counter
	Logger *slog.Logger
}

// Driver reconciles nodes by name: one reconcile per node at a time, with a bounded number
// of workers over all nodes. A name added while its node is being reconciled is reconciled
// once more afterwards, so a wake is never lost.
type Driver struct {
	reconciler Reconciler
	nodes      Nodes
	panics     panics.Counter
	log        *slog.Logger
	workers    int
	limiter    workqueue.TypedRateLimiter[string]
	queue      workqueue.TypedRateLimitingInterface[string]
}

// New builds a driver; nothing runs before Run.
func New(o Options) (*Driver, error) {
	if o.Reconciler == nil {
		return nil, errors.New("driver: Options.Reconciler is required")
	}
	if o.Nodes == nil {
		return nil, errors.New("driver: Options.Nodes is required")
	}
	if o.Workers < 0 || o.FirstRetry < 0 || o.MaxRetry < 0 {
		return nil, fmt.Errorf("driver: negative Workers (%d), FirstRetry (%s) or MaxRetry (%s)", o.Workers, o.FirstRetry, o.MaxRetry)
	}
	first, most := cmpOr(o.FirstRetry, time.Second), cmpOr(o.MaxRetry, time.Minute)
	if first > most {
		return nil, fmt.Errorf("driver: FirstRetry %s is longer than MaxRetry %s", first, most)
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	limiter := jittered{workqueue.NewTypedItemExponentialFailureRateLimiter[string](first, most)}
	return &Driver{
		reconciler: o.Reconciler, nodes: o.Nodes, panics: o.Panics, log: log,
		workers: max(o.Workers, 1), limiter: limiter,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig[string](limiter,
			workqueue.TypedRateLimitingQueueConfig[string]{Name: o.Name}),
	}, nil
}

func cmpOr(d, otherwise time.Duration) time.Duration {
	if d == 0 {
		return otherwise
	}
	return d
}

// Add asks for the node to be reconciled now (or right after its current reconcile).
func (d *Driver) Add(name string) { d.queue.Add(name) }

// Run reconciles the nodes added until ctx ends, and returns once every worker has.
func (d *Driver) Run(ctx context.Context) {
	stop := context.AfterFunc(ctx, d.queue.ShutDown)
	defer stop()
	var wg sync.WaitGroup
	for range d.workers {
		wg.Go(func() {
			for {
				name, shutdown := d.queue.Get()
				if shutdown {
					return
				}
				d.process(ctx, name)
				d.queue.Done(name)
			}
		})
	}
	wg.Wait()
}

// ShutDown stops the queue's timers when Run is never called; Run calls it itself.
func (d *Driver) ShutDown() { d.queue.ShutDown() }

// process reconciles one node and decides when it comes back: after the wait it asked for,
// after backoff when it failed, or when it is added again.
func (d *Driver) process(ctx context.Context, name string) {
	node, err := d.nodes.Node(ctx, name)
	if err == nil && node == nil {
		d.queue.Forget(name)
		return
	}
	var after time.Duration
	if err == nil {
		after, err = d.reconcileSafely(ctx, node)
	}
	switch {
	case err != nil:
		if ctx.Err() != nil {
			return // stopping: the work is on the Node for the next run
		}
		pause := d.limiter.When(name)
		if _, panicked := errors.AsType[*panics.Error](err); !panicked { // a panic is logged already
			d.log.Warn("the node's interruption work is not done yet; retrying", "node", name, "retryIn", pause, "err", err)
		}
		d.queue.AddAfter(name, pause)
	case after > 0:
		d.queue.Forget(name)
		d.queue.AddAfter(name, after)
	default:
		d.queue.Forget(name)
	}
}

// reconcileSafely reconciles one node, turning a panic into an error: the node is retried
// with backoff like any failure, and the other nodes' workers (and the mode's intake) go on.
// The panic is counted, and logged with the node and the stack, since it is a bug to report.
// A panic in a goroutine the reconcile started cannot be caught here: each recovers its own.
func (d *Driver) reconcileSafely(ctx context.Context, node *corev1.Node) (after time.Duration, err error) {
	defer panics.Recover(panics.Reconcile, d.log, d.panics, &err, "node", node.Name, "retries", d.limiter.NumRequeues(node.Name))
	return d.reconciler.Reconcile(ctx, node)
}

// jittered lengthens each backoff by up to a fifth at random, so that nodes (and the agents
// of many nodes) that failed together, as in an API server outage, do not retry in step.
type jittered struct {
	workqueue.TypedRateLimiter[string]
}

func (j jittered) When(name string) time.Duration {
	return wait.Jitter(j.TypedRateLimiter.When(name), jitter)
}

// jitter is the largest fraction a pause is lengthened by, at random.
const jitter = 0.2
