// Package interruption turns a notice about a node into actions: it plans them from the
// notice kind and the configuration, applies the node changes in one conflict-safe write
// together with the node's progress record, drains on schedule, and records completion.
// Several notices for one node coalesce into one drain.
package interruption

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"lifeboat.dev/lifeboat/internal/config"
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
}

// Completed is an Auto Scaling lifecycle action that OnDrained completed.
type Completed struct {
	Hook   string
	Result string // CONTINUE or ABANDON
}

// Handler handles notices for nodes of this cluster.
type Handler struct {
	// OnDrained, when set, runs for each notice once its node is drained (for instance to
	// complete the Auto Scaling lifecycle action), before the drain is recorded as done. An
	// error leaves the notice unfinished, to be retried. A lifecycle action it completed is
	// recorded as an Event on the node.
	OnDrained func(ctx context.Context, n notice.Notice) (*Completed, error)
	// Metrics, when set, counts actions, drains and evictions.
	Metrics *metrics.Metrics
	// Events, when set, records Kubernetes Events on the node.
	Events *events.Recorder
	// Webhook, when set, is told once per node interruption, when its work is done.
	Webhook *webhook.Sender

	cfg    *config.Config
	client kubernetes.Interface
	writer *nodes.Writer
	// cordonClient and cordonWriter serve the urgent part of a notice (see SetCordonClient);
	// by default the same as client and writer.
	cordonClient kubernetes.Interface
	cordonWriter *nodes.Writer
	done         *doneNotices
	drainer      *drain.Drainer
	log          *slog.Logger

	mu       sync.Mutex
	draining map[string]*running // nodes with a drain running in this process
}

// running is a drain in progress; notices coalesced into it wait for done.
type running struct {
	done     chan struct{}
	err      error
	ids      map[string]bool // notices that will finish after this drain (guarded by Handler.mu)
	deadline *drain.Deadline // the earliest deadline of those notices
}

// NewHandler builds a Handler from the configuration.
func NewHandler(c *config.Config, client kubernetes.Interface, logger *slog.Logger) *Handler {
	w := nodes.NewWriter(client)
	w.DryRun = c.DryRun
	return &Handler{
		cfg: c, client: client, writer: w, log: logger,
		cordonClient: client, cordonWriter: w, done: newDoneNotices(),
		drainer:  drain.New(client, drain.OptionsFromConfig(c, client, logger)),
		draining: map[string]*running{},
	}
}

// SetCordonClient gives the first read and the cordon write of each notice a client of their
// own, with its own rate limit, so that in a burst cordons never wait behind other nodes'
// evictions and records. Call it before handling notices.
func (h *Handler) SetCordonClient(client kubernetes.Interface) {
	h.cordonClient = client
	h.cordonWriter = nodes.NewWriter(client)
	h.cordonWriter.DryRun = h.cfg.DryRun
}

// ErrNotOurs means the node does not belong to the notice's instance.
var ErrNotOurs = errors.New("node does not belong to the notice's instance")

// ErrNewerRecord means the node's record was written by a newer release of Lifeboat, whose
// work this binary must not redo: the notice is kept for it.
var ErrNewerRecord = errors.New("the node's record has a newer schema")

// episodeEndedOn reports whether a cached copy of the node shows its episode over, so a
// notice remembered as done in this process is looked at again.
func episodeEndedOn(node *corev1.Node) bool {
	if node == nil {
		return false
	}
	rec, _ := ReadRecord(node)
	return EpisodeEnded(node, rec) != ""
}

// HandleOptions tune Handle for a caller that has more context.
type HandleOptions struct {
	// Cached, when set, is a recent copy of the node (an informer's) used instead of a first
	// read. A decision to do nothing is confirmed on a fresh read; a stale copy otherwise only
	// costs a conflict and a retry of the resourceVersion-checked write.
	Cached *corev1.Node
	// Cordoned, when set, is called once the notice's node changes are written (or found to
	// be unnecessary), before any wait for the drain: the caller may then take the next
	// notice while this one drains.
	Cordoned func()
}

