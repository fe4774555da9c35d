// SPDX-License-Identifier: Apache-2.0

package episode

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/events"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/record"
)

// Reconcile drives the node's episode from its record as far as it can go now. It ends an
// episode that is over (the node booted again or was taken back); returns how long until the
// earliest scheduled start of its pending notices, if that is ahead; drains the node once, by
// the earliest of their deadlines; and finishes each of them: its lifecycle action completed
// (Options.Completer), the drain recorded, the outcome reported once. An error asks for a
// retry; a positive duration asks to be called again after it. node is a recent copy (an
// informer's): a drain is decided on a fresh read, so a stale copy never drains a node twice.
// One Reconcile at a time works on a node in this process.
func (h *Handler) Reconcile(ctx context.Context, node *corev1.Node) (time.Duration, error) {
	// What the copy shows is decided without a request: nothing to do, or a scheduled start
	// still ahead (a node's status updates must not cost a read each while it waits days).
	rec, err := record.Read(node)
	if err != nil {
		h.invalid.report(node, err)
		return 0, nil
	}
	if !rec.Known() {
		return h.newer.leftBehind(ctx, node, rec)
	}
	h.newer.notices(node, rec)
	if record.EpisodeEnded(node, rec) == "" {
		pending := Pending(rec, h.cfg, h.origin)
		if len(pending) == 0 {
			return h.newer.releaseUnknown(ctx, node, rec) // nothing else to do: no request unless one is due
		}
		if retentionStopped(rec, pending) {
			return 0, nil
		}
		if wait := time.Until(drainStart(h.cfg, pending...)); wait > 0 {
			return wait, nil
		}
		if until, waits := waitsForOwner(rec, h.origin, time.Now()); waits && drainWanted(rec, pending) {
			h.metrics.DrainClaim(metrics.ClaimWaited)
			return ownerWait(until), nil
		}
		if h.drains.onlyTerminating(node, rec, pending) {
			return terminationPoll, nil
		}
	}
	if fresh := h.takeover.freshEnough(node); fresh != nil {
		return h.reconcile(ctx, fresh)
	}
	fresh, err := h.client.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
	if err != nil {
		return 0, fmt.Errorf("read node %s: %w", node.Name, err)
	}
	return h.reconcile(ctx, keptByDrain(fresh))
}

// reconcile is Reconcile on a fresh copy of the node: the episode's phases in their order.
func (h *Handler) reconcile(ctx context.Context, node *corev1.Node) (time.Duration, error) {
	rec, _ := record.Read(node)
	if !rec.Known() {
		return 0, nil
	}
	if why := record.EpisodeEnded(node, rec); why != "" {
		// Nothing is drained for an episode that is over: its notices are called off.
		if pending := Pending(rec, h.cfg, h.origin); len(pending) > 0 {
			h.log.Info("drain called off: the node's episode is over", "node", node.Name, "why", why, "notices", ids(pending))
		}
		_, _, err := h.ends.end(ctx, node, record.EpisodeEnded)
		return 0, err
	}
	pending := Pending(rec, h.cfg, h.origin)
	if len(pending) == 0 {
		return 0, nil
	}
	if wait := time.Until(drainStart(h.cfg, pending...)); wait > 0 {
		return wait, nil // the wait phase: a scheduled start still ahead
	}
	e := episode{node: node, rec: rec, pending: pending, log: h.log.With("node", node.Name, "notices", ids(pending))}
	e.retention = h.retentions.of(ctx, rec, pending, e.log)
	switch {
	case e.retention.state == stateStopped:
		return 0, nil
	case e.retention.state == stateRetained && !time.Now().Before(e.retention.rec.Until):
		return 0, h.retentions.stop(ctx, node, e.retention, e.log)
	}
	if rec.Retained != nil {
		e.outcome.abandoned = rec.Retained.Notices
	}
	if e.retention.state != stateTerminated && drainWanted(rec, pending) {
		if wait, finish, err := h.drainEpisode(ctx, &e); !finish {
			return wait, err
		}
	}
	finished, err := h.completion.finishAll(ctx, e.node, pending, &e.outcome)
	if err != nil {
		return 0, err
	}
	e.node = finished // the condition's write starts from it, not from the copy before the finish
	h.conditions.set(e.node, ConditionHandedBack, handedBackMessage(pending, e.outcome))
	observeLatency(h.metrics, h.cfg, pending, metrics.StageHandedBack)
	return 0, nil
}

// handedBackMessage is the condition's message once the notices are finished.
func handedBackMessage(pending []notice.Notice, done drainOutcome) string {
	msg := "Drained for notice " + strings.Join(ids(pending), ", ") + "; the instance is handed back and may go"
	if done.ran {
		msg += fmt.Sprintf(" (%d pod(s) evicted)", len(done.evicted))
	}
	return msg
}

// episode is what one reconcile knows of the node's episode as its phases run.
type episode struct {
	node      *corev1.Node // as last read or written
	rec       record.Record
	pending   []notice.Notice
	retention retention
	outcome   drainOutcome
	log       *slog.Logger
}

