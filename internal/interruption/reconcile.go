package interruption

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/events"
	"lifeboat.dev/lifeboat/internal/instancegate"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/record"
	"lifeboat.dev/lifeboat/internal/webhook"
)

// Reconcile drives the node's episode from its record as far as it can go now. It ends an
// episode that is over (the node booted again or was taken back); returns how long until the
// earliest scheduled start of its pending notices, if that is ahead; drains the node once, by
// the earliest of their deadlines; and finishes each of them: its lifecycle action completed
// (Options.Complete), the drain recorded, the outcome reported once. An error asks for a retry; a
// positive duration asks to be called again after it. node is a recent copy (an informer's):
// a drain is decided on a fresh read, so a stale copy never drains a node twice. One
// Reconcile at a time works on a node in this process.
func (h *Handler) Reconcile(ctx context.Context, node *corev1.Node) (time.Duration, error) {
	// What the copy shows is decided without a request: nothing to do, or a scheduled start
	// still ahead (a node's status updates must not cost a read each while it waits days).
	rec, err := record.Read(node)
	if err != nil {
		h.ReportInvalidRecord(node, err)
		return 0, nil
	}
	if !rec.Known() {
		return 0, nil
	}
	if record.EpisodeEnded(node, rec) == "" {
		pending := Pending(rec, h.cfg, h.origin)
		if len(pending) == 0 || retentionStopped(rec, pending) {
			return 0, nil
		}
		if wait := time.Until(h.drainStart(pending...)); wait > 0 {
			return wait, nil
		}
		if until, waits := waitsForOwner(rec, h.origin, time.Now()); waits && drainWanted(rec, pending) {
			h.metrics.DrainClaim(metrics.ClaimWaited)
			return ownerWait(until), nil
		}
		if h.onlyTerminationsLeft(node, rec, pending) {
			return terminationPoll, nil
		}
	}
	fresh, err := h.client.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
	if err != nil {
		return 0, fmt.Errorf("read node %s: %w", node.Name, err)
	}
	return h.reconcile(ctx, keptByDrain(fresh))
}