// Handle applies the notice to the node and, when the plan says so, drains it. It returns
// when the node is done, or when the notice was coalesced into a drain already running.
func (h *Handler) Handle(ctx context.Context, n notice.Notice, nodeName string) error {
	return h.HandleWith(ctx, n, nodeName, HandleOptions{})
}

// HandleWith is Handle with options.
func (h *Handler) HandleWith(ctx context.Context, n notice.Notice, nodeName string, o HandleOptions) error {
	if o.Cordoned != nil {
		var once sync.Once
		cordoned := o.Cordoned
		o.Cordoned = func() { once.Do(cordoned) }
		defer o.Cordoned()
	} else {
		o.Cordoned = func() {}
	}
	log := h.log.With("notice", n.ID, "kind", n.Kind, "node", nodeName, "instance", n.InstanceID)
	if !n.Released && h.done.has(n.ID) && !episodeEndedOn(o.Cached) {
		log.Debug("notice already handled")
		return nil
	}
	node, cached := o.Cached, o.Cached != nil
	for {
		if node == nil {
			fresh, err := h.cordonClient.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("notice %s: read node %s: %w", n.ID, nodeName, err)
			}
			node = fresh
		}
		if !cached || !h.nothingToDo(n, node) {
			break
		}
		node, cached = nil, false // confirm on a fresh read
	}
	if id := InstanceIDOf(node); id != "" && id != n.InstanceID {
		return fmt.Errorf("notice %s: node %s has providerID %q: %w", n.ID, nodeName, node.Spec.ProviderID, ErrNotOurs)
	}
	rec, err := ReadRecord(node)
	if err != nil {
		log.Warn("unreadable progress record on the node; starting afresh", "annotation", AnnotationRecord, "err", err)
	}
	if !rec.Known() {
		// Another release of Lifeboat is at work on this node (a rollout): leave it alone,
		// and keep the notice (it comes back) for a binary that knows the record.
		return fmt.Errorf("notice %s: node %s: %w (version %d, this binary knows up to %d)", n.ID, nodeName, ErrNewerRecord, rec.Version, RecordVersion)
	}
	if EpisodeEnded(node, rec) != "" {
		// Close it first: Lifeboat's taints and labels of the old episode go (an operator who
		// uncordoned the node took it back), and this notice then opens a new one.
		if _, fresh, err := h.endEpisode(ctx, node, EpisodeEnded); err != nil {
			return fmt.Errorf("notice %s: end the node's previous episode: %w", n.ID, err)
		} else if fresh != nil {
			node = fresh
		}
		rec, _ = ReadRecord(node)
	}
	if n.Released {
		return h.release(ctx, n, node, rec, log)
	}
	if slices.Contains(rec.Released, n.ID) {
		// Its event ended (or the node already rebooted through it); IMDS may go on
		// reporting it for a while, and acting again would cordon the node in a loop.
		log.Debug("notice already released")
		h.done.add(n.ID)
		return nil
	}
	plan := planFor(n, h.cfg)
	if rec.Done(n.ID, plan.Drain) {
		log.Info("notice already handled", "phase", rec.Phase)
		h.rememberDone(n)
		return nil
	}

	if !rec.Has(n.ID) {
		h.Events.Notice(events.NodeOf(node), n)
		if n.CordonOnly != "" {
			log.Warn("notice cordons the node but schedules no drain", "why", n.CordonOnly)
			h.Events.DrainNotScheduled(events.NodeOf(node), n.ID, n.CordonOnly)
		}
	}
	phase := PhaseCordoned
	if plan.Drain {
		phase = PhaseDraining
	}
	// The write starts by ending an episode that is over, on the node being written.
	var ended string
	edits := []nodes.Edit{openEpisode(&ended)}
	// Without a drain the interruption's work ends with this write, which then claims the
	// webhook (decided on the node being written, so a retry decides afresh).
	var notify bool
	if !plan.Drain {
		edits = append(edits, claimOutcome(OutcomeCordoned, &notify))
	}
	if plan.TaintKey != "" {
		edits = append(edits, nodes.AddTaint(plan.TaintKey, nodes.LabelValue(n.ID), corev1.TaintEffect(h.cfg.TaintEffect)))
	}
	if plan.ExcludeLB {
		edits = append(edits, nodes.SetLabel(nodes.LabelExcludeFromLoadBalancers, "true"))
	}
	var wasSchedulable bool // on the node the successful write started from
	if plan.Cordon {
		edits = append(edits, func(nd *corev1.Node) { wasSchedulable = !nd.Spec.Unschedulable }, nodes.Cordon())
	}
	edits = append(edits, recordEdit(n.ID, phase, n.Deadline))
	if n.Kind == notice.ScheduledMaintenance && notice.RebootCodes[n.Action] {
		// Uncordon once the node has been through the reboot (see ReleaseAfterReboot).
		now := time.Now().UTC().Truncate(time.Second)
		edits = append(edits, nodes.SetLabel(nodes.LabelUncordonAfterReboot, "true"), editRecord(func(r *Record) {
			if r.RebootAfter.IsZero() {
				r.RebootAfter = now
			}
		}))
	}
	// One write for everything, computed from the node just read.
	res, err := h.cordonWriter.Apply(ctx, nodeName, node, "cordon for notice "+n.ID, edits...)
	if err != nil {
		h.Metrics.Action(metrics.ActionCordon, metrics.ResultError)
		h.Events.CordonFailed(events.NodeOf(node), n.ID, err)
		return err
	}
	// Later notices for the node only add themselves to its record: one cordon counted.
	if res.Changed && wasSchedulable && res.Node.Spec.Unschedulable {
		h.Metrics.Action(metrics.ActionCordon, dryRunOr(h.cfg.DryRun, metrics.ResultOK))
		h.Events.Cordoned(events.NodeOf(res.Node), n.ID)
	} else {
		h.Metrics.Action(metrics.ActionCordon, metrics.ResultSkipped)
	}
	log.Info("node cordoned", "changed", res.Changed, "drain", plan.Drain, "deadline", n.Deadline, "dryRun", h.cfg.DryRun)
	if n.Kind == notice.ASGTermination && n.Source == notice.SourceIMDS && h.OnDrained == nil {
		log.Warn("the Auto Scaling lifecycle action is not completed from agent mode without ASG_LIFECYCLE_HOOK_NAME: the instance terminates when the lifecycle hook times out")
	}
	o.Cordoned()
	if !plan.Drain {
		if notify {
			h.notify(ctx, n, res.Node, "cordoned", nil)
		}
		if !h.cfg.DryRun {
			h.rememberDone(n)
		}
		return nil
	}
	if ended != "" {
		log.Info("the node's previous interruption episode ended just before this write; this notice opened a new one", "why", ended)
	}
	// Decided on the record as written: the write may have found the episode over and opened
	// a new one (then this notice drains), or found it drained (then it only completes).
	if written, _ := ReadRecord(res.Node); written.Phase == PhaseDrained {
		return h.finish(ctx, n, nodeName, res.Node, drained{})
	}
	deadline := drainDeadline(n)
	// Wait for the scheduled start before joining or starting a drain, so a notice days
	// ahead never makes an urgent one wait: only drains that have begun are joined.
	if n.Kind == notice.ScheduledMaintenance {
		if err := h.waitForStart(ctx, deadline, log); err != nil {
			return err
		}
	}
	r, first, duplicate := h.startDrain(nodeName, n.ID, deadline)
	if !first {
		log.Info("notice coalesced into the drain already running for this node", "duplicate", duplicate)
		// A more urgent notice (a Spot interruption during a rebalance or lifecycle-hook
		// drain) brings the running drain's deadline forward rather than waiting behind it.
		if r.deadline.Tighten(deadline) {
			log.Info("the running drain now ends by this notice's earlier deadline", "deadline", deadline)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-r.done:
		}
		if r.err != nil {
			return fmt.Errorf("notice %s: the drain it joined failed: %w", n.ID, r.err)
		}
		if duplicate {
			return nil // another copy of this notice finishes it (one lifecycle completion)
		}
		return h.finish(ctx, n, nodeName, nil, drained{})
	}
	// A drain that ended between this notice's read and now has left its record: decide on
	// a fresh read, or a late duplicate would drain the node a second time.
	fresh, err := h.client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		r.err = fmt.Errorf("notice %s: read node %s: %w", n.ID, nodeName, err)
		h.endDrain(nodeName, r)
		return r.err
	}
	latest, _ := ReadRecord(fresh)
	if why := calledOff(n, fresh, latest); why != "" && !h.cfg.DryRun {
		// While it waited for its start the event was canceled, or the node was taken back
		// or booted again: there is nothing to drain for it. Notices that joined are retried
		// and decide for themselves.
		log.Info("drain called off", "why", why)
		r.err = fmt.Errorf("notice %s: %w: %s", n.ID, errCalledOff, why)
		h.endDrain(nodeName, r)
		return nil
	}
	if latest.Phase == PhaseDrained {
		r.err = h.finish(ctx, n, nodeName, fresh, drained{})
		h.endDrain(nodeName, r)
		return r.err
	}
	h.Events.DrainStarted(events.NodeOf(res.Node), n.ID, deadline)
	var done drained
	done, r.err = h.drain(ctx, n, nodeName, r.deadline, log)
	if r.err == nil {
		// The node as the cordon write left it saves a read; if it changed since, the write
		// conflicts and is recomputed from a fresh read.
		r.err = h.finish(ctx, n, nodeName, res.Node, done)
	} else if ctx.Err() == nil {
		h.Events.DrainFailed(events.NodeOf(res.Node), n.ID, r.err)
	}
	// Unregister only once the drain is recorded: a copy of this notice arriving earlier
	// joins it instead of finding neither a running drain nor a drained record (which
	// would complete its lifecycle action twice).
	h.endDrain(nodeName, r)
	return r.err
}

