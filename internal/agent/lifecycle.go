// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/instancegate"
	"lifeboat.dev/lifeboat/internal/lifecycle"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/panics"
)

// hookDeadline is when this instance's termination hook expires, counted from when the agent
// first saw the Terminated state: the hook's heartbeat timeout (the agent sends no
// heartbeats), never past its global timeout. Without ASG_LIFECYCLE_HOOK_NAME, or when the
// timeout cannot be read, Auto Scaling's default of one hour stands in so pods keep their own
// grace periods, and the log says why.
func (a *Agent) hookDeadline(ctx context.Context, n notice.Notice) time.Time {
	start := n.StartTime
	if start.IsZero() {
		start = time.Now()
	}
	log := a.log.With("notice", n.ID)
	assumed := cloud.AssumedHookTimeouts
	if a.hooks == nil {
		log.Warn("ASG_LIFECYCLE_HOOK_NAME is unset, so the termination hook's heartbeat timeout is unknown (pods keep their own grace periods) "+
			"and its lifecycle action is not completed: the instance terminates when the lifecycle hook times out",
			"assumedHeartbeatTimeout", assumed.Heartbeat.String())
		return assumed.Deadline(start, cloud.Heartbeats{})
	}
	group, err := a.group.Name(ctx)
	if err == nil && group == "" {
		err = errors.New("the instance is in no Auto Scaling group")
	}
	if err != nil {
		log.Warn("the termination hook's heartbeat timeout is unknown: pods keep their own grace periods",
			"hook", a.cfg.ASGLifecycleHookName, "assumedHeartbeatTimeout", assumed.Heartbeat.String(), "err", err)
		return assumed.Deadline(start, cloud.Heartbeats{})
	}
	return lifecycle.Deadline(ctx, a.hooks, group, a.cfg.ASGLifecycleHookName, start, cloud.Heartbeats{}, log)
}

// hookDeadlineOrAssumed is hookDeadline with a panic (a bug met on an AWS answer) taken as a
// timeout it could not read: counted and logged, and the notice goes on to its intake with
// the assumed deadline. The poller reports a notice once, so one lost here would wait for a
// restart.
func (a *Agent) hookDeadlineOrAssumed(ctx context.Context, n notice.Notice) (deadline time.Time) {
	var err error
	defer func() {
		if err != nil {
			start := n.StartTime
			if start.IsZero() {
				start = time.Now()
			}
			deadline = cloud.AssumedHookTimeouts.Deadline(start, cloud.Heartbeats{})
		}
	}()
	defer panics.Recover(panics.HookTimeout, a.log, a.metrics, &err, "notice", n.ID)
	return a.hookDeadline(ctx, n)
}

// useLifecycleHook sets up the completion of this instance's Auto Scaling termination hook
// after its drain. NTH never does this in IMDS mode, so instances wait for the hook's timeout.
func (a *Agent) useLifecycleHook(ctx context.Context, instanceID string) error {
	region := a.cfg.AWSRegion
	if region == "" {
		body, found, err := a.imds.Get(ctx, "placement/region")
		if err != nil || !found {
			return fmt.Errorf("AWS region: AWS_REGION is unset and instance metadata placement/region failed: %v", err)
		}
		region = strings.TrimSpace(string(body))
	}
	awsCfg, err := cloud.LoadAWSConfig(ctx, region, a.cfg.AWSEndpoint)
	if err != nil {
		return err
	}
	var asg cloud.AutoScaling = cloud.NewAWSAutoScaling(awsCfg)
	a.group = &lifecycle.InstanceGroup{AutoScaling: asg, InstanceID: instanceID}
	a.hooks = cloud.NewHookTimeoutCache(asg)
	completer := lifecycle.Completer{AutoScaling: asg, Metrics: a.metrics, Log: a.log,
		Gate: instancegate.New(instancegate.Options{Nodes: a.client, Groups: asg,
			LocalInstance: instanceID, Refused: a.metrics.InstanceCallRefused}),
		Delay: time.Duration(a.cfg.CompleteLifecycleActionDelaySeconds) * time.Second}
	a.hook.Use(completer, a.group, a.cfg.ASGLifecycleHookName)
	return nil
}
