// SPDX-License-Identifier: Apache-2.0

// Package episode turns notices about a node into its episode's work. Intake plans the
// notice's actions from its kind and the configuration and applies them to the node (taint,
// cordon) in one conflict-safe write that also records the notice's intent on the node.
// Reconcile drives the episode from that record: it waits for a scheduled start, drains the
// node once by the earliest deadline of its pending notices, completes each notice (its
// lifecycle action), and reports the outcome once. Because the work lives on the Node, any
// Lifeboat process (a restarted one, a new leader) takes it up where another left it.
package episode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/detach"
	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/events"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/ownership"
	"lifeboat.dev/lifeboat/internal/webhook"
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
	rules, _ := notice.RulesOf(k)
	if rules.DrainOptIn {
		p.Drain = c.EnableRebalanceDraining && !c.CordonOnly
	}
	if c.TaintNode {
		p.TaintKey = rules.TaintKey
	}
	return p
}

// planFor is PlanFor for one notice: from the queue (controller mode), a kind whose drain is
// opt-in (a rebalance recommendation) drains unless CORDON_ONLY, as in NTH's queue mode;
// ENABLE_REBALANCE_* are instance-metadata settings.
func planFor(n notice.Notice, c *config.Config) Plan {
	p := PlanFor(n.Kind, c)
	if rules, _ := notice.RulesOf(n.Kind); rules.DrainOptIn && n.Source == notice.SourceQueue {
		p.Drain = !c.CordonOnly
	}
	if n.CordonOnly != "" {
		p.Drain = false // no readable start: a drain cannot be scheduled
	}
	return p
}

// KeepAlive keeps the lifecycle actions of a drain's notices alive while it runs, and brings
// the drain's deadline to an action's expiry when it can no longer be kept (see
// lifecycle.Heartbeats). The function it returns stops it.
type KeepAlive interface {
	Start(ctx context.Context, node *corev1.Node, notices []notice.Notice, deadline *drain.Deadline) (stop func())
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
	// Completer, when set, completes each notice once its node is drained, before the notice
	// is recorded as finished. A lifecycle action it completed is recorded as an Event on the
	// node.
	Completer NoticeCompleter
	// KeepAlive, when set, runs while a drain runs, with the notices it serves.
	KeepAlive KeepAlive
	// Metrics counts actions, drains and evictions.
	Metrics *metrics.Metrics
	// Events records Kubernetes Events on the node.
	Events *events.Recorder
	// Webhook is told once per node interruption, when its work is done.
	Webhook *webhook.Sender
	// DetachWaits are the waits between a drained node and the hand-back of its instance (its
	// volumes detached, its load-balancer targets drained).
	DetachWaits []detach.Wait
	// CordonClient serves the first read and the cordon write of each notice: with a rate
	// limit of its own, cordons never wait behind other nodes' evictions and records in a
	// burst. Default: the Handler's client.
	CordonClient kubernetes.Interface
	// Drainer empties the nodes (NewDrainer). Default: the one NewDrainer builds from the
	// Handler's configuration and client.
	Drainer *drain.Drainer
	// Retainer, when set, lets a termination hook whose drain cannot finish in time be
	// abandoned to its group's retention (ABANDON_LIFECYCLE_ACTION_ON_INCOMPLETE_DRAIN; see
	// retain.go).
	Retainer Retainer
	// StatusClient writes the node's lifeboat.dev/Interruption condition (NODE_CONDITION): in the
	// request budget's background lane, so that it never holds a cordon or an eviction back.
	// Default: the Handler's client.
	StatusClient kubernetes.Interface
	// Dead, when set, tells whether a node's instance is dead before its drain (the fast
	// path: see dead.go).
	Dead DeadCheck
	// Takeover, when set, is the list of nodes a leader's term begins with: the first
	// reconcile of each node decides from it instead of reading the node (see Takeover).
	Takeover *Takeover
}

