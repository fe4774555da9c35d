// SPDX-License-Identifier: Apache-2.0

// Package lifecycle makes the Auto Scaling calls an episode needs for its node's instance,
// each only once the instance gate has confirmed that the instance is the node's own and in
// the hook's group: completing a drained notice's termination hook (after
// COMPLETE_LIFECYCLE_ACTION_DELAY_SECONDS, by instance id, with one reading of Auto Scaling's
// answers; QueueNotices for the controller, OwnHook for the agent), keeping hooks alive while
// their node drains (Heartbeats), abandoning them to a group's retention and terminating the
// retained instance (Retainer), and marking an impaired instance Unhealthy. The episode's
// phases call these through narrow interfaces; the mode only chooses which.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/events"
	"lifeboat.dev/lifeboat/internal/instancegate"
	"lifeboat.dev/lifeboat/internal/metrics"
)

// Completer completes termination hooks with CONTINUE.
type Completer struct {
	AutoScaling cloud.AutoScaling
	Gate        *instancegate.Gate
	Metrics     *metrics.Metrics
	Log         *slog.Logger
	// Delay is waited before each completion (COMPLETE_LIFECYCLE_ACTION_DELAY_SECONDS).
	Delay time.Duration
	// Events, when set, tell the node what became of its instance after a drain that marks it
	// Unhealthy or terminates it.
	Events *events.Recorder
}

// Complete completes the action a of the instance behind node. It reports whether it
// completed it: false with no error when there was none to complete (already completed or
// timed out) or when it cannot be completed at all (a permanent failure, logged: the action
// times out). A refusal of the gate is returned as the *instancegate.Refusal it is (the notice
// is finished without the call); any other error is transient, to retry.
func (c Completer) Complete(ctx context.Context, node string, a cloud.LifecycleAction, noticeID string) (bool, error) {
	if c.Delay > 0 {
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(c.Delay):
		}
	}
	log := c.Log.With("notice", noticeID, "group", a.Group, "hook", a.Hook, "instance", a.InstanceID)
	err := c.Gate.Check(ctx, instancegate.Request{Call: instancegate.CallCompleteLifecycleAction, Node: node, InstanceID: a.InstanceID, Group: a.Group})
	if err != nil {
		if _, refused := instancegate.IsRefusal(err); refused {
			c.Metrics.Action(metrics.ActionLifecycleComplete, metrics.ResultRefused)
		} else if cloud.IsPermanent(err) {
			log.Error("cannot confirm the instance's Auto Scaling group, so the lifecycle action is not completed; it will time out", "err", err)
			c.Metrics.Action(metrics.ActionLifecycleComplete, metrics.ResultGivenUp) // what the alert pages on: no retry will come
			return false, nil
		}
		return false, err
	}
	err = c.AutoScaling.CompleteLifecycleAction(ctx, a)
	c.Metrics.AWSCall("CompleteLifecycleAction", err, cloud.ErrNoActiveAction)
	switch {
	case err == nil:
		c.Metrics.Action(metrics.ActionLifecycleComplete, metrics.ResultOK)
		log.Info("lifecycle action completed")
		return true, nil
	case errors.Is(err, cloud.ErrNoActiveAction):
		log.Info("no lifecycle action to complete: already completed or timed out")
	case cloud.IsPermanent(err):
		log.Error("cannot complete the lifecycle action; it will time out", "err", err)
		c.Metrics.Action(metrics.ActionLifecycleComplete, metrics.ResultGivenUp)
	default:
		return false, fmt.Errorf("complete lifecycle action: %w", err)
	}
	return false, nil
}
