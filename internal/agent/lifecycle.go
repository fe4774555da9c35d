package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/interruption"
	"lifeboat.dev/lifeboat/internal/notice"
)

// lifecycleCompleter completes the Auto Scaling termination hook of this instance after its
// drain. NTH never does this in IMDS mode, so instances wait for the hook's timeout.
func (a *Agent) lifecycleCompleter(ctx context.Context, instanceID string) (func(context.Context, notice.Notice) (*interruption.Completed, error), error) {
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
	hook := a.cfg.ASGLifecycleHookName
	return func(ctx context.Context, n notice.Notice) (*interruption.Completed, error) {
		if n.Kind != notice.ASGTermination {
			return nil, nil
		}
		if d := a.cfg.CompleteLifecycleActionDelaySeconds; d > 0 {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(time.Duration(d) * time.Second):
			}
		}
		log := a.log.With("notice", n.ID, "hook", hook, "instance", instanceID)
		group, err := asg.GroupOf(ctx, instanceID)
		if err == nil && group == "" {
			log.Warn("the instance is in no Auto Scaling group; nothing to complete")
			return nil, nil
		}
		if err == nil {
			err = asg.CompleteLifecycleAction(ctx, cloud.LifecycleAction{Group: group, Hook: hook, InstanceID: instanceID})
		}
		switch {
		case err == nil:
			log.Info("lifecycle action completed", "group", group)
			return &interruption.Completed{Hook: hook, Result: cloud.ResultContinue}, nil
		case errors.Is(err, cloud.ErrNoActiveAction):
			log.Info("no lifecycle action to complete: already completed or timed out", "err", err)
		case cloud.IsPermanent(err):
			log.Error("cannot complete the lifecycle action; the instance terminates when the hook times out", "err", err)
		default:
			return nil, err // transient: the notice is retried
		}
		return nil, nil
	}, nil
}