// reconcile is Reconcile on a fresh copy of the node.
func (h *Handler) reconcile(ctx context.Context, node *corev1.Node) (time.Duration, error) {
	rec, _ := record.Read(node)
	if !rec.Known() {
		return 0, nil
	}
	if record.EpisodeEnded(node, rec) != "" {
		// Nothing is drained for an episode that is over: its notices are called off.
		if pending := Pending(rec, h.cfg, h.origin); len(pending) > 0 {
			h.log.Info("drain called off: the node's episode is over", "node", node.Name, "why", record.EpisodeEnded(node, rec), "notices", ids(pending))
		}
		_, _, err := h.endEpisode(ctx, node, record.EpisodeEnded)
		return 0, err
	}
	pending := Pending(rec, h.cfg, h.origin)
	if len(pending) == 0 {
		return 0, nil
	}
	if wait := time.Until(h.drainStart(pending...)); wait > 0 {
		return wait, nil
	}
	log := h.log.With("node", node.Name, "notices", ids(pending))
	ret := h.retentionOf(ctx, rec, pending, log)
	switch {
	case ret.state == stateStopped:
		return 0, nil
	case ret.state == stateRetained && !time.Now().Before(ret.rec.Until):
		return 0, h.stopRetention(ctx, node, ret, log)
	}
	var done drained
	if rec.Retained != nil {
		done.abandoned = rec.Retained.Notices
	}
	if ret.state != stateTerminated && drainWanted(rec, pending) {
		// One Lifeboat drains the node: another origin's owner is waited for (its drain
		// done, this process only finishes its own notices). A claim nobody contested yet
		// is contested by the claim below, which then waits.
		if until, waits := waitsForOwner(rec, h.origin, time.Now()); waits {
			h.metrics.DrainClaim(metrics.ClaimWaited)
			log.Debug("another Lifeboat drains the node; waiting for it", "owner", rec.Owner.Origin, "holder", rec.Owner.Holder)
			return ownerWait(until), nil
		}
		claimed, owned, err := h.claim(ctx, node)
		if err != nil {
			return 0, err
		}
		if !owned {
			h.metrics.DrainClaim(metrics.ClaimWaited)
			log.Info("another Lifeboat drains the node; told it this one waits, and waiting for it")
			return ownerPoll, nil
		}
		node = claimed
		h.metrics.DrainClaim(metrics.ClaimClaimed)
		stop := func() {}
		if live := unabandoned(rec, pending); h.keepAlive != nil && len(live) > 0 {
			stop = h.keepAlive(ctx, node, live) // an abandoned action has no heartbeat to keep
		}
		defer stop()
		deadline := ret.deadline(rec, pending)
		untrack := h.track(node.Name, deadline)
		defer untrack()
		if ret.state == stateMayAbandon {
			h.keepMargin(node.Name, abandonMargin)
		}
		if ret.state != stateRetained {
			h.events.DrainStarted(events.NodeOf(node), pending[0].ID, deadline.Time())
		}
		owning, stopOwning := h.keepOwnership(ctx, node, log)
		abandoned := done.abandoned
		done, err = h.drain(owning, node, deadline, ret.terms(node, pending), log)
		done.abandoned = abandoned
		safe := true
		if err == nil {
			done.notes, safe = h.handBack(owning, node, pending, deadline, done, rec.Handback, log)
		}
		// Read before stopOwning, which ends owning too: a claim lost (or a shutdown) during
		// the drain or the waits leaves the notices to whoever drains the node next.
		stopped := owning.Err()
		stopOwning() // before finishing, whose write gives the claim up
		if stopped == nil && (ret.state == stateMayAbandon || ret.state == stateRetained) {
			if err != nil && ret.state == stateMayAbandon {
				h.events.DrainFailed(events.NodeOf(node), pending[0].ID, err)
			}
			done.tell() // before what abandoning or a retained instance's end tells
			wait, finish, aerr := h.afterDrain(ctx, node, ret, deadline, done, err, safe, log)
			if !finish {
				return wait, aerr
			}
			err = nil // drained (and, when retained, the instance terminated): finish
		}
		switch {
		case err != nil:
			if stopped == nil {
				h.events.DrainFailed(events.NodeOf(node), pending[0].ID, err)
			}
			return 0, err
		case stopped != nil:
			done.tell()
			return 0, fmt.Errorf("node %s: stopped before the instance was handed back: %w", node.Name, stopped)
		}
	}
	// The node as last read saves a read; if it changed since, each write conflicts and is
	// recomputed from a fresh read.
	hint := node
	for _, n := range pending {
		written, err := h.finish(ctx, n, node.Name, hint, &done)
		if err != nil {
			done.tell()
			return 0, err
		}
		hint = written
	}
	return 0, nil
}

// terminationPoll is how often a node left alone by onlyTerminationsLeft is looked at again:
// in memory, without a request.
const terminationPoll = 5 * time.Second

// onlyTerminationsLeft reports whether the node's drain is left alone for now because, run
// again, it would only wait for pods already terminating: every pending notice's instance was
// taken at its deadline whatever Lifeboat did (a Spot or capacity-reservation warning; no
// lifecycle heartbeat extends it), that deadline has passed, and the shared pod informer shows
// nothing left to evict. The drain that met the deadline said so (its DrainFailed Event);
// running it again every half minute would only cost a read, a claim and two Events per node
// (an Availability Zone reclaimed at once counts a thousand nodes, whose pods leave only when
// the node object is deleted). The node's notices finish once its pods are gone, or it is
// drained again as soon as something is left to evict. Without a shared pod informer (the
// agent, USE_APISERVER_CACHE=false) the drain is retried as before.
func (h *Handler) onlyTerminationsLeft(node *corev1.Node, rec record.Record, pending []notice.Notice) bool {
	now := time.Now()
	if !drainWanted(rec, pending) || slices.ContainsFunc(pending, func(n notice.Notice) bool {
		return !takenAtDeadline(n.Kind) || n.Deadline.IsZero() || now.Before(n.Deadline)
	}) {
		return false
	}
	left, ok := h.drainer.Load().Outstanding(node.Name, TermsOf(node, pending))
	if !ok || left.Evict > 0 || left.Terminating == 0 {
		return false
	}
	h.log.Debug("past the deadline, only terminating pods are left on the node; waiting for them without draining again",
		"node", node.Name, "terminating", left.Terminating, "notices", ids(pending))
	return true
}

