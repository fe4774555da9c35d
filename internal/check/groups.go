// SPDX-License-Identifier: Apache-2.0

package check

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	asgtypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/smithy-go"
	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/ownership"
)

// What a group's instance maintenance policy makes of a node repair, whose drained instance
// is marked Unhealthy for the group to replace.
const (
	// ReplacementLaunchFirst: MinHealthyPercentage 100, so the group launches the
	// replacement and terminates the instance only once the replacement is in service.
	ReplacementLaunchFirst = "launch-before-terminate"
	// ReplacementTerminateFirst: a policy that lets the group terminate the instance
	// before its replacement is in service (MaxHealthyPercentage 100, or a custom range).
	ReplacementTerminateFirst = "terminate-and-launch"
	// ReplacementNoPolicy: no policy; AWS's default for an unhealthy instance is to
	// terminate it, then launch the replacement.
	ReplacementNoPolicy = "no-policy"
)

// AutoScalingAPI is what the groups report asks Auto Scaling: the groups of the nodes'
// instances, then each group's instance maintenance policy.
type AutoScalingAPI interface {
	DescribeAutoScalingInstances(ctx context.Context, in *autoscaling.DescribeAutoScalingInstancesInput, optFns ...func(*autoscaling.Options)) (*autoscaling.DescribeAutoScalingInstancesOutput, error)
	DescribeAutoScalingGroups(ctx context.Context, in *autoscaling.DescribeAutoScalingGroupsInput, optFns ...func(*autoscaling.Options)) (*autoscaling.DescribeAutoScalingGroupsOutput, error)
}

// Group is one Auto Scaling group of the cluster's nodes and what its instance maintenance
// policy makes of a repair of one of them.
type Group struct {
	Name  string `json:"name"`
	Nodes int    `json:"nodes"`
	// MinHealthyPercentage and MaxHealthyPercentage are the policy's; absent without one.
	MinHealthyPercentage *int32 `json:"minHealthyPercentage,omitempty"`
	MaxHealthyPercentage *int32 `json:"maxHealthyPercentage,omitempty"`
	Replacement          string `json:"replacement"`
	Detail               string `json:"detail"`
	// Fix is the command that makes the group launch before it terminates; empty when a
	// repair already keeps its capacity.
	Fix string `json:"fix,omitempty"`
	// Finding is set when node repair is on and a repair leaves the group one instance
	// short: check then exits 1. With repair off the report is advice.
	Finding bool `json:"finding"`
}

// Groups is the groups report.
type Groups struct {
	Groups []Group `json:"groups"`
	// NodesInNoGroup counts the nodes whose instance is in no Auto Scaling group
	// (Karpenter's, one launched alone) or that name no instance.
	NodesInNoGroup int `json:"nodesInNoGroup"`
	// NotChecked says, in one line, why the groups were not read (AWS not configured or
	// not reachable, a permission missing, the nodes not listed); empty when they were.
	NotChecked string `json:"notChecked,omitempty"`
}

// Findings counts the groups that are findings.
func (g *Groups) Findings() int {
	if g == nil {
		return 0
	}
	n := 0
	for _, x := range g.Groups {
		if x.Finding {
			n++
		}
	}
	return n
}

// GroupOptions are the daemon's settings the report measures against.
type GroupOptions struct {
	// NodeRepair is ENABLE_NODE_REPAIR: a group a repair leaves one short is a finding.
	NodeRepair bool
	// RepairAction is NODE_REPAIR_ACTION: with terminate, Lifeboat ends the instance
	// itself and no policy can launch the replacement first.
	RepairAction string
}

// maxNamesPerCall is how many instances or groups one Describe call names.
const maxNamesPerCall = 50

