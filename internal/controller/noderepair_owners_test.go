// SPDX-License-Identifier: Apache-2.0

package controller_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"lifeboat.dev/lifeboat/internal/episode"
	"lifeboat.dev/lifeboat/internal/source/nodecondition"
	"lifeboat.dev/lifeboat/test/sandbox/fakeaws"
)

// eksLookup is repairSettings with the lookup of managed node groups on (CLUSTER_NAME is the
// world's: sandbox).
var eksLookup = slices.Concat(repairSettings, []string{"NODE_REPAIR_EKS_LOOKUP", "true"})

// inNodegroup puts the nodes' instances in the Auto Scaling group "workers" and labels the
// nodes as EKS labels the nodes of a managed node group.
func (w *intakeWorld) inNodegroup(t *testing.T, ctx context.Context, group string, nodes ...*corev1.Node) {
	t.Helper()
	for _, n := range nodes {
		w.fake.AddInstance(fakeaws.Instance{ID: episode.InstanceIDOf(n), PrivateDNSName: n.Name, Tags: ourTags, AutoScalingGroup: "workers"})
		w.updateNode(t, ctx, n, false, func(got *corev1.Node) { got.Labels["eks.amazonaws.com/nodegroup"] = group })
	}
}

// With NODE_REPAIR_EKS_LOOKUP and no list, EKS says who repairs a managed node group's nodes:
// three sick nodes of a group whose node auto repair is on are left to EKS (no drain, one
// Event each, however often they change) for one DescribeNodegroup; a sick node of a group
// whose repair is off is repaired by Lifeboat. A group the list names is left to EKS without
// asking, and a healthy node's group is never asked about.
func TestNodeRepairLeftToEKSByLookup(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := newIntakeWorld(t, ctx, 6)
	auto, plain, listed, healthy := w.nodes[:3], w.nodes[3], w.nodes[4], w.nodes[5]
	w.inNodegroup(t, ctx, "ng-auto", auto...)
	w.inNodegroup(t, ctx, "ng-plain", plain)
	w.inNodegroup(t, ctx, "ng-listed", listed)
	w.inNodegroup(t, ctx, "ng-healthy", healthy)
	w.fake.PutNodegroup(fakeaws.Nodegroup{Cluster: "sandbox", Name: "ng-auto", AutoRepair: true})
	w.fake.PutNodegroup(fakeaws.Nodegroup{Cluster: "sandbox", Name: "ng-plain"})
	w.fake.PutNodegroup(fakeaws.Nodegroup{Cluster: "sandbox", Name: "ng-listed"}) // the list overrides
	w.fake.PutNodegroup(fakeaws.Nodegroup{Cluster: "sandbox", Name: "ng-healthy", AutoRepair: true})
	longAgo := time.Now().Add(-time.Hour).Truncate(time.Second)
	left := append(slices.Clone(auto), listed)
	for _, n := range append(slices.Clone(left), plain) {
		w.setCondition(t, ctx, n, "KernelReady", corev1.ConditionFalse, longAgo)
	}
	w.run(t, ctx, slices.Concat(eksLookup, []string{"NODE_REPAIR_EKS_AUTO_REPAIRED_NODEGROUPS", "ng-listed"})...)

	w.waitDrained(t, ctx, plain, repairID(plain, "KernelReady"))
	for _, n := range left {
		if got := w.eventCountReaching(t, ctx, n, "NodeRepairLeftToOwner", 1); got != 1 {
			t.Fatalf("%s: %d NodeRepairLeftToOwner Events, want 1", n.Name, got)
		}
	}
	mark := w.logMark()
	for _, n := range left {
		w.setCondition(t, ctx, n, "KernelReady", corev1.ConditionFalse, longAgo) // another update, the same failure
	}
	for n, got := range w.lookedAt(t, ctx, mark, left...) {
		if got != nodecondition.LookedNotAdmitted {
			t.Errorf("%s, left to EKS, looked at again: %s, want %s", n, got, nodecondition.LookedNotAdmitted)
		}
	}
	for _, n := range left {
		if !w.untouchedNode(t, ctx, n) {
			t.Errorf("%s, left to EKS, was cordoned or recorded", n.Name)
		}
		if got := w.eventCountReaching(t, ctx, n, "NodeRepairLeftToOwner", 1); got != 1 {
			t.Errorf("%s: %d NodeRepairLeftToOwner Events, want 1", n.Name, got)
		}
		if got := w.fake.UnhealthyMarks(episode.InstanceIDOf(n)); got != 0 {
			t.Errorf("%s: %d Unhealthy marks, want none", n.Name, got)
		}
	}
	if got := w.fake.NodegroupLookups("sandbox", "ng-auto"); got != 1 {
		t.Errorf("%d DescribeNodegroup calls for the three sick nodes of ng-auto, want 1", got)
	}
	if got := w.fake.NodegroupLookups("sandbox", "ng-plain"); got != 1 {
		t.Errorf("%d DescribeNodegroup calls for ng-plain, want 1", got)
	}
	for _, g := range []string{"ng-listed", "ng-healthy"} {
		if got := w.fake.NodegroupLookups("sandbox", g); got != 0 {
			t.Errorf("%d DescribeNodegroup calls for %s, want none", got, g)
		}
	}
	if got := w.metrics.Value("lifeboat_node_repairs_total", "outcome", "left_to_owner"); got != 4 {
		t.Errorf("lifeboat_node_repairs_total{outcome=left_to_owner} = %v, want 4", got)
	}
	if got := w.metrics.Value("lifeboat_aws_calls_total", "operation", "DescribeNodegroup", "result", "ok"); got != 2 {
		t.Errorf("lifeboat_aws_calls_total{operation=DescribeNodegroup,result=ok} = %v, want 2", got)
	}
}