// drainEpisode runs the phases that need the node to itself: claim, keep alive, drain, hand
// back, and (under retention) abandon or terminate. It reports whether the notices are to be
// finished now (finish), or else what Reconcile returns.
func (h *Handler) drainEpisode(ctx context.Context, e *episode) (wait time.Duration, finish bool, _ error) {
	node, wait, err := h.claims.take(ctx, e.node, e.rec, e.log)
	if node == nil {
		return wait, false, err
	}
	e.node = node
	deadline := e.retention.deadline(e.rec, e.pending)
	if e.retention.state == stateMayAbandon {
		deadline.EndBefore(abandonMargin) // before anything can bring the deadline forward
	}
	if live := unabandoned(e.rec, e.pending); h.keepAlive != nil && len(live) > 0 {
		defer h.keepAlive.Start(ctx, node, live, deadline)() // an abandoned action has no heartbeat to keep
	}
	defer h.drains.track(node.Name, deadline)()
	h.conditions.set(node, ConditionDraining, drainingMessage(e.pending[0].ID, deadline.Time()))
	if e.retention.state != stateRetained {
		h.events.DrainStarted(events.NodeOf(node), e.pending[0].ID, deadline.Time())
	}
	owning, stopOwning := h.claims.keep(ctx, node, deadline, e.log)
	abandoned := e.outcome.abandoned
	terms := h.dead.terms(owning, node, e.retention.terms(node, e.pending), e.log)
	e.outcome, err = h.drains.run(owning, node, deadline, terms, e.log)
	e.outcome.abandoned = abandoned
	safe := true
	if err == nil && e.outcome.ran && owning.Err() == nil {
		observeLatency(h.metrics, h.cfg, e.pending, metrics.StageDrained)
	}
	if err == nil && terms.Dead == "" { // a dead instance's volumes are the attach-detach controller's to force off
		e.outcome.notes, safe = h.detachPhase.run(owning, node, e.pending, deadline, e.outcome, e.rec.Detach, e.log)
	}
	// Read before stopOwning, which ends owning too: a claim lost (or a shutdown) during the
	// drain or the waits leaves the notices to whoever drains the node next.
	stopped := owning.Err()
	stopOwning() // before finishing, whose write gives the claim up
	if stopped == nil && (e.retention.state == stateMayAbandon || e.retention.state == stateRetained) {
		if err != nil && e.retention.state == stateMayAbandon {
			h.events.DrainFailed(events.NodeOf(node), e.pending[0].ID, err)
		}
		e.outcome.tell() // before what abandoning or a retained instance's end tells
		return h.retentions.afterDrain(ctx, node, e.retention, deadline, e.outcome, err, safe, e.log)
	}
	switch {
	case err != nil:
		if stopped == nil {
			h.events.DrainFailed(events.NodeOf(node), e.pending[0].ID, err)
		}
		return 0, false, err
	case stopped != nil:
		e.outcome.tell()
		return 0, false, fmt.Errorf("node %s: stopped before the instance was handed back: %w", node.Name, stopped)
	}
	return 0, true, nil
}

// observeLatency records that the notices reached the stage (not under DRY_RUN, which does
// nothing).
func observeLatency(m *metrics.Metrics, c *config.Config, ns []notice.Notice, stage string) {
	if c.DryRun {
		return
	}
	for _, n := range ns {
		m.InterruptionLatency(n.Kind, stage, n.Announced)
	}
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
func drainStart(c *config.Config, ns ...notice.Notice) time.Time {
	var start time.Time
	for i, n := range ns {
		s := time.Time{}
		if n.Kind.Scheduled() {
			s = n.Deadline.Add(-time.Duration(c.NodeTerminationGracePeriod) * time.Second)
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
func (h *Handler) dryRunEpisode(ctx context.Context, node *corev1.Node, n notice.Notice) error {
	log := h.log.With("notice", n.ID, "kind", n.Kind, "node", node.Name, "instance", n.InstanceID)
	if start := drainStart(h.cfg, n); time.Until(start) > 0 {
		log.Info("dry run: the drain would begin at its scheduled start", "start", start)
	}
	done, err := h.drains.run(ctx, node, drain.NewDeadline(drainDeadline(n)), TermsOf(node, []notice.Notice{n}), log)
	if err != nil {
		return err
	}
	_, err = h.completion.finish(ctx, n, node.Name, node, &done)
	return err
}

// Intake takes one notice for the node (see intake.take): from then on the work is the
// reconciler's, and whoever brought the notice may forget it. In DRY_RUN nothing is written,
// so nothing is left for a reconciler: Intake then shows at once what the episode would do.
func (h *Handler) Intake(ctx context.Context, n notice.Notice, nodeName string, cached *corev1.Node) error {
	toDrain, err := h.intake.take(ctx, n, nodeName, cached)
	if err != nil || toDrain == nil || !h.cfg.DryRun {
		return err
	}
	return h.dryRunEpisode(ctx, toDrain, n)
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
	rec.Heartbeat, rec.Detach = nil, nil
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
