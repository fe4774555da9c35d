// Package interruption turns notices about a node into its episode's work. Intake plans the
// notice's actions from its kind and the configuration and applies them to the node (taint,
// cordon) in one conflict-safe write that also records the notice's intent on the node.
// Reconcile drives the episode from that record: it waits for a scheduled start, drains the
// node once by the earliest deadline of its pending notices, completes each notice (its
// lifecycle action), and reports the outcome once. Because the work lives on the Node, any
// Lifeboat process (a restarted one, a new leader) takes it up where another left it.
package interruption

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	utilcache "k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/events"
	"lifeboat.dev/lifeboat/internal/handback"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/ownership"
	"lifeboat.dev/lifeboat/internal/webhook"
	"lifeboat.dev/lifeboat/internal/wiring"
)

// Plan is what to do for one notice.
type Plan struct {
	TaintKey  string // "" = no taint
	ExcludeLB bool
	Cordon    bool
	Drain     bool
}

// PlanFor decides the actions for a notice kind under the configuration.
func PlanFor(k notice.Kind, c *config.Config) Plan {
	p := Plan{Cordon: true, ExcludeLB: c.ExcludeFromLoadBalancers, Drain: k.Drains() && !c.CordonOnly}
	if k == notice.Rebalance {
		p.Drain = c.EnableRebalanceDraining && !c.CordonOnly
	}
	if c.TaintNode {
		p.TaintKey = taintKeys[k]
	}
	return p
}

// planFor is PlanFor for one notice: from the queue (controller mode), a rebalance
// recommendation drains unless CORDON_ONLY, as in NTH's queue mode; ENABLE_REBALANCE_* are
// instance-metadata settings.
func planFor(n notice.Notice, c *config.Config) Plan {
	p := PlanFor(n.Kind, c)
	if n.Kind == notice.Rebalance && n.Source == notice.SourceQueue {
		p.Drain = !c.CordonOnly
	}
	if n.CordonOnly != "" {
		p.Drain = false // no readable start: a drain cannot be scheduled
	}
	return p
}

// taintKeys are NTH's taint keys, so existing tolerations keep working. An instance state
// change means the instance is stopping or terminating, like an Auto Scaling termination.
var taintKeys = map[notice.Kind]string{
	notice.SpotInterruption: nodes.TaintSpotInterruption,
	// NTH has no key for it; it is the same two-minute reclaim, so Spot tolerations apply.
	notice.CapacityReservationInterruption: nodes.TaintSpotInterruption,
	notice.ScheduledMaintenance:            nodes.TaintScheduledMaintenance,
	notice.Rebalance:                       nodes.TaintRebalance,
	notice.ASGTermination:                  nodes.TaintASGLifecycle,
	notice.StateChange:                     nodes.TaintASGLifecycle,
	// A Capacity Block's end reclaims its instances as a Spot interruption does; a failing
	// instance is taken out of service as for maintenance.
	notice.CapacityBlockExpiration: nodes.TaintSpotInterruption,
	notice.InstanceImpaired:        nodes.TaintScheduledMaintenance,
}

// Completed is an Auto Scaling lifecycle action that Options.Complete completed.
type Completed struct {
	Hook   string
	Result string // CONTINUE or ABANDON
}

// Options are what a Handler works with besides the configuration and its client: the mode's
// parts (where notices come from, how lifecycle actions are completed and kept alive) and the
// process's (metrics, Events, webhooks, hand-back waits, the cordon client). Each may be left
// out; a Handler never changes them once built.
type Options struct {
	// Origin names where this process takes notices from (the agent's instance metadata, the
	// controller's queue). Intake stamps it on each intent, and Reconcile drives only the
	// intents of its own origin (see Pending).
	Origin string
	// Complete, when set, runs for each notice once its node (nodeName) is drained (for
	// instance to complete the Auto Scaling lifecycle action), before the drain is recorded
	// as done. An error leaves the notice unfinished, to be retried, except an
	// *instancegate.Refusal: the notice is finished without the call, and a Warning Event
	// says why. A lifecycle action it completed is recorded as an Event on the node.
	Complete func(ctx context.Context, nodeName string, n notice.Notice) (*Completed, error)
	// KeepAlive, when set, runs when a drain starts, with the notices it serves (for instance
	// to keep their lifecycle actions alive); the function it returns runs when they are
	// finished.
	KeepAlive func(ctx context.Context, node *corev1.Node, notices []notice.Notice) (stop func())
	// Metrics counts actions, drains and evictions.
	Metrics *metrics.Metrics
	// Events records Kubernetes Events on the node.
	Events *events.Recorder
	// Webhook is told once per node interruption, when its work is done.
	Webhook *webhook.Sender
	// Handback are the waits between a drained node and the hand-back of its instance (its
	// volumes detached, its load-balancer targets drained).
	Handback []handback.Wait
	// CordonClient serves the first read and the cordon write of each notice: with a rate
	// limit of its own, cordons never wait behind other nodes' evictions and records in a
	// burst. Default: the Handler's client.
	CordonClient kubernetes.Interface
	// Retainer, when set, lets a termination hook whose drain cannot finish in time be
	// abandoned to its group's retention (ABANDON_LIFECYCLE_ACTION_ON_INCOMPLETE_DRAIN; see
	// retain.go).
	Retainer Retainer
}

