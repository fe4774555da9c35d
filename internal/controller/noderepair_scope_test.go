// SPDX-License-Identifier: Apache-2.0

package controller_test

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"lifeboat.dev/lifeboat/internal/episode"
	"lifeboat.dev/lifeboat/internal/record"
	"lifeboat.dev/lifeboat/internal/source/nodecondition"
	"lifeboat.dev/lifeboat/test/sandbox/fakeaws"
)

// NODE_REPAIR_NODE_SELECTOR limits repair to the nodes it selects: a sick node it selects is
// repaired; a sick node it does not select is left alone, and not counted by the breakers.
func TestNodeRepairNodeSelector(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := newIntakeWorld(t, ctx, 3)
	in, out := w.nodes[0], w.nodes[1]
	for _, n := range w.nodes {
		w.fake.AddInstance(fakeaws.Instance{ID: episode.InstanceIDOf(n), PrivateDNSName: n.Name, Tags: ourTags, AutoScalingGroup: "workers"})
	}
	w.updateNode(t, ctx, in, false, func(n *corev1.Node) { n.Labels["team"] = "ml" })
	longAgo := time.Now().Add(-time.Hour).Truncate(time.Second)
	for _, n := range []*corev1.Node{in, out} {
		w.setCondition(t, ctx, n, "KernelReady", corev1.ConditionFalse, longAgo)
	}
	// Two of three unhealthy would open the breaker at 34 %; one of the two selected does not.
	w.run(t, ctx, "ENABLE_NODE_REPAIR", "true", "NODE_REPAIR_CONDITIONS", "KernelReady=False:3s", "NODE_REPAIR_MAX_UNHEALTHY_PERCENT", "34",
		"NODE_REPAIR_NODE_SELECTOR", "team in (ml, data)")
	w.waitDrained(t, ctx, in, repairID(in, "KernelReady"))
	if got := w.lookedAt(t, ctx, 0, out)[out.Name]; got != nodecondition.LookedNotSelected {
		t.Errorf("the node the selector leaves out: look %s, want %s", got, nodecondition.LookedNotSelected)
	}
	if !w.untouchedNode(t, ctx, out) {
		t.Error("the node the selector leaves out was repaired")
	}
	if got := w.metrics.Value("lifeboat_node_repair_unhealthy_nodes"); got != 1 {
		t.Errorf("lifeboat_node_repair_unhealthy_nodes = %v, want 1 (the node left out is not counted)", got)
	}
}

// A repair's drain that NODE_REPAIR_DRAIN_TIMEOUT ends with pods a disruption budget holds does
// not replace the node: the node stays cordoned with the held pods, the drain is retried and
// said (CordonAndDrainError, naming the budget), the instance is not handed back, and the
// repair keeps its place under NODE_REPAIR_MAX_PARALLEL, so the next sick node waits. Once the
// budget lets the pods go, the drain finishes, the node is replaced, and the next repair starts.
func TestNodeRepairDrainTimeoutWithHeldPods(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	w := newIntakeWorld(t, ctx, 3)
	held, next := w.nodes[0], w.nodes[1]
	for _, n := range w.nodes {
		w.fake.AddInstance(fakeaws.Instance{ID: episode.InstanceIDOf(n), PrivateDNSName: n.Name, Tags: ourTags, AutoScalingGroup: "workers"})
	}
	w.addHeldPods(t, ctx, held)
	w.setCondition(t, ctx, held, "KernelReady", corev1.ConditionFalse, time.Now().Add(-time.Hour).Truncate(time.Second))
	w.run(t, ctx, slices.Concat(repairSettings, []string{"NODE_REPAIR_DRAIN_TIMEOUT", "10s", "NODE_REPAIR_MAX_PARALLEL", "1"})...)

	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		return w.phase(t, ctx, held) == record.PhaseDraining, nil
	})
	if err != nil {
		t.Fatal("the repair's drain did not start")
	}
	w.setCondition(t, ctx, next, "KernelReady", corev1.ConditionFalse, time.Now().Add(-time.Hour).Truncate(time.Second))
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return w.eventCount(t, ctx, held, "CordonAndDrainError") > 0, nil
	})
	if err != nil {
		t.Fatalf("the drain that timed out was not said: events %v", w.nodeEventReasons(t, ctx, held))
	}
	time.Sleep(3 * time.Second) // retries of the drain come and go
	got := w.node(t, ctx, held)
	if !got.Spec.Unschedulable || w.podsOn(t, ctx, held) < 2 {
		t.Errorf("after the timeout: unschedulable %v, %d pods; want the node cordoned with its held pods", got.Spec.Unschedulable, w.podsOn(t, ctx, held))
	}
	if n := w.fake.UnhealthyMarks(episode.InstanceIDOf(held)); n != 0 {
		t.Errorf("the instance was handed back (%d Unhealthy marks) while budget-held pods still ran on it", n)
	}
	w.waitHeld(t, ctx, next, "MaxParallel")
	if !w.untouchedNode(t, ctx, next) {
		t.Error("the next repair started while the held one kept its place")
	}

	if err := w.c.Client.PolicyV1().PodDisruptionBudgets("shop").Delete(ctx, "held", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	w.waitDrained(t, ctx, held, repairID(held, "KernelReady"))
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return w.fake.UnhealthyMarks(episode.InstanceIDOf(held)) == 1, nil
	})
	if err != nil {
		t.Fatal("the held node was not replaced once its pods could go")
	}
	w.waitDrained(t, ctx, next, repairID(next, "KernelReady"))
}

// Where Karpenter's node repair is off (NODE_REPAIR_KARPENTER_REPAIRS=false), a sick node of a
// NodePool is repaired by Lifeboat rather than left to nobody.
func TestNodeRepairKarpenterRepairsOff(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := newIntakeWorld(t, ctx, 2)
	n := w.nodes[0]
	w.fake.AddInstance(fakeaws.Instance{ID: episode.InstanceIDOf(n), PrivateDNSName: n.Name, Tags: ourTags, AutoScalingGroup: "workers"})
	w.updateNode(t, ctx, n, false, func(got *corev1.Node) { got.Labels["karpenter.sh/nodepool"] = "default" })
	w.setCondition(t, ctx, n, "KernelReady", corev1.ConditionFalse, time.Now().Add(-time.Hour).Truncate(time.Second))
	w.run(t, ctx, slices.Concat(repairSettings, []string{"NODE_REPAIR_KARPENTER_REPAIRS", "false"})...)
	w.waitDrained(t, ctx, n, repairID(n, "KernelReady"))
	if got := w.eventCount(t, ctx, n, "NodeRepairLeftToOwner"); got != 0 {
		t.Errorf("%d NodeRepairLeftToOwner Events, want none", got)
	}
}