// CheckGroups finds the Auto Scaling groups of the nodes' instances and reads each group's
// instance maintenance policy. It never fails: what kept it from reading the groups is
// NotChecked, so the workload checks' report stands on its own.
func CheckGroups(ctx context.Context, nodes []corev1.Node, api AutoScalingAPI, o GroupOptions) *Groups {
	out := &Groups{Groups: []Group{}}
	var ids []string
	for _, n := range nodes {
		if id := ownership.InstanceIDFromProviderID(n.Spec.ProviderID); id != "" {
			ids = append(ids, id)
		} else {
			out.NodesInNoGroup++
		}
	}
	nodesOf, err := groupsOf(ctx, api, ids)
	if err != nil {
		out.NotChecked = notChecked("DescribeAutoScalingInstances", err)
		return out
	}
	grouped := 0
	for _, n := range nodesOf {
		grouped += n
	}
	out.NodesInNoGroup += len(ids) - grouped
	policies, err := maintenancePolicies(ctx, api, slices.Sorted(maps.Keys(nodesOf)))
	if err != nil {
		out.NotChecked = notChecked("DescribeAutoScalingGroups", err)
		return out
	}
	for name, nodes := range nodesOf {
		out.Groups = append(out.Groups, judge(name, nodes, policies[name], o))
	}
	slices.SortFunc(out.Groups, func(a, b Group) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// groupsOf asks DescribeAutoScalingInstances for the instances' groups, 50 instances a call,
// and counts the instances of each group.
func groupsOf(ctx context.Context, api AutoScalingAPI, ids []string) (map[string]int, error) {
	nodes := map[string]int{}
	for chunk := range slices.Chunk(ids, maxNamesPerCall) {
		in := &autoscaling.DescribeAutoScalingInstancesInput{InstanceIds: chunk}
		for {
			page, err := api.DescribeAutoScalingInstances(ctx, in)
			if err != nil {
				return nil, err
			}
			for _, i := range page.AutoScalingInstances {
				if g := aws.ToString(i.AutoScalingGroupName); g != "" && slices.Contains(chunk, aws.ToString(i.InstanceId)) {
					nodes[g]++
				}
			}
			if aws.ToString(page.NextToken) == "" {
				break
			}
			in.NextToken = page.NextToken
		}
	}
	return nodes, nil
}

// maintenancePolicies asks DescribeAutoScalingGroups for the groups, 50 a call; a group
// without a policy maps to nil.
func maintenancePolicies(ctx context.Context, api AutoScalingAPI, groups []string) (map[string]*asgtypes.InstanceMaintenancePolicy, error) {
	policies := map[string]*asgtypes.InstanceMaintenancePolicy{}
	for chunk := range slices.Chunk(groups, maxNamesPerCall) {
		in := &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: chunk, MaxRecords: aws.Int32(maxNamesPerCall)}
		for {
			page, err := api.DescribeAutoScalingGroups(ctx, in)
			if err != nil {
				return nil, err
			}
			for _, g := range page.AutoScalingGroups {
				policies[aws.ToString(g.AutoScalingGroupName)] = g.InstanceMaintenancePolicy
			}
			if aws.ToString(page.NextToken) == "" {
				break
			}
			in.NextToken = page.NextToken
		}
	}
	return policies, nil
}

// launchFirstMax is the MaxHealthyPercentage the fix sets: room above the desired capacity for
// the replacement while the old instance is still there.
const launchFirstMax = 110

// judge says what the group's policy makes of a repair.
func judge(name string, nodes int, p *asgtypes.InstanceMaintenancePolicy, o GroupOptions) Group {
	g := Group{Name: name, Nodes: nodes}
	minHealthy, maxHealthy := int32(-1), int32(-1)
	if p != nil && p.MinHealthyPercentage != nil && p.MaxHealthyPercentage != nil && *p.MinHealthyPercentage >= 0 {
		g.MinHealthyPercentage, g.MaxHealthyPercentage = p.MinHealthyPercentage, p.MaxHealthyPercentage
		minHealthy, maxHealthy = *p.MinHealthyPercentage, *p.MaxHealthyPercentage
	}
	switch {
	case minHealthy < 0:
		g.Replacement = ReplacementNoPolicy
		g.Detail = "no policy set: AWS's default for an unhealthy instance is to terminate it, then launch its replacement: capacity dips by one during a repair"
	case minHealthy == 100 && maxHealthy > 100:
		g.Replacement = ReplacementLaunchFirst
		g.Detail = "replacement launched before the node goes: the drained instance, marked Unhealthy, is terminated once its replacement is in service"
	case maxHealthy <= 100:
		g.Replacement = ReplacementTerminateFirst
		g.Detail = "terminate and launch (MaxHealthyPercentage 100): the group terminates the drained instance, then launches its replacement: capacity dips by one during a repair"
	default:
		g.Replacement = ReplacementTerminateFirst
		g.Detail = fmt.Sprintf("custom range (MinHealthyPercentage %d): the group may terminate the drained instance before launching its replacement while %d %% of its desired capacity stays healthy: capacity can dip by one during a repair", minHealthy, minHealthy)
	}
	if g.Replacement != ReplacementLaunchFirst {
		g.Fix = fmt.Sprintf("aws autoscaling update-auto-scaling-group --auto-scaling-group-name %s --instance-maintenance-policy MinHealthyPercentage=100,MaxHealthyPercentage=%d", name, launchFirstMax)
	} else if o.RepairAction == config.RepairTerminate {
		// The policy acts on the group's own replacements; an instance Lifeboat terminates
		// through EC2 is gone before the group learns of it.
		g.Detail = "launch before terminating, but NODE_REPAIR_ACTION=terminate ends the drained instance itself, so the group launches the replacement afterwards: capacity dips by one during a repair"
		g.Fix = "NODE_REPAIR_ACTION=mark-unhealthy, so that the group replaces the instance under its policy"
	}
	g.Finding = o.NodeRepair && g.Fix != ""
	return g
}

// notChecked says in one line why the groups were not read: a permission missing (named),
// credentials refused, or AWS not reachable.
func notChecked(operation string, err error) string {
	return strings.Join(strings.Fields(whyNotChecked(operation, err)), " ")
}

func whyNotChecked(operation string, err error) string {
	if code, ok := cloud.Denied(err); ok {
		return fmt.Sprintf("%s: allow %s to the identity check runs as", code, cloud.IAMAction(operation))
	}
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		return fmt.Sprintf("%s: %s: %s", operation, apiErr.ErrorCode(), apiErr.ErrorMessage())
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "AWS did not answer in time (" + operation + ")"
	}
	return "AWS not reachable or no credentials: " + err.Error()
}