// rememberDone notes in this process that the notice needs no more work, so its copies cost
// no node read. A cordon-only notice is not remembered: a later copy of it whose start can
// be read (the same id) must still schedule its drain.
func (h *Handler) rememberDone(n notice.Notice) {
	if n.CordonOnly == "" {
		h.done.add(n.ID)
	}
}

// errCalledOff is what notices that joined a drain hear when the drain was called off.
var errCalledOff = errors.New("the drain was called off")

// calledOff says why a notice about to start its drain has nothing to drain any more, or "".
func calledOff(n notice.Notice, node *corev1.Node, rec Record) string {
	switch {
	case slices.Contains(rec.Released, n.ID):
		return "its event was canceled or completed"
	case EpisodeEnded(node, rec) != "":
		return EpisodeEnded(node, rec)
	case !rec.Has(n.ID):
		return "the node's record no longer lists it"
	}
	return ""
}

// nothingToDo reports whether the node's record says the notice needs no work: a released
// notice, one already handled, or an end-of-event notice with nothing of Lifeboat's to undo.
func (h *Handler) nothingToDo(n notice.Notice, node *corev1.Node) bool {
	rec, _ := ReadRecord(node)
	if EpisodeEnded(node, rec) != "" {
		return false
	}
	if n.Released {
		return !rec.Has(n.ID) || slices.Contains(rec.Released, n.ID)
	}
	plan := planFor(n, h.cfg)
	return slices.Contains(rec.Released, n.ID) ||
		rec.Done(n.ID, plan.Drain)
}

