// SPDX-License-Identifier: Apache-2.0

package check_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	asgtypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/smithy-go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"lifeboat.dev/lifeboat/internal/check"
	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/output"
)

// fakeGroups answers the two Describe calls from a map of instances to groups and of groups
// to policies, as Auto Scaling does: unknown instances left out, the names asked for only.
type fakeGroups struct {
	groupOf  map[string]string // instance id -> group
	policies map[string]*asgtypes.InstanceMaintenancePolicy
	// instancesErr and groupsErr fail the calls.
	instancesErr, groupsErr   error
	instanceCalls, groupCalls int
}

func (f *fakeGroups) DescribeAutoScalingInstances(_ context.Context, in *autoscaling.DescribeAutoScalingInstancesInput, _ ...func(*autoscaling.Options)) (*autoscaling.DescribeAutoScalingInstancesOutput, error) {
	f.instanceCalls++
	if f.instancesErr != nil {
		return nil, f.instancesErr
	}
	if len(in.InstanceIds) > 50 {
		return nil, &smithy.GenericAPIError{Code: "ValidationError", Message: "more than 50 instance ids"}
	}
	out := &autoscaling.DescribeAutoScalingInstancesOutput{}
	for _, id := range in.InstanceIds {
		if g, ok := f.groupOf[id]; ok {
			out.AutoScalingInstances = append(out.AutoScalingInstances, asgtypes.AutoScalingInstanceDetails{InstanceId: aws.String(id), AutoScalingGroupName: aws.String(g)})
		}
	}
	return out, nil
}

func (f *fakeGroups) DescribeAutoScalingGroups(_ context.Context, in *autoscaling.DescribeAutoScalingGroupsInput, _ ...func(*autoscaling.Options)) (*autoscaling.DescribeAutoScalingGroupsOutput, error) {
	f.groupCalls++
	if f.groupsErr != nil {
		return nil, f.groupsErr
	}
	out := &autoscaling.DescribeAutoScalingGroupsOutput{}
	for _, name := range in.AutoScalingGroupNames {
		out.AutoScalingGroups = append(out.AutoScalingGroups, asgtypes.AutoScalingGroup{AutoScalingGroupName: aws.String(name), InstanceMaintenancePolicy: f.policies[name]})
	}
	return out, nil
}

func policy(minHealthy, maxHealthy int32) *asgtypes.InstanceMaintenancePolicy {
	return &asgtypes.InstanceMaintenancePolicy{MinHealthyPercentage: aws.Int32(minHealthy), MaxHealthyPercentage: aws.Int32(maxHealthy)}
}

// nodesIn makes n nodes whose instances start at first, with provider IDs as EKS sets them.
func nodesIn(first, n int) []corev1.Node {
	var out []corev1.Node
	for i := range n {
		id := fmt.Sprintf("i-%017x", first+i)
		out = append(out, corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-" + id}, Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/" + id}})
	}
	return out
}

// TestCheckGroups: a group with launch before terminating (MinHealthyPercentage 100) keeps its
// capacity through a repair; one with terminate and launch, a custom range or no policy dips by
// one, and gets the command that fixes it. Those are findings only with node repair on.
// Nodes in no group, or naming no instance, are counted, not looked up by group.
func TestCheckGroups(t *testing.T) {
	f := &fakeGroups{groupOf: map[string]string{}, policies: map[string]*asgtypes.InstanceMaintenancePolicy{
		"first":  policy(100, 110),
		"cheap":  policy(90, 100),
		"custom": policy(90, 120),
	}}
	var nodes []corev1.Node
	for i, g := range []string{"first", "cheap", "custom", "bare"} {
		in := nodesIn(i*100, 30) // 120 instances: three DescribeAutoScalingInstances calls
		for _, n := range in {
			f.groupOf[n.Spec.ProviderID[len("aws:///us-east-1a/"):]] = g
		}
		nodes = append(nodes, in...)
	}
	nodes = append(nodes, nodesIn(1000, 2)...)                                             // in no group
	nodes = append(nodes, corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "on-premises"}}) // no instance

	for _, repair := range []bool{false, true} {
		t.Run(fmt.Sprintf("node repair %v", repair), func(t *testing.T) {
			f.instanceCalls, f.groupCalls = 0, 0
			got := check.CheckGroups(context.Background(), nodes, f, check.GroupOptions{NodeRepair: repair, RepairAction: config.RepairMarkUnhealthy})
			if got.NotChecked != "" || got.NodesInNoGroup != 3 || len(got.Groups) != 4 {
				t.Fatalf("%+v", got)
			}
			if f.instanceCalls != 3 || f.groupCalls != 1 {
				t.Errorf("%d DescribeAutoScalingInstances and %d DescribeAutoScalingGroups calls, want 3 and 1", f.instanceCalls, f.groupCalls)
			}
			want := map[string]struct{ replacement, detail string }{
				"first":  {check.ReplacementLaunchFirst, "replacement launched before the node goes"},
				"cheap":  {check.ReplacementTerminateFirst, "capacity dips by one during a repair"},
				"custom": {check.ReplacementTerminateFirst, "capacity can dip by one during a repair"},
				"bare":   {check.ReplacementNoPolicy, "no policy set"},
			}
			for _, g := range got.Groups {
				w := want[g.Name]
				if g.Nodes != 30 || g.Replacement != w.replacement || !strings.Contains(g.Detail, w.detail) {
					t.Errorf("%s: %+v; want %d nodes, %s, detail with %q", g.Name, g, 30, w.replacement, w.detail)
				}
				launchFirst := g.Name == "first"
				const fix = "--instance-maintenance-policy MinHealthyPercentage=100,MaxHealthyPercentage=110"
				if launchFirst == strings.Contains(g.Fix, fix) || !launchFirst && !strings.Contains(g.Fix, "--auto-scaling-group-name "+g.Name+" ") {
					t.Errorf("%s: fix %q", g.Name, g.Fix)
				}
				if g.Finding != (repair && !launchFirst) {
					t.Errorf("%s: finding %v with node repair %v", g.Name, g.Finding, repair)
				}
			}
			if n := got.Findings(); repair && n != 3 || !repair && n != 0 {
				t.Errorf("%d findings with node repair %v", n, repair)
			}
		})
	}

	t.Run("NODE_REPAIR_ACTION=terminate: no group launches first", func(t *testing.T) {
		got := check.CheckGroups(context.Background(), nodes, f, check.GroupOptions{NodeRepair: true, RepairAction: config.RepairTerminate})
		first := got.Groups[slices.IndexFunc(got.Groups, func(g check.Group) bool { return g.Name == "first" })]
		if !first.Finding || !strings.Contains(first.Detail, "NODE_REPAIR_ACTION=terminate") || !strings.Contains(first.Fix, "NODE_REPAIR_ACTION=mark-unhealthy") {
			t.Errorf("%+v", first)
		}
	})
}