// takenAtDeadline reports whether a notice's instance goes at its deadline and nothing
// Lifeboat does extends it.
func takenAtDeadline(k notice.Kind) bool {
	return k == notice.SpotInterruption || k == notice.CapacityReservationInterruption || k == notice.CapacityBlockExpiration
}

// ids lists the notices' ids, for the log.
func ids(ns []notice.Notice) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.ID
	}
	return out
}

// drainStart is when the drain for the notices begins: at once, unless every one of them is
// a scheduled event, whose drain begins NODE_TERMINATION_GRACE_PERIOD before its start (its
// deadline). Other kinds drain at once: their deadline is when the instance goes, and the
// whole budget is the drain's.
func (h *Handler) drainStart(ns ...notice.Notice) time.Time {
	var start time.Time
	for i, n := range ns {
		s := time.Time{}
		if n.Kind == notice.ScheduledMaintenance {
			s = n.Deadline.Add(-time.Duration(h.cfg.NodeTerminationGracePeriod) * time.Second)
		}
		if i == 0 || s.Before(start) {
			start = s
		}
	}
	return start
}

// drainDeadline is the earliest deadline of the notices, or a short budget from now when
// that has passed (a late or restarted start).
func drainDeadline(ns ...notice.Notice) time.Time {
	var deadline time.Time
	for _, n := range ns {
		if deadline.IsZero() || (!n.Deadline.IsZero() && n.Deadline.Before(deadline)) {
			deadline = n.Deadline
		}
	}
	if minimum := time.Now().Add(30 * time.Second); deadline.Before(minimum) {
		return minimum
	}
	return deadline
}

// dryRunEpisode shows, in DRY_RUN, what the node's episode would do for the notice: the drain
// (which only lists the pods it would evict) and the report, without waiting for a scheduled
// start (the log says when the drain would begin).
func (h *Handler) dryRunEpisode(ctx context.Context, node *corev1.Node, n notice.Notice, log *slog.Logger) error {
	if start := h.drainStart(n); time.Until(start) > 0 {
		log.Info("dry run: the drain would begin at its scheduled start", "start", start)
	}
	done, err := h.drain(ctx, node, drain.NewDeadline(drainDeadline(n)), TermsOf(node, []notice.Notice{n}), log)
	if err != nil {
		return err
	}
	_, err = h.finish(ctx, n, node.Name, node, &done)
	return err
}

// TightenDrain brings the deadline of the drain running on node in this process forward to t
// (a more urgent notice, or a lifecycle action that can no longer be kept alive). It reports
// whether a drain was running and its deadline moved.
func (h *Handler) TightenDrain(node string, t time.Time) bool {
	h.mu.Lock()
	d, margin := h.draining[node], h.margins[node]
	h.mu.Unlock()
	if d != nil && d.Patient() {
		// A retained node's round ends at once: the next one drains under the new terms.
		t = time.Now()
	}
	return d != nil && d.Tighten(t.Add(-margin))
}

// drainEndsAfter reports whether a drain runs on node in this process with a deadline later
// than t.
func (h *Handler) drainEndsAfter(node string, t time.Time) bool {
	h.mu.Lock()
	d := h.draining[node]
	h.mu.Unlock()
	return d != nil && t.Before(d.Time())
}

// drained is what a drain by this process did, for the Event, the webhook, the record and
// the waits before the hand-back.
type drained struct {
	ran     bool // this process drained the node (the rest is empty when not)
	evicted []string
	took    time.Duration
	claims  []string // the evicted pods' PersistentVolumeClaims
	podIPs  []string // and their IPs
	held    []string // pods left because they are marked not to disrupt (see record.Record.Held)
	// abandoned are the notices whose lifecycle actions were completed with ABANDON: none is
	// completed again.
	abandoned []string
	// notes are the hand-back's Events, told once, after the drain's own (see handBack).
	notes []func()
}

