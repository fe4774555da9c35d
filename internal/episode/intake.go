// SPDX-License-Identifier: Apache-2.0

package episode

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/events"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/record"
)

// intake is the first phase of an episode: it takes a notice for its node in one write (the
// cordon and the notice's intent), or releases one whose event ended.
type intake struct {
	cfg    *config.Config
	origin string
	log    *slog.Logger
	// cordonClient and cordonWriter serve the urgent part of a notice (Options.CordonClient).
	cordonClient kubernetes.Interface
	cordonWriter *nodes.Writer
	handled      *handledNotices
	metrics      *metrics.Metrics
	events       *events.Recorder
	claims       *claims
	drains       *drains
	ends         *ends
	reports      *reports
	invalid      *invalidRecords
	newer        *newerRecords
	refused      *refusedClaims
	conditions   *conditions
}

// take takes one notice for the node. In one conflict-safe write, computed from the node
// just read, it ends the node's episode if that is over, opens or joins the node's episode,
// taints, labels and cordons the node as the notice's plan says, and records the notice's
// intent: from then on the work is the reconciler's (Reconcile), and whoever brought the
// notice may forget it (delete its queue message). A release undoes instead (see release).
// A drain already running for the node in this process is brought forward to the notice's
// deadline. cached, when not nil, is a recent copy of the node (an informer's) used instead
// of a first read; a decision to do nothing is confirmed on a fresh read.
//
// It returns the node as written when the notice's drain is due at once (in DRY_RUN, nothing
// is left for a reconciler: Intake then shows at once what the episode would do).
func (in *intake) take(ctx context.Context, n notice.Notice, nodeName string, cached *corev1.Node) (toDrain *corev1.Node, _ error) {
	log := in.log.With("notice", n.ID, "kind", n.Kind, "node", nodeName, "instance", n.InstanceID)
	if !n.Released && in.handled.has(n.ID) && !episodeEndedOn(cached) {
		log.Debug("notice already handled")
		return nil, nil
	}
	node, rec, n, err := in.current(ctx, n, nodeName, cached)
	if err != nil {
		return nil, err
	}
	if n.Released {
		return nil, in.ends.release(ctx, n, node, rec, log)
	}
	if slices.Contains(rec.Released, n.ID) {
		// Its event ended (or the node already rebooted through it); IMDS may go on
		// reporting it for a while, and acting again would cordon the node in a loop.
		log.Debug("notice already released")
		in.handled.add(n.ID)
		return nil, nil
	}
	plan := planFor(n, in.cfg)
	if rec.WorkDone(n.ID, plan.Drain) {
		log.Info("notice already handled", "phase", rec.Phase)
		in.rememberHandled(n)
		return nil, nil
	}
	if !rec.Has(n.ID) {
		in.events.Notice(events.NodeOf(node), n)
		if n.CordonOnly != "" {
			log.Warn("notice cordons the node but schedules no drain", "why", n.CordonOnly)
			in.events.DrainNotScheduled(events.NodeOf(node), n.ID, n.CordonOnly)
		}
	}
	written, notify, err := in.cordon(ctx, n, plan, node, log)
	if err != nil {
		return nil, err
	}
	if !rec.Has(n.ID) && !in.cfg.DryRun {
		in.metrics.InterruptionLatency(n.Kind, metrics.StageCordoned, n.Announced)
	}
	if !plan.Drain {
		if notify {
			in.reports.notify(ctx, n, written, "cordoned", nil)
		}
		// In DRY_RUN too: nothing is written, so only the process can remember that the
		// notice was shown, and its copies (the message comes back every few minutes) must
		// not repeat the Events and the webhook.
		in.rememberHandled(n)
		return nil, nil
	}
	if start := drainStart(in.cfg, n); time.Until(start) > 0 {
		log.Info("drain scheduled", "start", start, "deadline", n.Deadline)
	} else if in.drains.tighten(nodeName, drainDeadline(n)) {
		// A more urgent notice (a Spot interruption during a rebalance or lifecycle-hook
		// drain) brings the running drain's deadline forward rather than waiting behind it.
		log.Info("the running drain now ends by this notice's earlier deadline", "deadline", n.Deadline)
	}
	return written, nil
}