// drainDeadline is the notice's deadline, or a short budget from now when that has passed
// (a late or restarted start).
func drainDeadline(n notice.Notice) time.Time {
	if minimum := time.Now().Add(30 * time.Second); n.Deadline.Before(minimum) {
		return minimum
	}
	return n.Deadline
}

// waitForStart waits until NODE_TERMINATION_GRACE_PERIOD before a scheduled event's start,
// its deadline (not at all if less time is left). Other kinds drain at once: their deadline
// is when the instance goes, and the whole budget is the drain's.
func (h *Handler) waitForStart(ctx context.Context, deadline time.Time, log *slog.Logger) error {
	start := deadline.Add(-time.Duration(h.cfg.NodeTerminationGracePeriod) * time.Second)
	wait := time.Until(start)
	if wait <= 0 {
		return nil
	}
	log.Info("drain scheduled", "start", start, "deadline", deadline)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(wait):
		return nil
	}
}

// drained is what a drain by this process did, for the Event and the webhook.
type drained struct {
	evicted []string
	took    time.Duration
}

// drain drains the node.
func (h *Handler) drain(ctx context.Context, n notice.Notice, nodeName string, deadline *drain.Deadline, log *slog.Logger) (drained, error) {
	res, err := h.drainer.DrainUntil(ctx, nodeName, deadline)
	h.countDrain(res, err)
	log.Info("drain finished", "selected", len(res.Pods), "skipped", len(res.Skipped), "remaining", len(res.Remaining()),
		"seconds", res.Finished.Sub(res.Started).Seconds(), "dryRun", res.DryRun, "err", err)
	for _, s := range res.Skipped {
		log.Debug("pod left on the node", "pod", s.Pod.String(), "reason", s.Reason)
	}
	if err != nil {
		return drained{}, fmt.Errorf("notice %s: %w", n.ID, err)
	}
	d := drained{took: res.Finished.Sub(res.Started)}
	for _, p := range res.Pods {
		if !p.EvictedAt.IsZero() {
			d.evicted = append(d.evicted, p.Pod.String())
		}
	}
	return d, nil
}