// tell records the hand-back's Events, once.
func (d *drained) tell() {
	for _, note := range d.notes {
		note()
	}
	d.notes = nil
}

// TermsOf are the terms the pending notices give the node's drain: whether one of them is a
// reclaim, and the interruption taints on the node.
func TermsOf(node *corev1.Node, pending []notice.Notice) drain.Terms {
	var terms drain.Terms
	for _, n := range pending {
		terms.Reclaim = terms.Reclaim || n.Kind.Reclaims()
	}
	for _, t := range node.Spec.Taints {
		if slices.Contains(interruptionTaints, t.Key) {
			terms.Taints = append(terms.Taints, t)
		}
	}
	return terms
}

// track makes the node's drain deadline the one TightenDrain moves, until untrack.
func (h *Handler) track(nodeName string, deadline *drain.Deadline) (untrack func()) {
	h.mu.Lock()
	h.draining[nodeName] = deadline
	h.mu.Unlock()
	return func() {
		h.mu.Lock()
		delete(h.draining, nodeName)
		delete(h.margins, nodeName)
		h.mu.Unlock()
	}
}

// keepMargin makes TightenDrain end the node's running drain margin before the time it is
// given (a drain that may abandon its hook ends before the action expires).
func (h *Handler) keepMargin(nodeName string, margin time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.margins == nil {
		h.margins = map[string]time.Duration{}
	}
	h.margins[nodeName] = margin
}

// drain drains the node by the deadline, which TightenDrain may bring forward meanwhile, under
// the notices' terms. Pods it leaves because they are marked not to disrupt are reported.
func (h *Handler) drain(ctx context.Context, node *corev1.Node, deadline *drain.Deadline, terms drain.Terms, log *slog.Logger) (drained, error) {
	nodeName := node.Name
	res, err := h.drainer.Load().DrainUntil(ctx, nodeName, deadline, terms)
	h.countDrain(res, deadline.Time(), err)
	log.Info("drain finished", "selected", len(res.Pods), "skipped", len(res.Skipped), "remaining", len(res.Remaining()),
		"seconds", res.Finished.Sub(res.Started).Seconds(), "dryRun", res.DryRun, "err", err)
	for _, s := range res.Skipped {
		log.Debug("pod left on the node", "pod", s.Pod.String(), "reason", s.Reason)
	}
	held := res.Held()
	if len(held) > 0 && !res.DryRun {
		names := make([]string, len(held))
		for i, s := range held {
			names[i] = s.Pod.String()
		}
		log.Warn("pods marked not to disrupt stay on the node: no notice is a reclaim", "pods", names)
		h.events.PodsHeld(events.NodeOf(node), names)
		for _, s := range held {
			h.events.PodHeld(events.Pod{Namespace: s.Pod.Namespace, Name: s.Pod.Name, UID: s.UID}, nodeName)
		}
	}
	if err != nil {
		return drained{}, fmt.Errorf("drain node %s: %w", nodeName, err)
	}
	d := drained{ran: true, took: res.Finished.Sub(res.Started)}
	for _, s := range held {
		d.held = append(d.held, s.Pod.String())
	}
	for _, p := range res.Pods {
		if !p.EvictedAt.IsZero() {
			d.evicted = append(d.evicted, p.Pod.String())
			d.claims = append(d.claims, p.Claims...)
			if p.IP != "" {
				d.podIPs = append(d.podIPs, p.IP)
			}
		}
	}
	return d, nil
}