// Handler takes notices for nodes of this cluster (Intake) and drives each node's episode
// from its record (Reconcile).
type Handler struct {
	origin    string
	complete  func(ctx context.Context, nodeName string, n notice.Notice) (*Completed, error)
	keepAlive func(ctx context.Context, node *corev1.Node, notices []notice.Notice) (stop func())
	metrics   *metrics.Metrics
	events    *events.Recorder
	webhook   *webhook.Sender
	handback  []handback.Wait
	retainer  Retainer

	cfg    *config.Config
	client kubernetes.Interface
	writer *nodes.Writer
	// cordonClient and cordonWriter serve the urgent part of a notice (Options.CordonClient).
	cordonClient kubernetes.Interface
	cordonWriter *nodes.Writer
	done         *doneNotices
	drainer      atomic.Pointer[drain.Drainer]
	log          *slog.Logger

	// holder names this process in the record's Owner, for people reading it.
	holder string
	// ownerRenew is how often a running drain renews its claim (OwnerRenew; tests shorten it).
	ownerRenew time.Duration

	mu       sync.Mutex
	draining map[string]*drain.Deadline // the deadline of each drain running in this process
	owning   map[string]*renewals       // the claim of each drain running in this process
	// margins hold, for drains that may abandon their hook, how long before the action's
	// expiry they end (TightenDrain keeps it).
	margins map[string]time.Duration
	// invalidReported holds the invalid records already reported (ReportInvalidRecord).
	invalidReported *utilcache.LRUExpireCache
	// followedNodes is the node informer's store once FollowNodes was called; nil when the
	// process does not follow the nodes' updates.
	followedNodes cache.Store
}

// NewHandler builds a Handler from the configuration.
func NewHandler(c *config.Config, client kubernetes.Interface, logger *slog.Logger, o Options) *Handler {
	w := nodes.NewWriter(client)
	w.DryRun = c.DryRun
	cordonClient, cordonWriter := client, w
	if o.CordonClient != nil {
		cordonClient, cordonWriter = o.CordonClient, nodes.NewWriter(o.CordonClient)
		cordonWriter.DryRun = c.DryRun
	}
	h := &Handler{
		origin: o.Origin, complete: o.Complete, keepAlive: o.KeepAlive, retainer: o.Retainer,
		metrics: o.Metrics, events: o.Events, webhook: o.Webhook, handback: o.Handback,
		cfg: c, client: client, writer: w, log: logger,
		cordonClient: cordonClient, cordonWriter: cordonWriter, done: newDoneNotices(),
		draining: map[string]*drain.Deadline{}, owning: map[string]*renewals{}, holder: holderName(), ownerRenew: OwnerRenew,
		invalidReported: utilcache.NewLRUExpireCache(invalidRecordsKept),
	}
	opts := wiring.Drain(c, client, logger)
	opts.Observer = &blockReporter{h: h, lastNodeEvent: map[string]time.Time{}}
	h.drainer.Store(drain.New(client, opts))
	return h
}

// UseNodePods makes the drains that start from now on list and follow their pods from one
// shared pod informer (nil: each lists and watches its node's pods itself, the default).
func (h *Handler) UseNodePods(p *drain.NodePods) {
	h.drainer.Store(h.drainer.Load().WithNodePods(p))
}

// Origin names where this process takes notices from (Options.Origin).
func (h *Handler) Origin() string { return h.origin }

// holderName is the process's host (in a cluster, its pod's name) and process id.
func holderName() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s/%d", host, os.Getpid())
}

// ErrNotOurs means the node does not belong to the notice's instance.
var ErrNotOurs = errors.New("node does not belong to the notice's instance")

// ErrNewerRecord means the node's record was written by a newer release of Lifeboat, whose
// work this binary must not redo: the notice is kept for it.
var ErrNewerRecord = errors.New("the node's record has a newer schema")

// InstanceIDOf returns the instance id in a node's aws:///<zone>/<instance-id> providerID,
// or "" when the node has none. Ownership decides with the same parser.
func InstanceIDOf(n *corev1.Node) string {
	return ownership.InstanceIDFromProviderID(n.Spec.ProviderID)
}

func dryRunOr(dryRun bool, r string) string {
	if dryRun {
		return metrics.ResultDryRun
	}
	return r
}