// current reads the node the notice is for and its record, and checks that the node is the
// notice's instance's and that this binary knows the record. An episode that is over is
// closed first, so that the notice opens a new one. n comes back with the id the record
// knows it by (see record.MatchLegacyID).
func (in *intake) current(ctx context.Context, n notice.Notice, nodeName string, cached *corev1.Node) (*corev1.Node, record.Record, notice.Notice, error) {
	node, err := in.read(ctx, n, nodeName, cached)
	if err != nil {
		return nil, record.Record{}, n, err
	}
	if id := InstanceIDOf(node); id != "" && id != n.InstanceID {
		in.refused.report(node, n.InstanceID, n.Source, "notice "+n.ID+" is not acted on here")
		return nil, record.Record{}, n, fmt.Errorf("notice %s: node %s has providerID %q: %w", n.ID, nodeName, node.Spec.ProviderID, ErrNotOurs)
	}
	rec, err := record.Read(node)
	if err != nil {
		// This notice starts a fresh record in its place.
		in.invalid.report(node, err)
	}
	n = rec.MatchLegacyID(n)
	if n.Announced.IsZero() {
		n.Announced = time.Now() // a notice that states no time of its own: when Lifeboat first saw it
	}
	if !rec.Known() {
		var (
			why   string
			fresh *corev1.Node
		)
		if rec.LeftByNewer(node, time.Now()) != "" {
			if why, fresh, err = in.newer.takeBack(ctx, node); err != nil {
				return nil, rec, n, fmt.Errorf("notice %s: take node %s back from a newer Lifeboat's record: %w", n.ID, nodeName, err)
			}
		}
		if why == "" {
			// Another release of Lifeboat is at work on this node (a rollout): leave it alone,
			// and keep the notice (it comes back) for a binary that knows the record.
			return nil, rec, n, fmt.Errorf("notice %s: node %s: %w (version %d, this binary knows up to %d)", n.ID, nodeName, ErrNewerRecord, rec.Version, record.Version)
		}
		node = fresh // left by the newer Lifeboat: this notice opens an episode of this binary's
		rec, _ = record.Read(node)
	}
	if record.EpisodeEnded(node, rec) != "" {
		// Close it first: Lifeboat's taints and labels of the old episode go (an operator who
		// uncordoned the node took it back), and this notice then opens a new one.
		_, fresh, err := in.ends.end(ctx, node, record.EpisodeEnded)
		if err != nil {
			return nil, rec, n, fmt.Errorf("notice %s: end the node's previous episode: %w", n.ID, err)
		}
		if fresh != nil {
			node = fresh
		}
		rec, _ = record.Read(node)
	}
	return node, rec, n, nil
}

// cordon is the intake's one write (see edits), counted and told once. It returns the node
// as written and whether the write claimed the cordon outcome's report.
func (in *intake) cordon(ctx context.Context, n notice.Notice, plan Plan, node *corev1.Node, log *slog.Logger) (*corev1.Node, bool, error) {
	var (
		ended          string // why the previous episode ended, found by the write
		notify         bool   // the write claimed the cordon outcome
		wasSchedulable bool   // on the node the successful write started from
	)
	res, err := in.cordonWriter.Apply(ctx, node.Name, node, "cordon for notice "+n.ID, in.edits(n, plan, &ended, &notify, &wasSchedulable)...)
	if err != nil {
		in.metrics.Action(metrics.ActionCordon, metrics.ResultError)
		in.events.CordonFailed(events.NodeOf(node), n.ID, err)
		return nil, false, err
	}
	// Later notices for the node only add themselves to its record: one cordon counted.
	if res.Changed && wasSchedulable && res.Node.Spec.Unschedulable {
		in.metrics.Action(metrics.ActionCordon, dryRunOr(in.cfg.DryRun, metrics.ResultOK))
		in.events.Cordoned(events.NodeOf(res.Node), n.ID)
	} else {
		in.metrics.Action(metrics.ActionCordon, metrics.ResultSkipped)
	}
	log.Info("node cordoned", "changed", res.Changed, "drain", plan.Drain, "deadline", n.Deadline, "dryRun", in.cfg.DryRun)
	in.showCondition(n, plan, res.Node)
	if ended != "" {
		log.Info("the node's previous interruption episode ended just before this write; this notice opened a new one", "why", ended)
	}
	return res.Node, notify, nil
}

