// SPDX-License-Identifier: Apache-2.0

package episode

import (
	"context"
	"log/slog"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/events"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/record"
)

// ends close what an episode opened: the whole episode once it is over (the instance booted
// again, or an operator took the node back), or one notice whose scheduled event was canceled
// or completed. Only Lifeboat's own cordon, taints and labels are taken back, and only when
// no notice of the episode still needs them.
type ends struct {
	cfg     *config.Config
	writer  *nodes.Writer
	handled *handledNotices
	events  *events.Recorder
	metrics *metrics.Metrics
	log     *slog.Logger
	// conditions is told when an episode is over.
	conditions *conditions
}

// booted closes the node's episode if the instance has booted again since it
// opened (a Spot stop or hibernation, a scheduled stop or reboot, started again): the instance
// runs, so Lifeboat takes back its own cordon, taints and labels; a new interruption comes as
// a new notice. It reports whether it ended the episode.
func (e *ends) booted(ctx context.Context, node *corev1.Node) (bool, error) {
	booted := func(n *corev1.Node, r record.Record) string {
		if record.BootedAgain(n, r) {
			return record.EpisodeEnded(n, r)
		}
		return ""
	}
	why, _, err := e.end(ctx, node, booted)
	return why != "", err
}

// end closes the node's episode when ended says it is over, deciding again on the node
// being written: Lifeboat's own cordon, taints and labels of the episode are taken back (an
// operator who uncordoned the node took it back; an instance that booted again runs), and the
// record keeps only what outlives episodes (see nextEpisode). It returns why the episode
// ended ("" when it had not) and the node as written.
func (e *ends) end(ctx context.Context, node *corev1.Node, ended func(*corev1.Node, record.Record) string) (string, *corev1.Node, error) {
	if rec, err := record.Read(node); err != nil || !rec.Known() || ended(node, rec) == "" {
		return "", nil, nil
	}
	var (
		why      string
		previous []string
	)
	edit := func(nd *corev1.Node) {
		r, _ := record.Read(nd)
		if !r.Known() {
			why = ""
			return
		}
		if why = ended(nd, r); why == "" {
			return
		}
		previous = r.Notices
		for _, e := range e.undo(r) {
			e(nd)
		}
		record.Write(nd, r.NextEpisode(record.BootedAgain(nd, r)))
	}
	res, err := e.writer.Apply(ctx, node.Name, node, "end the node's interruption episode", edit)
	if err != nil {
		return "", nil, err
	}
	if why != "" {
		e.conditions.set(res.Node, ConditionEpisodeEnded, "The interruption episode is over: "+why)
		e.handled.forget(previous...)
		e.log.Info("the node's interruption episode is over: Lifeboat's cordon and taints taken back", "node", node.Name, "why", why, "notices", previous)
		if !e.cfg.DryRun {
			e.metrics.Action(metrics.ActionUncordon, metrics.ResultOK)
			e.events.Uncordoned(events.NodeOf(node), "the interruption episode is over: "+why)
		}
	}
	return why, res.Node, nil
}

// release undoes a notice whose scheduled event was canceled or completed. The node is
// uncordoned, and the interruption taints and labels removed, only when every notice that
// acted on it has been released, and only for what Lifeboat did itself. The decision is made
// inside the edit, so a retry after a conflict decides again on the fresh node (another
// notice may have cordoned it meanwhile).
func (e *ends) release(ctx context.Context, n notice.Notice, node *corev1.Node, rec record.Record, log *slog.Logger) error {
	if !rec.Has(n.ID) || slices.Contains(rec.Released, n.ID) {
		log.Debug("event ended; nothing of Lifeboat's to undo")
		return nil
	}
	var uncordoned bool
	release := func(nd *corev1.Node) {
		uncordoned = e.releaseEdit(nd, func(r *record.Record) bool {
			if !r.Has(n.ID) {
				return false
			}
			if !slices.Contains(r.Released, n.ID) {
				r.Released = append(r.Released, n.ID)
			}
			return true
		})
	}
	if _, err := e.writer.Apply(ctx, node.Name, node, "release notice "+n.ID, release); err != nil {
		e.metrics.Action(metrics.ActionUncordon, metrics.ResultError)
		return err
	}
	if uncordoned {
		e.conditions.set(node, ConditionEpisodeEnded, "The interruption episode is over: every notice was released (its event canceled or completed)")
		e.metrics.Action(metrics.ActionUncordon, dryRunOr(e.cfg.DryRun, metrics.ResultOK))
		e.events.Uncordoned(events.NodeOf(node), "the scheduled event "+n.ID+" was canceled or completed")
	}
	log.Info("scheduled event ended; released the notice", "uncordoned", uncordoned)
	return nil
}

// releaseEdit applies mark to the node's record and, when every notice is then released,
// takes back Lifeboat's changes and resets the phase, so a later notice is handled afresh.
// It reports whether the node was released.
func (e *ends) releaseEdit(n *corev1.Node, mark func(*record.Record) bool) bool {
	r, _ := record.Read(n)
	if !mark(&r) {
		return false
	}
	all := r.AllReleased()
	if all {
		for _, e := range e.undo(r) {
			e(n)
		}
		r.Phase, r.Deadline, r.RebootAfter, r.Notified, r.Reported, r.Heartbeat, r.Intents, r.Owner = record.PhaseNone, time.Time{}, time.Time{}, false, nil, nil, nil, nil
	}
	record.Write(n, r)
	return all
}

// undo lists the edits that take back Lifeboat's own changes for the record's notices.
func (e *ends) undo(rec record.Record) []nodes.Edit {
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
	if e.cfg.ExcludeFromLoadBalancers {
		edits = append(edits, nodes.RemoveLabel(nodes.LabelExcludeFromLoadBalancers))
	}
	return append(edits, nodes.RemoveLabel(nodes.LabelUncordonAfterReboot), nodes.RemoveLabel(nodes.LabelPhase))
}

var interruptionTaints = []string{nodes.TaintSpotInterruption, nodes.TaintScheduledMaintenance, nodes.TaintASGLifecycle, nodes.TaintRebalance}

// afterReboot uncordons a node that has been through its scheduled reboot: it booted
// after the record's RebootAfter. It reports whether it released the node. The record keeps
// its notices, all released, so a notice metadata still reports after the reboot is not
// acted on again.
func (e *ends) afterReboot(ctx context.Context, node *corev1.Node, bootTime time.Time) (bool, error) {
	if rec, err := record.Read(node); err != nil || rec.RebootAfter.IsZero() || !bootTime.After(rec.RebootAfter) {
		return false, nil
	}
	var released bool
	edit := func(nd *corev1.Node) {
		released = e.releaseEdit(nd, func(r *record.Record) bool {
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
	if _, err := e.writer.Apply(ctx, node.Name, node, "uncordon after the scheduled reboot", edit); err != nil {
		return false, err
	}
	if released {
		e.conditions.set(node, ConditionEpisodeEnded, "The interruption episode is over: the node has been through its scheduled reboot")
		e.log.Info("node rebooted after its scheduled reboot; uncordoned", "node", node.Name, "bootTime", bootTime)
	}
	return released, nil
}