// finish runs the completion hook for a drained node and records the notice as finished; the
// write that first records the drain reports it (Event, webhook). hint, when not nil, is a
// recent copy of the node; done is this process's drain, if it ran one. It returns the node
// as written.
func (h *Handler) finish(ctx context.Context, n notice.Notice, nodeName string, hint *corev1.Node, done *drained) (*corev1.Node, error) {
	var (
		completed *Completed
		refused   *instancegate.Refusal
	)
	if h.complete != nil && !h.cfg.DryRun && !slices.Contains(done.abandoned, n.ID) {
		var err error
		if completed, err = h.complete(ctx, nodeName, n); err != nil {
			var ok bool
			if refused, ok = instancegate.IsRefusal(err); !ok {
				return nil, fmt.Errorf("notice %s: after the drain: %w", n.ID, err)
			}
			// Final: retrying cannot make the record's instance the node's. The notice is
			// finished without its call.
			h.log.Error("AWS call refused: the node's record names an instance or group that is not the node's own",
				"notice", n.ID, "node", nodeName, "call", refused.Call, "instance", refused.InstanceID,
				"nodeInstance", refused.NodeInstance, "group", refused.Group, "why", refused.Reason)
		}
	}
	var notify bool
	edits := []nodes.Edit{claimOutcome(record.OutcomeDrained, &notify), record.PhaseEdit(n.ID, record.PhaseDrained, time.Time{}), h.disownEdit()}
	if done.ran {
		edits = append(edits, record.Edit(func(r *record.Record) { r.Held, r.Handback = done.held, nil }))
	}
	if h.cfg.EnableOutOfServiceTaint {
		edits = append(edits, nodes.AddTaint(nodes.TaintOutOfService, "nodeshutdown", corev1.TaintEffectNoExecute))
	}
	res, err := h.writer.Apply(ctx, nodeName, hint, "record drain of notice "+n.ID, edits...)
	if err != nil {
		return nil, err
	}
	h.done.add(n.ID) // in DRY_RUN too, so a dry run shows each notice once (see Intake)
	// The node's Events in the order things happened: drained, the hand-back's waits, the
	// lifecycle action completed.
	if notify {
		h.events.Drained(events.NodeOf(res.Node), n.ID, len(done.evicted), done.took)
	}
	done.tell()
	if completed != nil {
		h.events.LifecycleCompleted(events.NodeOf(res.Node), completed.Hook, n.InstanceID, completed.Result)
	}
	if refused != nil {
		h.events.InstanceCallRefused(events.NodeOf(res.Node), refused.Error())
	}
	if notify {
		h.notify(ctx, n, res.Node, "drained", done.evicted)
	}
	return res.Node, nil
}

// claimOutcome marks the episode's outcome as reported, setting *claimed when this write is
// the one that does it. The webhook and the Event are sent after the write: at most once per
// outcome (a crash between the two loses them rather than sending them twice).
func claimOutcome(outcome string, claimed *bool) nodes.Edit {
	return record.Edit(func(r *record.Record) {
		// A cordon is no outcome to report once the episode drains (a cordon-only notice
		// that joins after the drain).
		*claimed = !r.WasReported(outcome) && !(outcome == record.OutcomeCordoned && r.Phase >= record.PhaseDraining)
		if *claimed {
			r.Reported = append(r.Reported, outcome)
			r.Notified = true // so that an older binary, during a rollout, reports nothing again
		}
	})
}

// notify sends the interruption's webhook. Failures are logged and counted, never retried
// past the sender's own attempts: the node's work is done either way.
func (h *Handler) notify(ctx context.Context, n notice.Notice, node *corev1.Node, state string, pods []string) {
	if !h.webhook.Enabled() {
		return
	}
	if h.cfg.DryRun {
		h.log.Info("dry run: would send the interruption webhook", "notice", n.ID, "node", node.Name)
		h.metrics.Action(metrics.ActionWebhook, metrics.ResultDryRun)
		return
	}
	err := h.webhook.Send(ctx, webhook.Notification{
		EventID: n.ID, Kind: string(n.Kind), Monitor: string(n.Source), Description: n.Description, State: state,
		NodeName: node.Name, InstanceID: n.InstanceID, ProviderID: node.Spec.ProviderID,
		InstanceType: node.Labels[corev1.LabelInstanceTypeStable], StartTime: n.StartTime, EndTime: n.EndTime,
		Pods: pods, NodeLabels: node.Labels,
	})
	h.metrics.ActionErr(metrics.ActionWebhook, err)
}

