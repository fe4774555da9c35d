package interruption

import (
	"context"
	"log/slog"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/events"
	"lifeboat.dev/lifeboat/internal/handback"
	"lifeboat.dev/lifeboat/internal/notice"
)

// handbackMargin is kept between the end of the waits and the episode's deadline, so that
// the lifecycle action is completed while it is still open.
const handbackMargin = 5 * time.Second

// waitDone says, for the Event, what a wait that ended in time waited for.
var waitDone = map[string]string{
	"volumes": "volumes detached",
	"targets": "load-balancer targets drained",
}

// handBack runs the waits between a drained node and the hand-back of its instance (its
// lifecycle action completed), by the deadline. Each wait that took time, was cut short by
// the deadline or could not be checked is logged, counted and, when it matters to an
// operator, recorded as an Event. The instance is handed back in any case: the waits make it
// safer, they never keep it past its deadline.
func (h *Handler) handBack(ctx context.Context, node *corev1.Node, pending []notice.Notice, deadline time.Time, done drained, log *slog.Logger) {
	if len(h.Handback) == 0 || h.cfg.DryRun {
		return
	}
	subject := handback.Subject{Node: node.Name, InstanceID: instanceOf(node, pending), Claims: done.claims, PodIPs: done.podIPs}
	results := handback.Run(ctx, deadline.Add(-handbackMargin), subject, h.Handback...)
	for _, r := range results {
		h.Metrics.HandbackWait(r.Wait, string(r.Outcome), r.Took)
		what := waitDone[r.Wait]
		if what == "" {
			what = r.Wait
		}
		switch r.Outcome {
		case handback.Released:
			if r.Took >= time.Second {
				log.Info("handback wait over: "+what, "wait", r.Wait, "seconds", r.Took.Seconds())
				h.Events.HandbackWaited(events.NodeOf(node), what, r.Took)
			} else {
				log.Debug("handback wait over: nothing held", "wait", r.Wait)
			}
		case handback.Cut:
			if ctx.Err() != nil && time.Until(deadline) > handbackMargin {
				return // stopping (shutdown, or the claim was lost): not the deadline's doing
			}
			log.Warn("handback wait cut by the deadline: handing the instance back anyway", "wait", r.Wait, "seconds", r.Took.Seconds(),
				"held", strings.Join(r.Held, ", "), "err", r.Err)
			h.Events.HandbackWaitCut(events.NodeOf(node), what, r.Took, r.Held)
		case handback.Skipped:
			log.Debug("handback wait skipped", "wait", r.Wait, "err", r.Err)
		}
	}
}

// instanceOf is the node's EC2 instance id: from its notices, or else its provider id.
func instanceOf(node *corev1.Node, pending []notice.Notice) string {
	for _, n := range pending {
		if n.InstanceID != "" {
			return n.InstanceID
		}
	}
	id := node.Spec.ProviderID
	return id[strings.LastIndex(id, "/")+1:]
}