// finish runs the completion hook for a drained node and records the drain as done. hint,
// when not nil, is a recent copy of the node; done is this process's drain, if it ran one.
func (h *Handler) finish(ctx context.Context, n notice.Notice, nodeName string, hint *corev1.Node, done drained) error {
	var completed *Completed
	if h.OnDrained != nil && !h.cfg.DryRun {
		var err error
		if completed, err = h.OnDrained(ctx, n); err != nil {
			return fmt.Errorf("notice %s: after the drain: %w", n.ID, err)
		}
	}
	var notify bool
	edits := []nodes.Edit{claimOutcome(OutcomeDrained, &notify), recordEdit(n.ID, PhaseDrained, time.Time{})}
	if h.cfg.EnableOutOfServiceTaint {
		edits = append(edits, nodes.AddTaint(nodes.TaintOutOfService, "nodeshutdown", corev1.TaintEffectNoExecute))
	}
	res, err := h.writer.Apply(ctx, nodeName, hint, "record drain of notice "+n.ID, edits...)
	if err != nil {
		return err
	}
	if !h.cfg.DryRun {
		h.done.add(n.ID)
	}
	if completed != nil {
		h.Events.LifecycleCompleted(events.NodeOf(res.Node), completed.Hook, n.InstanceID, completed.Result)
	}
	if notify {
		h.Events.Drained(events.NodeOf(res.Node), n.ID, len(done.evicted), done.took)
		h.notify(ctx, n, res.Node, "drained", done.evicted)
	}
	return nil
}