// Handler takes notices for nodes of this cluster (Intake) and drives each node's episode
// from its record (Reconcile) through its phases, each a unit of its own: intake, claim,
// drain, hand-back, retention, completion and report, and the end of the episode.
type Handler struct {
	cfg    *config.Config
	client kubernetes.Interface
	log    *slog.Logger
	origin string
	// The process's parts the sequence of phases uses itself.
	metrics     *metrics.Metrics
	events      *events.Recorder
	keepAlive   KeepAlive
	intake      *intake
	ends        *ends
	claims      *claims
	drains      *drains
	detachPhase *detachPhase
	retentions  *retentions
	dead        *deadPath
	completion  *completions
	invalid     *invalidRecords
	newer       *newerRecords
	conditions  *conditions
	takeover    *Takeover
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
	handled := newHandledNotices()
	h := &Handler{cfg: c, client: client, log: logger, origin: o.Origin, metrics: o.Metrics, events: o.Events, keepAlive: o.KeepAlive,
		dead: &deadPath{check: o.Dead, dryRun: c.DryRun, events: o.Events, metrics: o.Metrics}}
	h.invalid = &invalidRecords{reported: newReportedOnce(), log: logger, metrics: o.Metrics, events: o.Events}
	h.takeover = o.Takeover
	h.newer = &newerRecords{reported: newReportedOnce(), log: logger, metrics: o.Metrics, events: o.Events}
	drainer := o.Drainer
	if drainer == nil {
		drainer = NewDrainer(c, client, o.Metrics, o.Events, logger)
	}
	h.drains = newDrains(drainer, o.Metrics, o.Events, logger)
	h.conditions = newConditions(conditionWriter(c, client, o.StatusClient), logger)
	h.conditions.panics = o.Metrics
	if r, ok := drainer.Observer().(*drain.Reporter); ok && h.conditions.writer != nil {
		h.conditions.held = r.Holding
		r.OnHeldChange(h.conditions.heldChanged)
	}
	h.claims = &claims{origin: o.Origin, holder: holderName(), renewEvery: OwnerRenew, cfg: c, writer: w, metrics: o.Metrics, log: logger, owning: map[string]*renewals{}}
	h.ends = &ends{cfg: c, writer: w, handled: handled, events: o.Events, metrics: o.Metrics, log: logger, conditions: h.conditions}
	h.newer.ends = h.ends
	reports := &reports{webhook: o.Webhook, cfg: c, metrics: o.Metrics, log: logger}
	h.intake = &intake{cfg: c, origin: o.Origin, log: logger, cordonClient: cordonClient, cordonWriter: cordonWriter, handled: handled,
		metrics: o.Metrics, events: o.Events, claims: h.claims, drains: h.drains, ends: h.ends, reports: reports, invalid: h.invalid, newer: h.newer, conditions: h.conditions,
		refused: &refusedClaims{reported: newReportedOnce(), log: logger, metrics: o.Metrics, events: o.Events}}
	h.detachPhase = &detachPhase{waits: guarded(o.DetachWaits, logger, o.Metrics), cfg: c, writer: w, metrics: o.Metrics, events: o.Events, conditions: h.conditions}
	h.retentions = &retentions{retainer: o.Retainer, cfg: c, writer: w, events: o.Events, metrics: o.Metrics, drains: h.drains}
	h.completion = &completions{completer: o.Completer, cfg: c, writer: w, handled: handled, events: o.Events, metrics: o.Metrics, log: logger, claims: h.claims, reports: reports}
	return h
}

// conditionWriter writes the node condition through status (else client); nil when
// NODE_CONDITION is off or under DRY_RUN, which writes nothing.
func conditionWriter(c *config.Config, client, status kubernetes.Interface) *nodes.Writer {
	if !c.NodeCondition || c.DryRun {
		return nil
	}
	if status == nil {
		status = client
	}
	return nodes.NewWriter(status)
}

// UseNodePods makes the drains that start from now on list and follow their pods from one
// shared pod informer (nil: each lists and watches its node's pods itself, the default).
func (h *Handler) UseNodePods(p *drain.NodePods) { h.drains.useNodePods(p) }

// FollowNodes has the claims of the drains this process runs follow the informer's updates
// of their nodes instead of renewing all along (see claims.follow), and the node writes start
// from the informer's copy where it is newer than the one at hand (nodes.Writer.UseCache).
// Call it before the informer starts.
func (h *Handler) FollowNodes(informer cache.SharedIndexInformer) error {
	lookup := cachedNode(informer.GetStore())
	for _, w := range []*nodes.Writer{h.claims.writer, h.intake.cordonWriter, h.conditions.writer} {
		if w != nil {
			w.UseCache(lookup)
		}
	}
	return h.claims.follow(informer)
}

// cachedNode looks a node up in an informer's store.
func cachedNode(store cache.Store) func(name string) *corev1.Node {
	return func(name string) *corev1.Node {
		obj, ok, _ := store.GetByKey(name)
		if !ok {
			return nil
		}
		n, _ := obj.(*corev1.Node)
		return n
	}
}

// Origin names where this process takes notices from (Options.Origin).
func (h *Handler) Origin() string { return h.origin }

// ReportInvalidRecord says, once per node and record content, that the node's record could
// not be read or failed validation (err, from record.Read): a log line, a metric and a Warning
// Event. Nothing of such a record is acted on; the next notice for the node starts a fresh one.
func (h *Handler) ReportInvalidRecord(node *corev1.Node, err error) { h.invalid.report(node, err) }

// ReportRefusedClaim says that node's providerID names another instance than instanceID,
// which source says the node is (an Event on the node, the metric, a log line), and what
// follows from the refusal.
func (h *Handler) ReportRefusedClaim(node *corev1.Node, instanceID string, source notice.Source, consequence string) {
	h.intake.refused.report(node, instanceID, source, consequence)
}

// EndBootedEpisode closes the node's episode if the instance has booted again since it
// opened (see ends.booted). It reports whether it ended the episode.
func (h *Handler) EndBootedEpisode(ctx context.Context, node *corev1.Node) (bool, error) {
	return h.ends.booted(ctx, node)
}

// ReleaseAfterReboot uncordons a node that has been through its scheduled reboot: it booted
// after the record's RebootAfter (see ends.afterReboot). It reports whether it released the
// node.
func (h *Handler) ReleaseAfterReboot(ctx context.Context, node *corev1.Node, bootTime time.Time) (bool, error) {
	return h.ends.afterReboot(ctx, node, bootTime)
}

// holderName is the process's host (in a cluster, its pod's name) and process id.
func holderName() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s/%d", host, os.Getpid())
}

// ErrNotOurs means the node does not belong to the notice's instance.
var ErrNotOurs = errors.New("node does not belong to the notice's instance")

// ErrNewerRecord means the node's record was written by a newer release of Lifeboat, whose
// work this binary must neither redo nor undo while it may be at work: the notice is kept for
// it (or for this binary, once the record is taken back: see record.LeftByNewer).
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
