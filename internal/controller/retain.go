package controller

import (
	"context"
	"errors"
	"fmt"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/instancegate"
	"lifeboat.dev/lifeboat/internal/interruption"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/notice"
)

// retainer makes the Auto Scaling calls of ABANDON_LIFECYCLE_ACTION_ON_INCOMPLETE_DRAIN for
// the handler: it reads each group's instance lifecycle policy (once per group within
// cloud.RetentionTTL, saying in the log which behaviour applies), and abandons actions and
// terminates retained instances only after the instance gate has confirmed the instance is the
// node's own and in the group.
type retainer struct {
	c      *Controller
	api    cloud.Retention
	groups *cloud.RetentionCache
}

var _ interruption.Retainer = (*retainer)(nil)

// retention is the handler's retainer when the Auto Scaling client can make its calls, else nil.
// The handler abandons new hooks only with ABANDON_LIFECYCLE_ACTION_ON_INCOMPLETE_DRAIN; a
// node retained before the setting was turned off is still drained and its instance
// terminated.
func (c *Controller) retention(asg cloud.AutoScaling) interruption.Retainer {
	api, ok := asg.(cloud.Retention)
	if !ok {
		if c.cfg.AbandonOnIncompleteDrain {
			c.log.Warn("ABANDON_LIFECYCLE_ACTION_ON_INCOMPLETE_DRAIN is set but the Auto Scaling client cannot abandon actions: termination hooks are completed with CONTINUE")
		}
		return nil
	}
	groups := cloud.NewRetentionCache(api)
	groups.Observe = func(err error) { c.metrics.AWSCall("DescribeAutoScalingGroups", err, nil) }
	return &retainer{c: c, api: api, groups: groups}
}

func (r *retainer) Retains(ctx context.Context, group string) (bool, error) {
	retains, first, err := r.groups.RetainsOnAbandon(ctx, group)
	log := r.c.log.With("group", group)
	switch {
	case err != nil:
		log.Warn("cannot read the group's instance lifecycle policy: a termination hook whose drain cannot finish in time is completed with CONTINUE", "err", err)
	case !first:
	case retains:
		log.Info("the group retains abandoned instances (TerminateHookAbandon: retain): a termination hook whose drain cannot finish in time is completed with ABANDON, and Lifeboat terminates the instance once drained",
			"retainedDrainTimeout", r.c.cfg.RetainedDrainTimeout.String())
	default:
		log.Info("the group does not retain abandoned instances (no instance lifecycle policy with TerminateHookAbandon: retain): a termination hook whose drain cannot finish in time is completed with CONTINUE, since ABANDON would terminate the instance at once")
	}
	return retains, err
}

func (r *retainer) Abandon(ctx context.Context, nodeName string, n notice.Notice) error {
	lc := n.Lifecycle
	if lc == nil {
		return fmt.Errorf("notice %s has no lifecycle action", n.ID)
	}
	c := r.c
	if err := c.gate.Check(ctx, instancegate.Request{Call: instancegate.CallCompleteLifecycleAction, Node: nodeName, InstanceID: n.InstanceID, Group: lc.Group}); err != nil {
		if _, refused := instancegate.IsRefusal(err); refused {
			c.metrics.Action(metrics.ActionLifecycleComplete, metrics.ResultRefused)
		}
		return err
	}
	err := r.api.AbandonLifecycleAction(ctx, cloud.LifecycleAction{Group: lc.Group, Hook: lc.Hook, InstanceID: n.InstanceID})
	c.metrics.AWSCall("CompleteLifecycleAction", err, cloud.ErrNoActiveAction)
	c.metrics.ActionErr(metrics.ActionLifecycleComplete, err)
	if errors.Is(err, cloud.ErrNoActiveAction) {
		return fmt.Errorf("%w: %w", interruption.ErrActionOver, err)
	}
	return err
}

func (r *retainer) Terminate(ctx context.Context, nodeName, instanceID, group string) error {
	c := r.c
	if err := c.gate.Check(ctx, instancegate.Request{Call: instancegate.CallTerminateInstance, Node: nodeName, InstanceID: instanceID, Group: group}); err != nil {
		return err
	}
	err := r.api.TerminateRetainedInstance(ctx, group, instanceID)
	c.metrics.AWSCall("TerminateInstanceInAutoScalingGroup", err, nil)
	return err
}