// claimOutcome marks the episode's outcome as reported, setting *claimed when this write is
// the one that does it. The webhook and the Event are sent after the write: at most once per
// outcome (a crash between the two loses them rather than sending them twice).
func claimOutcome(outcome string, claimed *bool) nodes.Edit {
	return editRecord(func(r *Record) {
		// A cordon is no outcome to report once the episode drains (a cordon-only notice
		// that joins after the drain).
		*claimed = !r.reported(outcome) && !(outcome == OutcomeCordoned && r.Phase >= PhaseDraining)
		if *claimed {
			r.Reported = append(r.Reported, outcome)
			r.Notified = true // so that an older binary, during a rollout, reports nothing again
		}
	})
}

// notify sends the interruption's webhook. Failures are logged and counted, never retried
// past the sender's own attempts: the node's work is done either way.
func (h *Handler) notify(ctx context.Context, n notice.Notice, node *corev1.Node, state string, pods []string) {
	if !h.Webhook.Enabled() {
		return
	}
	if h.cfg.DryRun {
		h.log.Info("dry run: would send the interruption webhook", "notice", n.ID, "node", node.Name)
		h.Metrics.Action(metrics.ActionWebhook, metrics.ResultDryRun)
		return
	}
	err := h.Webhook.Send(ctx, webhook.Notification{
		EventID: n.ID, Kind: string(n.Kind), Monitor: string(n.Source), Description: n.Description, State: state,
		NodeName: node.Name, InstanceID: n.InstanceID, ProviderID: node.Spec.ProviderID,
		InstanceType: node.Labels[corev1.LabelInstanceTypeStable], StartTime: n.StartTime, EndTime: n.EndTime,
		Pods: pods, NodeLabels: node.Labels,
	})
	h.Metrics.ActionErr(metrics.ActionWebhook, err)
}

// RecordHeartbeat notes on the node that a lifecycle heartbeat was sent for the notice at
// the given time.
func (h *Handler) RecordHeartbeat(ctx context.Context, nodeName, noticeID string, at time.Time) error {
	edit := editRecord(func(r *Record) {
		if r.Heartbeat == nil || r.Heartbeat.Notice != noticeID {
			r.Heartbeat = &Heartbeat{Notice: noticeID}
		}
		r.Heartbeat.Count++
		r.Heartbeat.Last = at.UTC().Truncate(time.Second)
	})
	_, err := h.writer.Apply(ctx, nodeName, nil, "record lifecycle heartbeat for notice "+noticeID, edit)
	return err
}

// countDrain records a drain's duration and its pods' evictions.
func (h *Handler) countDrain(res *drain.Result, err error) {
	if h.Metrics == nil || res == nil {
		return
	}
	if res.DryRun {
		h.Metrics.Action(metrics.ActionDrain, metrics.ResultDryRun)
		return
	}
	h.Metrics.Drain(res.Finished.Sub(res.Started), err)
	counts := map[string]int{}
	for _, p := range res.Pods {
		switch {
		case p.Forced:
			counts["forced"]++
		case !p.EvictedAt.IsZero():
			counts["evicted"]++
		case p.Error != "":
			counts["failed"]++
		}
		// Every request but an accepted or failed last one was refused and retried.
		if p.Forced || (p.EvictedAt.IsZero() && p.Error == "") {
			counts["refused"] += p.Attempts
		} else {
			counts["refused"] += max(p.Attempts-1, 0)
		}
	}
	for r, n := range counts {
		h.Metrics.Evictions(r, n)
	}
}

func dryRunOr(dryRun bool, r string) string {
	if dryRun {
		return metrics.ResultDryRun
	}
	return r
}

