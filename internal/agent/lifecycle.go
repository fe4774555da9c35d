package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/instancegate"
	"lifeboat.dev/lifeboat/internal/interruption"
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
	group, err := a.group(ctx)
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

// group is this instance's Auto Scaling group, asked once (an instance never changes group
// while it runs).
func (a *Agent) group(ctx context.Context) (string, error) {
	a.groupMu.Lock()
	defer a.groupMu.Unlock()
	if a.groupKnown {
		return a.groupName, nil
	}
	g, err := a.asg.GroupOf(ctx, a.instance)
	if err != nil {
		return "", err
	}
	a.groupName, a.groupKnown = g, true
	return g, nil
}

// completeLifecycle completes the termination hook of a drained node's notice when Run built
// a completer (ASG_LIFECYCLE_HOOK_NAME); without one the hook is left to its own timeout.
func (a *Agent) completeLifecycle(ctx context.Context, nodeName string, n notice.Notice) (*interruption.Completed, error) {
	if a.completeHook == nil {
		return nil, nil
	}
	return a.completeHook(ctx, nodeName, n)
}

// lifecycleCompleter completes the Auto Scaling termination hook of this instance after its
// drain. NTH never does this in IMDS mode, so instances wait for the hook's timeout.
func (a *Agent) lifecycleCompleter(ctx context.Context, instanceID string) (func(context.Context, string, notice.Notice) (*interruption.Completed, error), error) {
	region := a.cfg.AWSRegion
	if region == "" {
		body, found, err := a.imds.Get(ctx, "placement/region")
		if err != nil || !found {
			return nil, fmt.Errorf("AWS region: AWS_REGION is unset and instance metadata placement/region failed: %v", err)
		}
		region = strings.TrimSpace(string(body))
	}
	awsCfg, err := cloud.LoadAWSConfig(ctx, region, a.cfg.AWSEndpoint)
	if err != nil {
		return nil, err
	}
	var asg cloud.AutoScaling = cloud.NewAWSAutoScaling(awsCfg)
	a.asg, a.instance = asg, instanceID
	a.hooks = cloud.NewHookTimeoutCache(asg)
	hook := a.cfg.ASGLifecycleHookName
	completer := lifecycle.Completer{AutoScaling: asg, Metrics: a.metrics, Log: a.log,
		Gate: instancegate.New(instancegate.Options{Nodes: a.client, Groups: asg, UseProviderID: true,
			LocalInstance: instanceID, Refused: a.metrics.InstanceCallRefused}),
		Delay: time.Duration(a.cfg.CompleteLifecycleActionDelaySeconds) * time.Second}
	return func(ctx context.Context, nodeName string, n notice.Notice) (*interruption.Completed, error) {
		if n.Kind != notice.ASGTermination {
			return nil, nil
		}
		if n.InstanceID != instanceID {
			// A record on this Node names another instance: never complete anything for it.
			return nil, &instancegate.Refusal{
				Request:      instancegate.Request{Call: instancegate.CallCompleteLifecycleAction, Node: nodeName, InstanceID: n.InstanceID},
				NodeInstance: instanceID, Reason: "instance metadata names the node's instance " + instanceID,
			}
		}
		group, err := a.group(ctx)
		if err != nil && cloud.IsPermanent(err) {
			a.log.Error("cannot learn the instance's Auto Scaling group; the instance terminates when the hook times out", "notice", n.ID, "err", err)
			return nil, nil
		}
		if err != nil {
			return nil, err // transient: the notice is retried
		}
		if group == "" {
			a.log.Warn("the instance is in no Auto Scaling group; nothing to complete", "notice", n.ID, "hook", hook, "instance", instanceID)
			return nil, nil
		}
		done, err := completer.Complete(ctx, nodeName, cloud.LifecycleAction{Group: group, Hook: hook, InstanceID: instanceID}, n.ID)
		if !done {
			return nil, err
		}
		return &interruption.Completed{Hook: hook, Result: cloud.ResultContinue}, nil
	}, nil
}