// RecordHeartbeat notes on the node that a lifecycle heartbeat was sent for the notice at
// the given time.
func (h *Handler) RecordHeartbeat(ctx context.Context, nodeName, noticeID string, at time.Time) error {
	edit := record.Edit(func(r *record.Record) {
		if r.Heartbeat == nil || r.Heartbeat.Notice != noticeID {
			r.Heartbeat = &record.Heartbeat{Notice: noticeID}
		}
		r.Heartbeat.Count++
		r.Heartbeat.Last = at.UTC().Truncate(time.Second)
	})
	_, err := h.writer.Apply(ctx, nodeName, nil, "record lifecycle heartbeat for notice "+noticeID, edit)
	return err
}

// countDrain records a drain's duration, against the time it had until the deadline, and its
// pods' evictions.
func (h *Handler) countDrain(res *drain.Result, deadline time.Time, err error) {
	if h.metrics == nil || res == nil {
		return
	}
	if res.DryRun {
		h.metrics.Action(metrics.ActionDrain, metrics.ResultDryRun)
		return
	}
	var allowed time.Duration
	if !deadline.IsZero() {
		allowed = deadline.Sub(res.Started)
	}
	h.metrics.Drain(res.Finished.Sub(res.Started), allowed, err)
	counts := map[string]int{}
	for _, p := range res.Pods {
		switch {
		case p.Forced:
			counts[metrics.EvictionForced]++
		case !p.EvictedAt.IsZero():
			counts[metrics.EvictionEvicted]++
		case p.Error != "":
			counts[metrics.EvictionFailed]++
		}
		// Every request but an accepted or failed last one was refused and retried: by a
		// disruption budget, or else by throttling or a transient error.
		refused := p.Attempts
		if !p.Forced && (!p.EvictedAt.IsZero() || p.Error != "") {
			refused = max(p.Attempts-1, 0)
		}
		budget := min(p.BudgetRefusals, refused)
		counts[metrics.EvictionRefused] += budget
		counts[metrics.EvictionRetried] += refused - budget
	}
	for r, n := range counts {
		h.metrics.Evictions(r, n)
	}
	for _, s := range res.Skipped {
		h.metrics.PodLeft(s.Reason.Label())
	}
}

// Wakes reports whether a change of the node from old to cur can give Reconcile new work,
// for an informer's update: a notice recorded, finished or released, the phase, the
// node made schedulable again or booted again, another origin's owner come or gone. The
// process's own claim renewals, heartbeats and hand-back notes do not: were they to wake the
// node, a failing drain would run again as soon as its own writes came back through the
// informer, past the queue's backoff. A relist's update (same resourceVersion) always wakes.
func Wakes(old, cur *corev1.Node, origin string) bool {
	if old == nil || old.ResourceVersion == cur.ResourceVersion {
		return true
	}
	if old.Spec.Unschedulable != cur.Spec.Unschedulable || old.Status.NodeInfo.BootID != cur.Status.NodeInfo.BootID {
		return true
	}
	// Most updates are the kubelet's status: the record is the same text, nothing to parse.
	return old.Annotations[record.Annotation] != cur.Annotations[record.Annotation] &&
		!reflect.DeepEqual(workOf(old, origin), workOf(cur, origin))
}

// workOf is the part of the node's record that decides a reconcile's work.
func workOf(n *corev1.Node, origin string) *record.Record {
	rec, err := record.Read(n)
	if err != nil {
		return nil
	}
	rec.Heartbeat, rec.Handback = nil, nil
	switch {
	case rec.Owner == nil:
	case rec.Owner.Origin == origin:
		rec.Owner = nil // this origin's own claim, renewed or not
	default:
		owner := *rec.Owner
		owner.Renewed, owner.Contested = time.Time{}, time.Time{} // a waiting process looks again by itself (ownerWait)
		rec.Owner = &owner
	}
	return &rec
}