// release undoes a notice whose scheduled event was canceled or completed. The node is
// uncordoned, and the interruption taints and labels removed, only when every notice that
// acted on it has been released, and only for what Lifeboat did itself. The decision is made
// inside the edit, so a retry after a conflict decides again on the fresh node (another
// notice may have cordoned it meanwhile).
func (h *Handler) release(ctx context.Context, n notice.Notice, node *corev1.Node, rec Record, log *slog.Logger) error {
	if !rec.Has(n.ID) || slices.Contains(rec.Released, n.ID) {
		log.Debug("event ended; nothing of Lifeboat's to undo")
		return nil
	}
	var uncordoned bool
	release := func(nd *corev1.Node) {
		uncordoned = h.releaseEdit(nd, func(r *Record) bool {
			if !r.Has(n.ID) {
				return false
			}
			if !slices.Contains(r.Released, n.ID) {
				r.Released = append(r.Released, n.ID)
			}
			return true
		})
	}
	if _, err := h.writer.Apply(ctx, node.Name, node, "release notice "+n.ID, release); err != nil {
		h.Metrics.Action(metrics.ActionUncordon, metrics.ResultError)
		return err
	}
	if uncordoned {
		h.Metrics.Action(metrics.ActionUncordon, dryRunOr(h.cfg.DryRun, metrics.ResultOK))
		h.Events.Uncordoned(events.NodeOf(node), "the scheduled event "+n.ID+" was canceled or completed")
	}
	log.Info("scheduled event ended; released the notice", "uncordoned", uncordoned)
	return nil
}

// releaseEdit applies mark to the node's record and, when every notice is then released,
// takes back Lifeboat's changes and resets the phase, so a later notice is handled afresh.
// It reports whether the node was released.
func (h *Handler) releaseEdit(n *corev1.Node, mark func(*Record) bool) bool {
	r, _ := ReadRecord(n)
	if !mark(&r) {
		return false
	}
	all := r.AllReleased()
	if all {
		for _, e := range h.undo(r) {
			e(n)
		}
		r.Phase, r.Deadline, r.RebootAfter, r.Notified, r.Reported, r.Heartbeat = PhaseNone, time.Time{}, time.Time{}, false, nil, nil
	}
	writeRecord(n, r)
	return all
}

// undo lists the edits that take back Lifeboat's own changes for the record's notices.
func (h *Handler) undo(rec Record) []nodes.Edit {
	values := map[string]bool{}
	for _, id := range rec.Notices {
		values[nodes.LabelValue(id)] = true
	}
	edits := []nodes.Edit{nodes.Uncordon(), func(n *corev1.Node) {
		kept := n.Spec.Taints[:0:0]
		for _, t := range n.Spec.Taints {
			if !(slices.Contains(interruptionTaints, t.Key) && values[t.Value]) {
				kept = append(kept, t)
			}
		}
		n.Spec.Taints = kept
	}}
	if h.cfg.ExcludeFromLoadBalancers {
		edits = append(edits, nodes.RemoveLabel(nodes.LabelExcludeFromLoadBalancers))
	}
	return append(edits, nodes.RemoveLabel(nodes.LabelUncordonAfterReboot))
}

var interruptionTaints = []string{nodes.TaintSpotInterruption, nodes.TaintScheduledMaintenance, nodes.TaintASGLifecycle, nodes.TaintRebalance}

// ReleaseAfterReboot uncordons a node that has been through its scheduled reboot: it booted
// after the record's RebootAfter. It reports whether it released the node. The record keeps
// its notices, all released, so a notice metadata still reports after the reboot is not
// acted on again.
func (h *Handler) ReleaseAfterReboot(ctx context.Context, node *corev1.Node, bootTime time.Time) (bool, error) {
	if rec, err := ReadRecord(node); err != nil || rec.RebootAfter.IsZero() || !bootTime.After(rec.RebootAfter) {
		return false, nil
	}
	var released bool
	edit := func(nd *corev1.Node) {
		released = h.releaseEdit(nd, func(r *Record) bool {
			if r.RebootAfter.IsZero() || !bootTime.After(r.RebootAfter) {
				return false
			}
			for _, id := range r.Notices {
				if !slices.Contains(r.Released, id) {
					r.Released = append(r.Released, id)
				}
			}
			return true
		})
	}
	if _, err := h.writer.Apply(ctx, node.Name, node, "uncordon after the scheduled reboot", edit); err != nil {
		return false, err
	}
	if released {
		h.log.Info("node rebooted after its scheduled reboot; uncordoned", "node", node.Name, "bootTime", bootTime)
	}
	return released, nil
}

