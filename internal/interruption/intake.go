package interruption

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"lifeboat.dev/lifeboat/internal/events"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/record"
)

// Intake takes one notice for the node. In one conflict-safe write, computed from the node
// just read, it ends the node's episode if that is over, opens or joins the node's episode,
// taints, labels and cordons the node as the notice's plan says, and records the notice's
// intent: from then on the work is the reconciler's (Reconcile), and whoever brought the
// notice may forget it (delete its queue message). A release undoes instead (see release).
// A drain already running for the node in this process is brought forward to the notice's
// deadline. cached, when not nil, is a recent copy of the node (an informer's) used instead
// of a first read; a decision to do nothing is confirmed on a fresh read.
//
// In DRY_RUN nothing is written, so nothing is left for a reconciler: Intake then shows at
// once what the episode would do (see dryRunEpisode).
func (h *Handler) Intake(ctx context.Context, n notice.Notice, nodeName string, cached *corev1.Node) error {
	log := h.log.With("notice", n.ID, "kind", n.Kind, "node", nodeName, "instance", n.InstanceID)
	if !n.Released && h.done.has(n.ID) && !episodeEndedOn(cached) {
		log.Debug("notice already handled")
		return nil
	}
	node, err := h.readForIntake(ctx, n, nodeName, cached)
	if err != nil {
		return err
	}
	if id := InstanceIDOf(node); id != "" && id != n.InstanceID {
		return fmt.Errorf("notice %s: node %s has providerID %q: %w", n.ID, nodeName, node.Spec.ProviderID, ErrNotOurs)
	}
	rec, err := record.Read(node)
	if err != nil {
		// This notice starts a fresh record in its place.
		h.ReportInvalidRecord(node, err)
	}
	n = rec.MatchLegacyID(n)
	if !rec.Known() {
		// Another release of Lifeboat is at work on this node (a rollout): leave it alone,
		// and keep the notice (it comes back) for a binary that knows the record.
		return fmt.Errorf("notice %s: node %s: %w (version %d, this binary knows up to %d)", n.ID, nodeName, ErrNewerRecord, rec.Version, record.Version)
	}
	if record.EpisodeEnded(node, rec) != "" {
		// Close it first: Lifeboat's taints and labels of the old episode go (an operator who
		// uncordoned the node took it back), and this notice then opens a new one.
		if _, fresh, err := h.endEpisode(ctx, node, record.EpisodeEnded); err != nil {
			return fmt.Errorf("notice %s: end the node's previous episode: %w", n.ID, err)
		} else if fresh != nil {
			node = fresh
		}
		rec, _ = record.Read(node)
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
		h.events.Notice(events.NodeOf(node), n)
		if n.CordonOnly != "" {
			log.Warn("notice cordons the node but schedules no drain", "why", n.CordonOnly)
			h.events.DrainNotScheduled(events.NodeOf(node), n.ID, n.CordonOnly)
		}
	}
	var (
		ended          string // why the previous episode ended, found by the write
		notify         bool   // the write claimed the cordon outcome
		wasSchedulable bool   // on the node the successful write started from
	)
	res, err := h.cordonWriter.Apply(ctx, nodeName, node, "cordon for notice "+n.ID, h.intakeEdits(n, plan, &ended, &notify, &wasSchedulable)...)
	if err != nil {
		h.metrics.Action(metrics.ActionCordon, metrics.ResultError)
		h.events.CordonFailed(events.NodeOf(node), n.ID, err)
		return err
	}
	// Later notices for the node only add themselves to its record: one cordon counted.
	if res.Changed && wasSchedulable && res.Node.Spec.Unschedulable {
		h.metrics.Action(metrics.ActionCordon, dryRunOr(h.cfg.DryRun, metrics.ResultOK))
		h.events.Cordoned(events.NodeOf(res.Node), n.ID)
	} else {
		h.metrics.Action(metrics.ActionCordon, metrics.ResultSkipped)
	}
	log.Info("node cordoned", "changed", res.Changed, "drain", plan.Drain, "deadline", n.Deadline, "dryRun", h.cfg.DryRun)
	if ended != "" {
		log.Info("the node's previous interruption episode ended just before this write; this notice opened a new one", "why", ended)
	}
	if !plan.Drain {
		if notify {
			h.notify(ctx, n, res.Node, "cordoned", nil)
		}
		// In DRY_RUN too: nothing is written, so only the process can remember that the
		// notice was shown, and its copies (the message comes back every few minutes) must
		// not repeat the Events and the webhook.
		h.rememberDone(n)
		return nil
	}
	if start := h.drainStart(n); time.Until(start) > 0 {
		log.Info("drain scheduled", "start", start, "deadline", n.Deadline)
	} else if h.TightenDrain(nodeName, drainDeadline(n)) {
		// A more urgent notice (a Spot interruption during a rebalance or lifecycle-hook
		// drain) brings the running drain's deadline forward rather than waiting behind it.
		log.Info("the running drain now ends by this notice's earlier deadline", "deadline", n.Deadline)
	}
	if h.cfg.DryRun {
		return h.dryRunEpisode(ctx, res.Node, n, log)
	}
	return nil
}