// When Auto Scaling cannot be read, the report says why in one line: a denial names the IAM
// action, anything else says AWS was not reached. No group is reported then.
func TestCheckGroupsNotChecked(t *testing.T) {
	denied := &smithy.GenericAPIError{Code: "AccessDenied", Message: "User: arn:aws:iam::1:user/ci is not authorized"}
	cases := []struct {
		name string
		f    *fakeGroups
		want string
	}{
		{"groups denied", &fakeGroups{groupOf: map[string]string{"i-00000000000000000": "g"}, groupsErr: denied}, "AccessDenied: allow autoscaling:DescribeAutoScalingGroups"},
		{"instances denied", &fakeGroups{instancesErr: denied}, "AccessDenied: allow autoscaling:DescribeAutoScalingInstances"},
		{"no answer", &fakeGroups{instancesErr: errors.New("dial tcp 127.0.0.1:1: connect: connection refused")}, "AWS not reachable or no credentials: dial tcp"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := check.CheckGroups(context.Background(), nodesIn(0, 1), c.f, check.GroupOptions{NodeRepair: true})
			if !strings.HasPrefix(got.NotChecked, c.want) || len(got.Groups) != 0 || got.Findings() != 0 || strings.Contains(got.NotChecked, "\n") {
				t.Errorf("%+v; want NotChecked starting %q", got, c.want)
			}
			var table bytes.Buffer
			if err := check.PrintWithGroups(&table, nil, got, output.Format{Name: output.Table}); err != nil ||
				!strings.Contains(table.String(), "Every workload can leave") || !strings.Contains(table.String(), "Auto Scaling groups not checked: "+c.want) {
				t.Errorf("table (%v):\n%s", err, table.String())
			}
		})
	}
}

// The report prints in every format: a second table with the fix, autoscalinggroup/NAME for
// findings, and autoScalingGroups in JSON.
func TestPrintGroups(t *testing.T) {
	f := &fakeGroups{groupOf: map[string]string{"i-00000000000000000": "first", "i-00000000000000001": "bare"},
		policies: map[string]*asgtypes.InstanceMaintenancePolicy{"first": policy(100, 110)}}
	groups := check.CheckGroups(context.Background(), nodesIn(0, 2), f, check.GroupOptions{NodeRepair: true})

	var table bytes.Buffer
	if err := check.PrintWithGroups(&table, nil, groups, output.Format{Name: output.Table}); err != nil {
		t.Fatal(err)
	}
	t.Logf("lifeboat check:\n%s", table.String())
	for _, line := range []string{"AUTO SCALING GROUP", "first               1      min 100 %, max 110 %", "bare                1      none",
		"fix: aws autoscaling update-auto-scaling-group --auto-scaling-group-name bare", "1 groups are one instance short during a node repair, and node repair is on"} {
		if !strings.Contains(table.String(), line) {
			t.Errorf("the table lacks %q", line)
		}
	}
	var names bytes.Buffer
	if err := check.PrintWithGroups(&names, nil, groups, output.Format{Name: output.Name}); err != nil || names.String() != "autoscalinggroup/bare\n" {
		t.Errorf("-o name (%v): %q", err, names.String())
	}
	var js bytes.Buffer
	var decoded check.Report
	if err := check.PrintWithGroups(&js, nil, groups, output.Format{Name: output.JSON}); err != nil || json.Unmarshal(js.Bytes(), &decoded) != nil {
		t.Fatalf("JSON (%v): %s", err, js.String())
	}
	if g := decoded.AutoScalingGroups; g == nil || len(g.Groups) != 2 || g.Groups[0].Name != "bare" || !g.Groups[0].Finding || *g.Groups[1].MinHealthyPercentage != 100 {
		t.Errorf("JSON: %s", js.String())
	}
	var without bytes.Buffer
	if err := check.PrintWithGroups(&without, nil, nil, output.Format{Name: output.JSON}); err != nil || strings.Contains(without.String(), "autoScalingGroups") {
		t.Errorf("JSON without the report (%v): %s", err, without.String())
	}
}
