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
