// SPDX-License-Identifier: Apache-2.0

package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/instancegate"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/notice"
)

// Retainer makes the Auto Scaling calls of ABANDON_LIFECYCLE_ACTION_ON_INCOMPLETE_DRAIN: it
// reads each group's instance lifecycle policy (once per group within cloud.RetentionTTL,
// saying in the log which behaviour applies), and abandons actions and terminates retained
// instances only after the instance gate has confirmed that the instance is the node's own and
// in the group.
type Retainer struct {
	api     cloud.Retention
	groups  *cloud.RetentionCache
	gate    *instancegate.Gate
	metrics *metrics.Metrics
	log     *slog.Logger
	// timeout is RETAINED_DRAIN_TIMEOUT, for the log.
	timeout time.Duration
}

// NewRetainer is the retainer of asg, or nil when the client cannot make its calls (then a
// warning says so if abandon is on). Without ABANDON_LIFECYCLE_ACTION_ON_INCOMPLETE_DRAIN new
// hooks are never abandoned, but a node retained before the setting was turned off is still
// drained and its instance terminated, so the retainer is built either way.
func NewRetainer(asg cloud.AutoScaling, gate *instancegate.Gate, m *metrics.Metrics, log *slog.Logger, abandon bool, timeout time.Duration) *Retainer {
	api, ok := asg.(cloud.Retention)
	if !ok {
		if abandon {
			log.Warn("ABANDON_LIFECYCLE_ACTION_ON_INCOMPLETE_DRAIN is set but the Auto Scaling client cannot abandon actions: termination hooks are completed with CONTINUE")
		}
		return nil
	}
	groups := cloud.NewRetentionCache(api)
	groups.Calls = m
	return &Retainer{api: api, groups: groups, gate: gate, metrics: m, log: log, timeout: timeout}
}

// Retains reports whether the group's instance lifecycle policy retains an instance whose
// termination hook is abandoned. An error counts as no: the hook is completed as usual.
func (r *Retainer) Retains(ctx context.Context, group string) (bool, error) {
	retains, first, err := r.groups.RetainsOnAbandon(ctx, group)
	log := r.log.With("group", group)
	switch {
	case err != nil:
		log.Warn("cannot read the group's instance lifecycle policy: a termination hook whose drain cannot finish in time is completed with CONTINUE", "err", err)
	case !first:
	case retains:
		log.Info("the group retains abandoned instances (TerminateHookAbandon: retain): a termination hook whose drain cannot finish in time is completed with ABANDON, and Lifeboat terminates the instance once drained",
			"retainedDrainTimeout", r.timeout.String())
	default:
		log.Info("the group does not retain abandoned instances (no instance lifecycle policy with TerminateHookAbandon: retain): a termination hook whose drain cannot finish in time is completed with CONTINUE, since ABANDON would terminate the instance at once")
	}
	return retains, err
}

// Abandon completes the notice's lifecycle action with ABANDON (an error wrapping
// ErrActionOver when it is over already).
func (r *Retainer) Abandon(ctx context.Context, nodeName string, n notice.Notice) error {
	lc := n.Lifecycle
	if lc == nil {
		return fmt.Errorf("notice %s has no lifecycle action", n.ID)
	}
	if err := r.gate.Check(ctx, instancegate.Request{Call: instancegate.CallCompleteLifecycleAction, Node: nodeName, InstanceID: n.InstanceID, Group: lc.Group}); err != nil {
		if _, refused := instancegate.IsRefusal(err); refused {
			r.metrics.Action(metrics.ActionLifecycleComplete, metrics.ResultRefused)
		}
		return err
	}
	err := r.api.AbandonLifecycleAction(ctx, cloud.LifecycleAction{Group: lc.Group, Hook: lc.Hook, InstanceID: n.InstanceID})
	r.metrics.AWSCall("CompleteLifecycleAction", err, cloud.ErrNoActiveAction)
	r.metrics.ActionErr(metrics.ActionLifecycleComplete, err)
	if errors.Is(err, cloud.ErrNoActiveAction) {
		return fmt.Errorf("%w: %w", ErrActionOver, err)
	}
	return err
}

// Terminate terminates the retained instance of the node, in group, without lowering the
// group's desired capacity. The record says the instance is retained, but the record is input:
// Auto Scaling must report the instance retained in that group, or the call is refused (an
// instance still leaving its hook is asked about again later).
func (r *Retainer) Terminate(ctx context.Context, nodeName, instanceID, group string) error {
	req := instancegate.Request{Call: instancegate.CallTerminateInstance, Node: nodeName, InstanceID: instanceID, Group: group}
	if err := r.gate.Check(ctx, req); err != nil {
		return err
	}
	inGroup, state, err := r.api.LifecycleStateOf(ctx, instanceID)
	r.metrics.AWSCall("DescribeAutoScalingInstances", err, nil)
	switch {
	case err != nil:
		return fmt.Errorf("%s for instance %s: %w", req.Call, instanceID, err)
	case inGroup == group && state == cloud.StateRetained:
	case inGroup == group && strings.HasPrefix(state, "Terminating"):
		return fmt.Errorf("%s for instance %s: Auto Scaling reports it %s, not retained yet", req.Call, instanceID, state)
	default:
		r.metrics.InstanceCallRefused(req.Call)
		why := fmt.Sprintf("Auto Scaling reports the instance %s in group %q, not %s", state, inGroup, cloud.StateRetained)
		if inGroup == "" {
			why = "Auto Scaling reports the instance in no group"
		}
		return &instancegate.Refusal{Request: req, NodeInstance: instanceID, Reason: why + ": the record's word is not enough to terminate it"}
	}
	err = r.api.TerminateRetainedInstance(ctx, group, instanceID)
	r.metrics.AWSCall("TerminateInstanceInAutoScalingGroup", err, nil)
	return err
}
