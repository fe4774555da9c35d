// SPDX-License-Identifier: Apache-2.0

// Package cloud is Lifeboat's view of the AWS APIs it calls, behind small interfaces so the
// rest of the code can be tested against fakes and the sandbox.
package cloud

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/smithy-go"
)

// LifecycleAction names one pending Auto Scaling lifecycle action. Token may be empty when
// the instance id identifies it.
type LifecycleAction struct {
	Group, Hook, InstanceID, Token string
}

// AutoScaling is what Lifeboat needs from the Auto Scaling API.
type AutoScaling interface {
	// GroupOf returns the Auto Scaling group of an instance ("" when it has none).
	GroupOf(ctx context.Context, instanceID string) (string, error)
	// CompleteLifecycleAction lets the lifecycle transition continue. A repeated call
	// returns ErrNoActiveAction.
	CompleteLifecycleAction(ctx context.Context, a LifecycleAction) error
	// RecordLifecycleActionHeartbeat extends the action's heartbeat timeout. A call for an
	// action that is over returns ErrNoActiveAction.
	RecordLifecycleActionHeartbeat(ctx context.Context, a LifecycleAction) error
	// LifecycleHookTimeouts returns a hook's heartbeat and global timeouts; ErrNoSuchHook
	// when the group has no such hook.
	LifecycleHookTimeouts(ctx context.Context, group, hook string) (HookTimeouts, error)
	// SetUnhealthy marks an instance Unhealthy in its group, so that the group replaces it.
	SetUnhealthy(ctx context.Context, instanceID string) error
}

// ErrNoActiveAction means there is no pending action to complete: it was completed already
// (by an earlier attempt or another replica) or it timed out.
var ErrNoActiveAction = errors.New("no active lifecycle action")

// LoadAWSConfig is the SDK configuration: the region, one endpoint for every service when
// AWS_ENDPOINT is set (the SDK's per-service endpoint variables still win), the default
// credential chain (IRSA, Pod Identity, environment, instance profile) and a deadline on every
// call (DefaultDeadlines).
func LoadAWSConfig(ctx context.Context, region, endpoint string) (aws.Config, error) {
	opts := []func(*awsconfig.LoadOptions) error{awsconfig.WithRegion(region)}
	if endpoint != "" {
		opts = append(opts, awsconfig.WithBaseEndpoint(endpoint))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("AWS configuration: %w", err)
	}
	return WithDeadlines(cfg, DefaultDeadlines), nil
}

// AWSAutoScaling implements AutoScaling with aws-sdk-go-v2.
type AWSAutoScaling struct{ client *autoscaling.Client }

// NewAWSAutoScaling uses cfg (see LoadAWSConfig).
func NewAWSAutoScaling(cfg aws.Config) *AWSAutoScaling {
	return &AWSAutoScaling{client: autoscaling.NewFromConfig(cfg)}
}

// GroupOf asks DescribeAutoScalingInstances.
func (a *AWSAutoScaling) GroupOf(ctx context.Context, instanceID string) (string, error) {
	out, err := a.client.DescribeAutoScalingInstances(ctx, &autoscaling.DescribeAutoScalingInstancesInput{InstanceIds: []string{instanceID}})
	if err != nil {
		return "", fmt.Errorf("DescribeAutoScalingInstances %s: %w", instanceID, err)
	}
	for _, i := range out.AutoScalingInstances {
		if aws.ToString(i.InstanceId) == instanceID {
			return aws.ToString(i.AutoScalingGroupName), nil
		}
	}
	return "", nil
}

// ResultContinue is the lifecycle action result Lifeboat completes with: let the instance go on
// (terminate, for a termination hook).
const ResultContinue = "CONTINUE"

// CompleteLifecycleAction completes with CONTINUE.
func (a *AWSAutoScaling) CompleteLifecycleAction(ctx context.Context, la LifecycleAction) error {
	return a.completeWith(ctx, la, ResultContinue)
}

// completeWith completes the action with result (CONTINUE or ABANDON).
func (a *AWSAutoScaling) completeWith(ctx context.Context, la LifecycleAction, result string) error {
	in := &autoscaling.CompleteLifecycleActionInput{
		AutoScalingGroupName:  aws.String(la.Group),
		LifecycleHookName:     aws.String(la.Hook),
		LifecycleActionResult: aws.String(result),
	}
	if la.Token != "" {
		in.LifecycleActionToken = aws.String(la.Token)
	} else {
		in.InstanceId = aws.String(la.InstanceID)
	}
	_, err := a.client.CompleteLifecycleAction(ctx, in)
	return actionError("CompleteLifecycleAction", la, err)
}

// IsPermanent reports errors that retrying will not fix (missing permissions, a hook or
// group that does not exist).
func IsPermanent(err error) bool {
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	switch apiErr.ErrorCode() {
	case "AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "ValidationError", "InvalidClientTokenId":
		return true
	}
	return false
}

// RecordLifecycleActionHeartbeat restarts the hook's heartbeat timeout, so the instance is
// kept while its node drains. A call for an action that is over returns ErrNoActiveAction.
func (a *AWSAutoScaling) RecordLifecycleActionHeartbeat(ctx context.Context, la LifecycleAction) error {
	in := &autoscaling.RecordLifecycleActionHeartbeatInput{
		AutoScalingGroupName: aws.String(la.Group),
		LifecycleHookName:    aws.String(la.Hook),
	}
	if la.Token != "" {
		in.LifecycleActionToken = aws.String(la.Token)
	} else {
		in.InstanceId = aws.String(la.InstanceID)
	}
	_, err := a.client.RecordLifecycleActionHeartbeat(ctx, in)
	return actionError("RecordLifecycleActionHeartbeat", la, err)
}

// actionError names the action in err and maps Auto Scaling's answer for an action that is
// no longer pending to ErrNoActiveAction.
func actionError(op string, la LifecycleAction, err error) error {
	if err == nil {
		return nil
	}
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode() == "ValidationError" && strings.Contains(apiErr.ErrorMessage(), "No active Lifecycle Action") {
		return fmt.Errorf("%s %s/%s for %s: %w", op, la.Group, la.Hook, la.InstanceID, ErrNoActiveAction)
	}
	return fmt.Errorf("%s %s/%s for %s: %w", op, la.Group, la.Hook, la.InstanceID, err)
}
