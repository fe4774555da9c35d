// SPDX-License-Identifier: Apache-2.0

package preflight

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"

	"lifeboat.dev/lifeboat/internal/cloud"
)

// maxGroupsListed bounds the groups named in the retention row.
const maxGroupsListed = 10

// CheckRetention checks what ABANDON_LIFECYCLE_ACTION_ON_INCOMPLETE_DRAIN needs, and says which
// behaviour each group gives: DescribeAutoScalingGroups (the groups' instance lifecycle
// policies, read as the controller reads them before it abandons a hook), and
// TerminateInstanceInAutoScalingGroup, probed with an instance id no instance has. Without the
// first no hook is ever abandoned (each completes with CONTINUE, as without the setting), so a
// denial is a warning; without the second a retained instance is never terminated, which
// fails, unless the denial may come from a policy limited to tagged groups (as for
// CompleteLifecycleAction), when it is a warning too.
func CheckRetention(ctx context.Context, api AutoScalingAPI) []Row {
	const describe = "autoscaling:DescribeAutoScalingGroups"
	var retaining, others []string
	var row Row
	p := autoscaling.NewDescribeAutoScalingGroupsPaginator(api, &autoscaling.DescribeAutoScalingGroupsInput{MaxRecords: aws.Int32(100)})
	var err error
	for pages := 0; p.HasMorePages() && pages < 10 && err == nil; pages++ {
		var out *autoscaling.DescribeAutoScalingGroupsOutput
		if out, err = p.NextPage(ctx); err != nil {
			break
		}
		for _, g := range out.AutoScalingGroups {
			if cloud.RetainsOnAbandon(g.InstanceLifecyclePolicy) {
				retaining = append(retaining, aws.ToString(g.AutoScalingGroupName))
			} else {
				others = append(others, aws.ToString(g.AutoScalingGroupName))
			}
		}
	}
	switch {
	case err != nil:
		row = warnIfDenied(awsRow(describe, "", err), err,
			func(why string) string {
				return "denied (" + why + "): no group's instance lifecycle policy can be read, so every termination hook is completed with CONTINUE, as without ABANDON_LIFECYCLE_ACTION_ON_INCOMPLETE_DRAIN"
			},
			"allow "+describe+" in the IAM policy of the role Lifeboat runs as")
	case len(retaining) == 0:
		row = Row{Check: describe, Status: StatusWarn,
			Detail: fmt.Sprintf("no group retains abandoned instances (%d without TerminateHookAbandon: retain): a termination hook whose drain cannot finish is completed with CONTINUE", len(others)),
			Fix:    "give the Auto Scaling groups of this cluster an instance lifecycle policy with RetentionTriggers TerminateHookAbandon=retain, or unset ABANDON_LIFECYCLE_ACTION_ON_INCOMPLETE_DRAIN"}
	default:
		detail := fmt.Sprintf("ABANDON (then drained and terminated by Lifeboat) in %d group(s) that retain abandoned instances: %s", len(retaining), listGroups(retaining))
		if len(others) > 0 {
			detail += fmt.Sprintf("; CONTINUE in %d other(s): %s", len(others), listGroups(others))
		}
		row = Row{Check: describe, Status: StatusOK, Detail: detail}
	}
	_, err = api.TerminateInstanceInAutoScalingGroup(ctx, &autoscaling.TerminateInstanceInAutoScalingGroupInput{
		InstanceId: aws.String(probeInstance), ShouldDecrementDesiredCapacity: aws.Bool(false),
	})
	const terminate = "autoscaling:TerminateInstanceInAutoScalingGroup"
	term := warnIfDenied(awsRow(terminate, "terminate a retained instance once its node is drained", err), err,
		func(why string) string {
			return "denied for an instance that does not exist (" + why + "): if it is denied for the cluster's groups too, a retained instance stays retained until RETAINED_DRAIN_TIMEOUT, then needs terminating by hand"
		},
		"allow "+terminate+" for the cluster's Auto Scaling groups; if the policy already allows it only on tagged groups, this probe cannot tell and the warning can be ignored")
	return []Row{row, term}
}

// listGroups names the first groups, and how many more there are.
func listGroups(groups []string) string {
	if len(groups) <= maxGroupsListed {
		return strings.Join(groups, ", ")
	}
	return strings.Join(groups[:maxGroupsListed], ", ") + fmt.Sprintf(" and %d more", len(groups)-maxGroupsListed)
}