// readForIntake returns the node to decide on: the cached copy, unless it says there is
// nothing to do (confirmed on a fresh read, since the copy may be stale).
func (h *Handler) readForIntake(ctx context.Context, n notice.Notice, nodeName string, cached *corev1.Node) (*corev1.Node, error) {
	if cached != nil && !h.nothingToDo(n, cached) {
		return cached, nil
	}
	fresh, err := h.cordonClient.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("notice %s: read node %s: %w", n.ID, nodeName, err)
	}
	return fresh, nil
}

// intakeEdits is the one write that takes a notice: it starts by ending an episode that is
// over, on the node being written (so a retry after a conflict decides afresh), then taints,
// labels and cordons, and records the notice and its intent. Without a drain the episode's
// work ends with this write, which then claims the cordon outcome's report.
func (h *Handler) intakeEdits(n notice.Notice, plan Plan, ended *string, notify, wasSchedulable *bool) []nodes.Edit {
	edits := []nodes.Edit{record.OpenEpisode(ended)}
	if !plan.Drain {
		edits = append(edits, claimOutcome(record.OutcomeCordoned, notify))
	}
	if plan.TaintKey != "" {
		edits = append(edits, nodes.AddTaint(plan.TaintKey, nodes.LabelValue(n.ID), corev1.TaintEffect(h.cfg.TaintEffect)))
	}
	if plan.ExcludeLB {
		edits = append(edits, nodes.SetLabel(nodes.LabelExcludeFromLoadBalancers, "true"))
	}
	if plan.Cordon {
		edits = append(edits, func(nd *corev1.Node) { *wasSchedulable = !nd.Spec.Unschedulable }, nodes.Cordon())
	}
	phase := record.PhaseCordoned
	if plan.Drain {
		phase = record.PhaseDraining
	}
	edits = append(edits, record.PhaseEdit(n.ID, phase, n.Deadline), record.IntentEdit(n, h.origin, time.Duration(h.cfg.NodeTerminationGracePeriod)*time.Second))
	if plan.Drain && !h.cfg.DryRun && time.Until(h.drainStart(n)) <= 0 {
		// The drain follows at once: claim it in this write rather than in one more.
		edits = append(edits, h.intakeClaimEdit(n))
	}
	if n.Kind == notice.ScheduledMaintenance && notice.RebootCodes[n.Action] {
		// Uncordon once the node has been through the reboot (see ReleaseAfterReboot).
		now := time.Now().UTC().Truncate(time.Second)
		edits = append(edits, nodes.SetLabel(nodes.LabelUncordonAfterReboot, "true"), record.Edit(func(r *record.Record) {
			if r.RebootAfter.IsZero() {
				r.RebootAfter = now
			}
		}))
	}
	return edits
}

