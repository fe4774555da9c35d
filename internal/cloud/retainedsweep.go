// SPDX-License-Identifier: Apache-2.0

package cloud

import (
	"context"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
)

// RetainedInstance is an instance Auto Scaling retains (lifecycle state Terminating:Retained):
// its termination hook was abandoned or timed out in a group whose instance lifecycle policy
// retains such instances, and it runs until TerminateInstanceInAutoScalingGroup.
type RetainedInstance struct {
	ID, Group string
}

// RetainedLister finds the retained instances of groups.
type RetainedLister interface {
	// RetainedInstances lists the retained instances of groups whose policy retains
	// (TerminateHookAbandon: retain), and how many requests that took.
	RetainedInstances(ctx context.Context, groups []string) ([]RetainedInstance, int, error)
}

// groupNamesPerRequest is how many group names one DescribeAutoScalingGroups names: its
// MaxRecords ceiling, so that a request's names fit in one page.
const groupNamesPerRequest = 100

// RetainedInstances asks DescribeAutoScalingGroups for the groups, 100 names a request,
// following NextToken.
func (a *AWSAutoScaling) RetainedInstances(ctx context.Context, groups []string) ([]RetainedInstance, int, error) {
	var out []RetainedInstance
	requests := 0
	for chunk := range slices.Chunk(groups, groupNamesPerRequest) {
		pages := autoscaling.NewDescribeAutoScalingGroupsPaginator(a.client, &autoscaling.DescribeAutoScalingGroupsInput{
			AutoScalingGroupNames: chunk, MaxRecords: aws.Int32(groupNamesPerRequest)})
		for pages.HasMorePages() {
			page, err := pages.NextPage(ctx)
			requests++
			if err != nil {
				return nil, requests, fmt.Errorf("DescribeAutoScalingGroups for %d group(s): %w", len(chunk), err)
			}
			for _, g := range page.AutoScalingGroups {
				if !RetainsOnAbandon(g.InstanceLifecyclePolicy) {
					continue
				}
				for _, in := range g.Instances {
					if string(in.LifecycleState) == StateRetained {
						out = append(out, RetainedInstance{ID: aws.ToString(in.InstanceId), Group: aws.ToString(g.AutoScalingGroupName)})
					}
				}
			}
		}
	}
	return out, requests, nil
}