// EKS refuses DescribeNodegroup (the grant not given): the sick node is not repaired, since
// EKS may repair it, and the refusal is said once and clearly: a Warning Event naming the
// IAM action on the node, the denied metric, a WARN line. The refused call is not repeated
// on every look.
func TestNodeRepairEKSDenied(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := newIntakeWorld(t, ctx, 2)
	sick := w.nodes[0]
	w.inNodegroup(t, ctx, "ng", sick)
	w.fake.PutNodegroup(fakeaws.Nodegroup{Cluster: "sandbox", Name: "ng"})
	w.fake.Deny("eks", "DescribeNodegroup")
	w.setCondition(t, ctx, sick, "KernelReady", corev1.ConditionFalse, time.Now().Add(-time.Hour).Truncate(time.Second))
	w.run(t, ctx, eksLookup...)

	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		return w.eventCount(t, ctx, sick, "NodeRepairOwnerUnknown") > 0 && w.eventCount(t, ctx, sick, "AWSPermissionDenied") > 0, nil
	})
	if err != nil {
		t.Fatalf("the refusal was not said on the node: events %v", w.nodeEventReasons(t, ctx, sick))
	}
	mark := w.logMark()
	w.setCondition(t, ctx, sick, "KernelReady", corev1.ConditionFalse, time.Now().Add(-time.Hour).Truncate(time.Second))
	if got := w.lookedAt(t, ctx, mark, sick)[sick.Name]; got != nodecondition.LookedNotAdmitted {
		t.Errorf("looked at again while EKS cannot answer: %s, want %s", got, nodecondition.LookedNotAdmitted)
	}
	if !w.untouchedNode(t, ctx, sick) {
		t.Error("the node was repaired while EKS could not say whether it repairs it")
	}
	if got := w.fake.UnhealthyMarks(episode.InstanceIDOf(sick)); got != 0 {
		t.Errorf("%d Unhealthy marks, want none", got)
	}
	if got := w.eventCountReaching(t, ctx, sick, "NodeRepairOwnerUnknown", 1); got != 1 {
		t.Errorf("%d NodeRepairOwnerUnknown Events, want 1", got)
	}
	if got := w.fake.NodegroupLookups("sandbox", "ng"); got != 1 {
		t.Errorf("%d DescribeNodegroup calls within seconds, want 1 (a refusal is kept a minute)", got)
	}
	if got := w.metrics.Value("lifeboat_aws_permission_denied_total", "operation", "DescribeNodegroup", "iam_action", "eks:DescribeNodegroup"); got != 1 {
		t.Errorf("lifeboat_aws_permission_denied_total{iam_action=eks:DescribeNodegroup} = %v, want 1", got)
	}
	if got := w.metrics.Value("lifeboat_node_repairs_total", "outcome", "owner_unknown"); got != 1 {
		t.Errorf("lifeboat_node_repairs_total{outcome=owner_unknown} = %v, want 1", got)
	}
	logs := w.logs.String()
	if !strings.Contains(logs, "EKS could not say whether node auto repair repairs the node") || !strings.Contains(logs, "eks:DescribeNodegroup") {
		t.Errorf("the log does not say the lookup was refused and what to grant:\n%s", logs)
	}
}
