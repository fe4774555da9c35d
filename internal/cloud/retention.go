// SPDX-License-Identifier: Apache-2.0

package cloud

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"k8s.io/apimachinery/pkg/util/cache"
)

// ResultAbandon is the lifecycle action result that lets a termination hook fail: the
// instance is terminated at once, unless its group's instance lifecycle policy retains it.
const ResultAbandon = "ABANDON"

// Retention is what Lifeboat needs from Auto Scaling to leave an instance whose drain could
// not finish to its group's retention, and to terminate it once the drain is done.
type Retention interface {
	// RetainsOnAbandon reports whether the group's instance lifecycle policy keeps an
	// instance whose termination hook is abandoned (TerminateHookAbandon: retain).
	// ErrNoSuchGroup when Auto Scaling has no such group.
	RetainsOnAbandon(ctx context.Context, group string) (bool, error)
	// AbandonLifecycleAction completes the action with ABANDON. A call for an action that
	// is over returns ErrNoActiveAction.
	AbandonLifecycleAction(ctx context.Context, a LifecycleAction) error
	// TerminateRetainedInstance terminates an instance of the group without lowering the
	// group's desired capacity (a retained instance does not count towards it).
	TerminateRetainedInstance(ctx context.Context, group, instanceID string) error
	// LifecycleStateOf is the instance's group and lifecycle state as Auto Scaling reports
	// them (DescribeAutoScalingInstances); both "" when it is in no group.
	LifecycleStateOf(ctx context.Context, instanceID string) (group, state string, err error)
}

// StateRetained is the lifecycle state of an instance Auto Scaling retains after its
// termination hook was abandoned or timed out (TerminateHookAbandon: retain).
const StateRetained = string(types.LifecycleStateTerminatingRetained)

// LifecycleStateOf asks DescribeAutoScalingInstances for the instance.
func (a *AWSAutoScaling) LifecycleStateOf(ctx context.Context, instanceID string) (string, string, error) {
	out, err := a.client.DescribeAutoScalingInstances(ctx, &autoscaling.DescribeAutoScalingInstancesInput{InstanceIds: []string{instanceID}})
	if err != nil {
		return "", "", fmt.Errorf("DescribeAutoScalingInstances %s: %w", instanceID, err)
	}
	for _, i := range out.AutoScalingInstances {
		if aws.ToString(i.InstanceId) == instanceID {
			return aws.ToString(i.AutoScalingGroupName), aws.ToString(i.LifecycleState), nil
		}
	}
	return "", "", nil
}

// ErrNoSuchGroup means Auto Scaling has no group of that name.
var ErrNoSuchGroup = errors.New("no such Auto Scaling group")

var _ Retention = (*AWSAutoScaling)(nil)

// RetainsOnAbandon asks DescribeAutoScalingGroups for the group's instance lifecycle policy.
func (a *AWSAutoScaling) RetainsOnAbandon(ctx context.Context, group string) (bool, error) {
	out, err := a.client.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{group}})
	if err != nil {
		return false, fmt.Errorf("DescribeAutoScalingGroups %s: %w", group, err)
	}
	for _, g := range out.AutoScalingGroups {
		if aws.ToString(g.AutoScalingGroupName) == group {
			return RetainsOnAbandon(g.InstanceLifecyclePolicy), nil
		}
	}
	return false, fmt.Errorf("DescribeAutoScalingGroups %s: %w", group, ErrNoSuchGroup)
}

// RetainsOnAbandon reports whether an instance lifecycle policy retains the instances whose
// termination hook is abandoned. No policy, or no trigger, terminates them.
func RetainsOnAbandon(p *types.InstanceLifecyclePolicy) bool {
	return p != nil && p.RetentionTriggers != nil && p.RetentionTriggers.TerminateHookAbandon == types.RetentionActionRetain
}

// AbandonLifecycleAction completes the action with ABANDON, by token or instance id.
func (a *AWSAutoScaling) AbandonLifecycleAction(ctx context.Context, la LifecycleAction) error {
	return a.completeWith(ctx, la, ResultAbandon)
}

// TerminateRetainedInstance calls TerminateInstanceInAutoScalingGroup with
// ShouldDecrementDesiredCapacity=false: the group keeps its size (the retained instance was
// already replaced).
func (a *AWSAutoScaling) TerminateRetainedInstance(ctx context.Context, group, instanceID string) error {
	_, err := a.client.TerminateInstanceInAutoScalingGroup(ctx, &autoscaling.TerminateInstanceInAutoScalingGroupInput{
		InstanceId: aws.String(instanceID), ShouldDecrementDesiredCapacity: aws.Bool(false),
	})
	if err != nil {
		return fmt.Errorf("TerminateInstanceInAutoScalingGroup %s in %s: %w", instanceID, group, err)
	}
	return nil
}

// RetentionCache answers RetainsOnAbandon once per group within its TTL: a group's policy
// rarely changes, and a burst of hooks in one group asks once. It is safe for concurrent use.
type RetentionCache struct {
	api Retention
	ttl time.Duration
	// Calls, when set, counts every call to Auto Scaling.
	Calls CallCounter

	mu      sync.Mutex
	entries *cache.LRUExpireCache
}

// RetentionTTL is how long a group's answer is reused.
const RetentionTTL = 10 * time.Minute

// NewRetentionCache asks api.
func NewRetentionCache(api Retention) *RetentionCache {
	return &RetentionCache{api: api, ttl: RetentionTTL, entries: cache.NewLRUExpireCache(4096)}
}

// RetainsOnAbandon returns the group's answer, asking Auto Scaling when it is not known;
// first reports whether this call asked (so that the caller logs a group's behaviour once
// per TTL). Errors are not kept.
func (c *RetentionCache) RetainsOnAbandon(ctx context.Context, group string) (retains, first bool, err error) {
	c.mu.Lock()
	v, ok := c.entries.Get(group)
	c.mu.Unlock()
	if ok {
		return v.(bool), false, nil
	}
	retains, err = c.api.RetainsOnAbandon(ctx, group)
	if c.Calls != nil {
		c.Calls.AWSCall("DescribeAutoScalingGroups", err, nil)
	}
	if err != nil {
		return false, true, err
	}
	c.mu.Lock()
	c.entries.Add(group, retains, c.ttl)
	c.mu.Unlock()
	return retains, true, nil
}