// TightenDrain brings the deadline of the drain running on node in this process forward to t
// (a lifecycle action that can no longer be kept alive). It reports whether a drain was
// running and its deadline moved.
func (h *Handler) TightenDrain(node string, t time.Time) bool {
	h.mu.Lock()
	r := h.draining[node]
	h.mu.Unlock()
	return r != nil && r.deadline.Tighten(t)
}

// EndBootedEpisode closes the node's episode if the instance has booted again since it
// opened (a Spot stop or hibernation, a scheduled stop or reboot, started again): the instance
// runs, so Lifeboat takes back its own cordon, taints and labels; a new interruption comes as
// a new notice. It reports whether it ended the episode.
func (h *Handler) EndBootedEpisode(ctx context.Context, node *corev1.Node) (bool, error) {
	booted := func(n *corev1.Node, r Record) string {
		if BootedAgain(n, r) {
			return EpisodeEnded(n, r)
		}
		return ""
	}
	why, _, err := h.endEpisode(ctx, node, booted)
	return why != "", err
}

// endEpisode closes the node's episode when ended says it is over, deciding again on the node
// being written: Lifeboat's own cordon, taints and labels of the episode are taken back (an
// operator who uncordoned the node took it back; an instance that booted again runs), and the
// record keeps only what outlives episodes (see nextEpisode). It returns why the episode
// ended ("" when it had not) and the node as written.
func (h *Handler) endEpisode(ctx context.Context, node *corev1.Node, ended func(*corev1.Node, Record) string) (string, *corev1.Node, error) {
	if rec, err := ReadRecord(node); err != nil || !rec.Known() || ended(node, rec) == "" {
		return "", nil, nil
	}
	var (
		why      string
		previous []string
	)
	edit := func(nd *corev1.Node) {
		r, _ := ReadRecord(nd)
		if !r.Known() {
			why = ""
			return
		}
		if why = ended(nd, r); why == "" {
			return
		}
		previous = r.Notices
		for _, e := range h.undo(r) {
			e(nd)
		}
		writeRecord(nd, r.nextEpisode(bootedAgain(nd, r)))
	}
	res, err := h.writer.Apply(ctx, node.Name, node, "end the node's interruption episode", edit)
	if err != nil {
		return "", nil, err
	}
	if why != "" {
		h.done.forget(previous...)
		h.log.Info("the node's interruption episode is over: Lifeboat's cordon and taints taken back", "node", node.Name, "why", why, "notices", previous)
		if !h.cfg.DryRun {
			h.Metrics.Action(metrics.ActionUncordon, metrics.ResultOK)
			h.Events.Uncordoned(events.NodeOf(node), "the interruption episode is over: "+why)
		}
	}
	return why, res.Node, nil
}

func (h *Handler) startDrain(node, id string, deadline time.Time) (r *running, first, duplicate bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if r, ok := h.draining[node]; ok {
		if r.ids[id] {
			return r, false, true
		}
		r.ids[id] = true
		return r, false, false
	}
	r = &running{done: make(chan struct{}), ids: map[string]bool{id: true}, deadline: drain.NewDeadline(deadline)}
	h.draining[node] = r
	return r, true, false
}

func (h *Handler) endDrain(node string, r *running) {
	h.mu.Lock()
	delete(h.draining, node)
	h.mu.Unlock()
	close(r.done)
}

// InstanceIDOf returns the instance id in a node's aws:///<zone>/<instance-id> providerID,
// or "" when the node has none. Ownership decides with the same parser.
func InstanceIDOf(n *corev1.Node) string {
	return ownership.InstanceIDFromProviderID(n.Spec.ProviderID)
}