// showCondition states the node's condition after the notice's write: draining when its drain
// follows at once, else cordoned (and when, if ever, the drain starts). A cordon-only notice
// joining an episode drained already leaves the condition as it is.
func (in *intake) showCondition(n notice.Notice, plan Plan, node *corev1.Node) {
	if rec, _ := record.Read(node); !plan.Drain && rec.Phase >= record.PhaseDrained {
		return
	}
	what := fmt.Sprintf("notice %s (%s)", n.ID, n.Kind)
	start := drainStart(in.cfg, n)
	switch {
	case !plan.Drain && n.CordonOnly != "":
		in.conditions.set(node, ConditionCordoned, "Cordoned for "+what+"; no drain: "+n.CordonOnly)
	case !plan.Drain:
		in.conditions.set(node, ConditionCordoned, "Cordoned for "+what+"; no drain")
	case time.Until(start) > 0:
		in.conditions.set(node, ConditionCordoned, "Cordoned for "+what+"; the drain starts at "+start.UTC().Format(time.RFC3339))
	default:
		in.conditions.set(node, ConditionDraining, drainingMessage(n.ID, drainDeadline(n)))
	}
}

// drainingMessage is the condition's message while the drain for the notice runs.
func drainingMessage(id string, deadline time.Time) string {
	return "Draining for notice " + id + " by " + deadline.UTC().Format(time.RFC3339)
}

// read returns the node to decide on: the cached copy, unless it says there is
// nothing to do (confirmed on a fresh read, since the copy may be stale).
func (in *intake) read(ctx context.Context, n notice.Notice, nodeName string, cached *corev1.Node) (*corev1.Node, error) {
	if cached != nil && !in.nothingToDo(n, cached) {
		return cached, nil
	}
	fresh, err := in.cordonClient.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("notice %s: read node %s: %w", n.ID, nodeName, err)
	}
	return fresh, nil
}

// edits is the one write that takes a notice: it starts by ending an episode that is
// over, on the node being written (so a retry after a conflict decides afresh), then taints,
// labels and cordons, and records the notice and its intent. Without a drain the episode's
// work ends with this write, which then claims the cordon outcome's report.
func (in *intake) edits(n notice.Notice, plan Plan, ended *string, notify, wasSchedulable *bool) []nodes.Edit {
	edits := []nodes.Edit{record.OpenEpisode(ended)}
	if !plan.Drain {
		edits = append(edits, claimOutcome(record.OutcomeCordoned, notify))
	}
	if plan.TaintKey != "" {
		edits = append(edits, nodes.AddTaint(plan.TaintKey, nodes.LabelValue(n.ID), corev1.TaintEffect(in.cfg.TaintEffect)))
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
	edits = append(edits, record.PhaseEdit(n.ID, phase, n.Deadline), phaseLabel(in.cfg.NodeCondition),
		record.IntentEdit(n, in.origin, time.Duration(in.cfg.NodeTerminationGracePeriod)*time.Second))
	if plan.Drain && !in.cfg.DryRun && time.Until(drainStart(in.cfg, n)) <= 0 {
		// The drain follows at once: claim it in this write rather than in one more.
		edits = append(edits, in.claims.intakeEdit(n))
	}
	if n.Kind.Scheduled() && notice.RebootCodes[n.Action] {
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

// rememberHandled notes in this process that the notice needs no more work, so its copies cost
// no node read. A cordon-only notice is not remembered: a later copy of it whose start can
// be read (the same id) must still schedule its drain.
func (in *intake) rememberHandled(n notice.Notice) {
	if n.CordonOnly == "" {
		in.handled.add(n.ID)
	}
}

// nothingToDo reports whether the node's record says the notice needs no work: a released
// notice, one already handled, or an end-of-event notice with nothing of Lifeboat's to undo.
func (in *intake) nothingToDo(n notice.Notice, node *corev1.Node) bool {
	rec, _ := record.Read(node)
	if record.EpisodeEnded(node, rec) != "" {
		return false
	}
	if n.Released {
		return !rec.Has(n.ID) || slices.Contains(rec.Released, n.ID)
	}
	plan := planFor(n, in.cfg)
	return slices.Contains(rec.Released, n.ID) ||
		rec.WorkDone(n.ID, plan.Drain)
}
