// SPDX-License-Identifier: Apache-2.0

package controlleronly

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"lifeboat.dev/lifeboat/internal/cloud"
)

// AWSSetup implements cloud.Setup with aws-sdk-go-v2.
type AWSSetup struct {
	events *eventbridge.Client
	sqs    *sqs.Client
	asg    *autoscaling.Client
}

// NewAWSSetup uses cfg (see cloud.LoadAWSConfig).
func NewAWSSetup(cfg aws.Config) *AWSSetup {
	return &AWSSetup{events: eventbridge.NewFromConfig(cfg), sqs: sqs.NewFromConfig(cfg), asg: autoscaling.NewFromConfig(cfg)}
}

// maxGroupLookup is how many instances one DescribeAutoScalingInstances may name.
const maxGroupLookup = 50

// GroupsOf asks DescribeAutoScalingInstances about 50 instances a request.
func (s *AWSSetup) GroupsOf(ctx context.Context, instanceIDs []string) ([]string, error) {
	seen := map[string]bool{}
	for start := 0; start < len(instanceIDs); start += maxGroupLookup {
		in := &autoscaling.DescribeAutoScalingInstancesInput{InstanceIds: instanceIDs[start:min(start+maxGroupLookup, len(instanceIDs))]}
		for {
			out, err := s.asg.DescribeAutoScalingInstances(ctx, in)
			if err != nil {
				return nil, fmt.Errorf("DescribeAutoScalingInstances: %w", err)
			}
			for _, i := range out.AutoScalingInstances {
				seen[aws.ToString(i.AutoScalingGroupName)] = true
			}
			if aws.ToString(out.NextToken) == "" {
				break
			}
			in.NextToken = out.NextToken
		}
	}
	delete(seen, "")
	return slices.Sorted(maps.Keys(seen)), nil
}

// TerminateHooks reads the group's lifecycle hooks.
func (s *AWSSetup) TerminateHooks(ctx context.Context, group string) ([]cloud.Hook, error) {
	out, err := s.asg.DescribeLifecycleHooks(ctx, &autoscaling.DescribeLifecycleHooksInput{AutoScalingGroupName: aws.String(group)})
	if err != nil {
		return nil, fmt.Errorf("DescribeLifecycleHooks %s: %w", group, err)
	}
	var hooks []cloud.Hook
	for _, h := range out.LifecycleHooks {
		if aws.ToString(h.LifecycleTransition) == "autoscaling:EC2_INSTANCE_TERMINATING" {
			hooks = append(hooks, cloud.Hook{Name: aws.ToString(h.LifecycleHookName), NotificationTarget: aws.ToString(h.NotificationTargetARN)})
		}
	}
	return hooks, nil
}

// RulesTargeting pages through ListRuleNamesByTarget, then describes each rule.
func (s *AWSSetup) RulesTargeting(ctx context.Context, targetARN string) ([]cloud.Rule, error) {
	var names []string
	in := &eventbridge.ListRuleNamesByTargetInput{TargetArn: aws.String(targetARN)}
	for {
		out, err := s.events.ListRuleNamesByTarget(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("ListRuleNamesByTarget %s: %w", targetARN, err)
		}
		names = append(names, out.RuleNames...)
		if aws.ToString(out.NextToken) == "" {
			break
		}
		in.NextToken = out.NextToken
	}
	rules := make([]cloud.Rule, 0, len(names))
	for _, name := range names {
		out, err := s.events.DescribeRule(ctx, &eventbridge.DescribeRuleInput{Name: aws.String(name)})
		if err != nil {
			return nil, fmt.Errorf("DescribeRule %s: %w", name, err)
		}
		rules = append(rules, cloud.Rule{Name: name, State: string(out.State), EventPattern: aws.ToString(out.EventPattern)})
	}
	return rules, nil
}

// QueueARNAndPolicy reads the queue's QueueArn and Policy attributes.
func (s *AWSSetup) QueueARNAndPolicy(ctx context.Context, queueURL string) (string, string, error) {
	out, err := s.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(queueURL),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn, sqstypes.QueueAttributeNamePolicy}})
	if err != nil {
		return "", "", fmt.Errorf("GetQueueAttributes %s: %w", queueURL, err)
	}
	return out.Attributes[string(sqstypes.QueueAttributeNameQueueArn)], out.Attributes[string(sqstypes.QueueAttributeNamePolicy)], nil
}
