// SPDX-License-Identifier: Apache-2.0

package lifecycle

import (
	"context"
	"errors"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/events"
	"lifeboat.dev/lifeboat/internal/instancegate"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/notice"
)

// Completed is a lifecycle action a completer completed, for the node's Event.
type Completed struct {
	Hook   string
	Result string // CONTINUE or ABANDON
}

// ErrActionOver is what abandoning returns (wrapped) for an action already completed or timed
// out: nothing is left to abandon.
var ErrActionOver = errors.New("the lifecycle action is over")

// QueueNotices completes what a drained node's notice from the controller's sources asks of
// AWS: the termination hook's action the notice carries (with CONTINUE), or, for an impaired
// instance with SET_IMPAIRED_INSTANCE_UNHEALTHY, the instance marked Unhealthy so that its
// group replaces it.
type QueueNotices struct {
	Completer Completer
	// MarkUnhealthy is SET_IMPAIRED_INSTANCE_UNHEALTHY, off in DRY_RUN.
	MarkUnhealthy bool
	// Repairs is what a repaired node's instance is given (NODE_REPAIR_ACTION).
	Repairs Repairs
}

// Complete completes the notice's action once its node (nodeName) is drained. A refusal of
// the instance gate is returned as the *instancegate.Refusal it is; another error is
// transient, to retry.
func (q QueueNotices) Complete(ctx context.Context, nodeName string, n notice.Notice) (*Completed, error) {
	switch n.Kind.Ends() {
	case notice.EndsRepaired:
		return nil, q.Completer.repair(ctx, nodeName, n, q.Repairs)
	case notice.EndsMarkedUnhealthy:
		if !q.MarkUnhealthy {
			return nil, nil
		}
		return nil, q.Completer.markUnhealthy(ctx, nodeName, n)
	case notice.EndsDrained:
		return nil, nil
	}
	lc := n.Lifecycle
	if lc == nil {
		return nil, nil
	}
	done, err := q.Completer.Complete(ctx, nodeName, cloud.LifecycleAction{Group: lc.Group, Hook: lc.Hook, InstanceID: n.InstanceID}, n.ID)
	if !done {
		return nil, err
	}
	return &Completed{Hook: lc.Hook, Result: cloud.ResultContinue}, nil
}

// markUnhealthy marks an impaired instance Unhealthy in its Auto Scaling group once the gate
// has confirmed the instance and group. An instance in no group, or whose group cannot be
// learned for good, is left drained, and the log says so.
func (c Completer) markUnhealthy(ctx context.Context, nodeName string, n notice.Notice) error {
	log := c.Log.With("notice", n.ID, "node", nodeName)
	group, err := c.Gate.GroupOf(ctx, n.InstanceID)
	switch {
	case err != nil && cloud.IsPermanent(err):
		log.Error("cannot learn the impaired instance's Auto Scaling group, so it is not marked Unhealthy", "err", err)
		c.Metrics.Action(metrics.ActionMarkUnhealthy, metrics.ResultError)
		return nil
	case err != nil:
		return err
	case group == "":
		log.Info("the instance is in no Auto Scaling group: nothing replaces it, its node stays drained", "kind", n.Kind)
		c.Metrics.Action(metrics.ActionMarkUnhealthy, metrics.ResultSkipped)
		c.Events.RepairNoGroup(events.Node{Name: nodeName}, n.InstanceID, titleOf(n.Kind))
		return nil
	}
	if err := c.Gate.Check(ctx, instancegate.Request{Call: instancegate.CallSetInstanceHealth, Node: nodeName, InstanceID: n.InstanceID, Group: group}); err != nil {
		if _, refused := instancegate.IsRefusal(err); refused {
			c.Metrics.Action(metrics.ActionMarkUnhealthy, metrics.ResultRefused)
		}
		return err
	}
	err = c.AutoScaling.SetUnhealthy(ctx, n.InstanceID)
	c.Metrics.AWSCall("SetInstanceHealth", err, nil)
	switch {
	case err == nil:
		c.Metrics.Action(metrics.ActionMarkUnhealthy, metrics.ResultOK)
		log.Info("instance marked Unhealthy: its Auto Scaling group replaces it", "group", group, "kind", n.Kind)
		c.Events.RepairMarkedUnhealthy(events.Node{Name: nodeName}, n.InstanceID, group, titleOf(n.Kind))
	case cloud.IsPermanent(err):
		c.Metrics.Action(metrics.ActionMarkUnhealthy, metrics.ResultError)
		log.Error("cannot mark the impaired instance Unhealthy; its node stays drained", "err", err)
	default:
		return err
	}
	return nil
}
