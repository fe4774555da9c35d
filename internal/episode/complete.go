// SPDX-License-Identifier: Apache-2.0

package episode

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/events"
	"lifeboat.dev/lifeboat/internal/instancegate"
	"lifeboat.dev/lifeboat/internal/lifecycle"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/record"
)

// NoticeCompleter completes what a drained notice asks of AWS, its lifecycle action; each mode
// has its own (see internal/lifecycle). A refusal of the instance gate is returned as the
// *instancegate.Refusal it is: the notice is then finished without the call, and a Warning
// Event says why. Another error leaves the notice unfinished, to be retried.
type NoticeCompleter interface {
	Complete(ctx context.Context, nodeName string, n notice.Notice) (*lifecycle.Completed, error)
}

// completions finish the notices of a drained node: each one's lifecycle action completed,
// then recorded as finished in the write that also gives the drain's claim up; the first such
// write reports the episode's outcome.
type completions struct {
	completer NoticeCompleter
	cfg       *config.Config
	writer    *nodes.Writer
	handled   *handledNotices
	events    *events.Recorder
	metrics   *metrics.Metrics
	log       *slog.Logger
	claims    *claims
	reports   *reports
}

// finish runs the completion hook for a drained node and records the notice as finished; the
// write that first records the drain reports it (Event, webhook). hint, when not nil, is a
// recent copy of the node; done is this process's drain, if it ran one. It returns the node
// as written.
func (c *completions) finish(ctx context.Context, n notice.Notice, nodeName string, hint *corev1.Node, done *drainOutcome) (*corev1.Node, error) {
	var (
		completed *lifecycle.Completed
		refused   *instancegate.Refusal
	)
	if c.completer != nil && !c.cfg.DryRun && !slices.Contains(done.abandoned, n.ID) {
		var err error
		if completed, err = c.completer.Complete(ctx, nodeName, n); err != nil {
			var ok bool
			if refused, ok = instancegate.IsRefusal(err); !ok {
				return nil, fmt.Errorf("notice %s: after the drain: %w", n.ID, err)
			}
			// Final: retrying cannot make the record's instance the node's. The notice is
			// finished without its call.
			c.log.Error("AWS call refused: the node's record names an instance or group that is not the node's own",
				"notice", n.ID, "node", nodeName, "call", refused.Call, "instance", refused.InstanceID,
				"nodeInstance", refused.NodeInstance, "group", refused.Group, "why", refused.Reason)
		}
	}
	wouldComplete := c.completer != nil && c.cfg.DryRun && n.Lifecycle != nil && !slices.Contains(done.abandoned, n.ID)
	if wouldComplete {
		c.log.Info("dry run: would complete the lifecycle action (CONTINUE)", "notice", n.ID, "node", nodeName,
			"instance", n.InstanceID, "group", n.Lifecycle.Group, "hook", n.Lifecycle.Hook)
		c.metrics.Action(metrics.ActionLifecycleComplete, metrics.ResultDryRun)
	}
	var notify bool
	edits := []nodes.Edit{claimOutcome(record.OutcomeDrained, &notify), record.PhaseEdit(n.ID, record.PhaseDrained, time.Time{}),
		phaseLabel(c.cfg.NodeCondition), c.claims.disownEdit()}
	if done.ran {
		edits = append(edits, record.Edit(func(r *record.Record) { r.Held, r.Detach = done.held, nil }))
	}
	if c.cfg.EnableOutOfServiceTaint {
		edits = append(edits, nodes.AddTaint(nodes.TaintOutOfService, "nodeshutdown", corev1.TaintEffectNoExecute))
	}
	res, err := c.writer.Apply(ctx, nodeName, hint, "record drain of notice "+n.ID, edits...)
	if err != nil {
		return nil, err
	}
	c.handled.add(n.ID) // in DRY_RUN too, so a dry run shows each notice once (see Intake)
	// The node's Events in the order things happened: drained, the hand-back's waits, the
	// lifecycle action completed.
	if notify {
		c.events.Drained(events.NodeOf(res.Node), n.ID, len(done.evicted), done.took)
	}
	done.tell()
	if completed != nil {
		c.events.LifecycleCompleted(events.NodeOf(res.Node), completed.Hook, n.InstanceID, completed.Result)
	}
	if wouldComplete { // worded as what a dry run would have done
		c.events.LifecycleCompleted(events.NodeOf(res.Node), n.Lifecycle.Hook, n.InstanceID, "CONTINUE")
	}
	if refused != nil {
		c.events.InstanceCallRefused(events.NodeOf(res.Node), refused.Error())
	}
	if notify {
		c.reports.notify(ctx, n, res.Node, "drained", done.evicted)
	}
	return res.Node, nil
}

// finishAll finishes each pending notice of the drained node (done: this process's drain, if
// it ran one), and returns the node as the last write left it (trimmed as a drain keeps it),
// for the condition's write that follows. The node as last read saves a read; if it changed
// since, each write conflicts and is recomputed from a fresh read.
func (c *completions) finishAll(ctx context.Context, node *corev1.Node, pending []notice.Notice, done *drainOutcome) (*corev1.Node, error) {
	hint := node
	for _, n := range pending {
		written, err := c.finish(ctx, n, node.Name, hint, done)
		if err != nil {
			done.tell()
			return nil, err
		}
		hint = written
	}
	return keptByDrain(hint), nil
}