// episodeEndedOn reports whether a cached copy of the node shows its episode over, so a
// notice remembered as done in this process is looked at again.
func episodeEndedOn(node *corev1.Node) bool {
	if node == nil {
		return false
	}
	rec, _ := record.Read(node)
	return record.EpisodeEnded(node, rec) != ""
}

// rememberDone notes in this process that the notice needs no more work, so its copies cost
// no node read. A cordon-only notice is not remembered: a later copy of it whose start can
// be read (the same id) must still schedule its drain.
func (h *Handler) rememberDone(n notice.Notice) {
	if n.CordonOnly == "" {
		h.done.add(n.ID)
	}
}

// nothingToDo reports whether the node's record says the notice needs no work: a released
// notice, one already handled, or an end-of-event notice with nothing of Lifeboat's to undo.
func (h *Handler) nothingToDo(n notice.Notice, node *corev1.Node) bool {
	rec, _ := record.Read(node)
	if record.EpisodeEnded(node, rec) != "" {
		return false
	}
	if n.Released {
		return !rec.Has(n.ID) || slices.Contains(rec.Released, n.ID)
	}
	plan := planFor(n, h.cfg)
	return slices.Contains(rec.Released, n.ID) ||
		rec.Done(n.ID, plan.Drain)
}

// release undoes a notice whose scheduled event was canceled or completed. The node is
// uncordoned, and the interruption taints and labels removed, only when every notice that
// acted on it has been released, and only for what Lifeboat did itself. The decision is made
// inside the edit, so a retry after a conflict decides again on the fresh node (another
// notice may have cordoned it meanwhile).
func (h *Handler) release(ctx context.Context, n notice.Notice, node *corev1.Node, rec record.Record, log *slog.Logger) error {
	if !rec.Has(n.ID) || slices.Contains(rec.Released, n.ID) {
		log.Debug("event ended; nothing of Lifeboat's to undo")
		return nil
	}
	var uncordoned bool
	release := func(nd *corev1.Node) {
		uncordoned = h.releaseEdit(nd, func(r *record.Record) bool {
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
		h.metrics.Action(metrics.ActionUncordon, metrics.ResultError)
		return err
	}
	if uncordoned {
		h.metrics.Action(metrics.ActionUncordon, dryRunOr(h.cfg.DryRun, metrics.ResultOK))
		h.events.Uncordoned(events.NodeOf(node), "the scheduled event "+n.ID+" was canceled or completed")
	}
	log.Info("scheduled event ended; released the notice", "uncordoned", uncordoned)
	return nil
}

// releaseEdit applies mark to the node's record and, when every notice is then released,
// takes back Lifeboat's changes and resets the phase, so a later notice is handled afresh.
// It reports whether the node was released.
func (h *Handler) releaseEdit(n *corev1.Node, mark func(*record.Record) bool) bool {
	r, _ := record.Read(n)
	if !mark(&r) {
		return false
	}
	all := r.AllReleased()
	if all {
		for _, e := range h.undo(r) {
			e(n)
		}
		r.Phase, r.Deadline, r.RebootAfter, r.Notified, r.Reported, r.Heartbeat, r.Intents, r.Owner = record.PhaseNone, time.Time{}, time.Time{}, false, nil, nil, nil, nil
	}
	record.Write(n, r)
	return all
}

// undo lists the edits that take back Lifeboat's own changes for the record's notices.
func (h *Handler) undo(rec record.Record) []nodes.Edit {
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
	if rec, err := record.Read(node); err != nil || rec.RebootAfter.IsZero() || !bootTime.After(rec.RebootAfter) {
		return false, nil
	}
	var released bool
	edit := func(nd *corev1.Node) {
		released = h.releaseEdit(nd, func(r *record.Record) bool {
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
