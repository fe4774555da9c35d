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

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/episode"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/record"
	"lifeboat.dev/lifeboat/internal/source/nodecondition"
	"lifeboat.dev/lifeboat/internal/status"
	"lifeboat.dev/lifeboat/test/sandbox/fakeaws"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// heldCondition is the node's lifeboat.dev/NodeRepairHeld condition, or nil.
func (w *intakeWorld) heldCondition(t *testing.T, ctx context.Context, n *corev1.Node) *corev1.NodeCondition {
	t.Helper()
	return nodes.ConditionOf(w.node(t, ctx, n), nodecondition.ConditionHeld)
}

// waitHeld waits until the node's condition says a breaker holds its repair for reason.
func (w *intakeWorld) waitHeld(t *testing.T, ctx context.Context, n *corev1.Node, reason string) *corev1.NodeCondition {
	t.Helper()
	var c *corev1.NodeCondition
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		c = w.heldCondition(t, ctx, n)
		return c != nil && c.Status == corev1.ConditionTrue && c.Reason == reason, nil
	})
	if err != nil {
		t.Fatalf("%s: condition %+v, want %s True with reason %s", n.Name, c, nodecondition.ConditionHeld, reason)
	}
	return c
}

// untouched reports whether the node is neither cordoned nor recorded.
func (w *intakeWorld) untouchedNode(t *testing.T, ctx context.Context, n *corev1.Node) bool {
	t.Helper()
	got := w.node(t, ctx, n)
	return !got.Spec.Unschedulable && got.Annotations[record.Annotation] == ""
}

// The unhealthy share is counted per node group as well as for the cluster, both rounded up.
// Of 15 nodes, 3 are sick (the cluster's 20 % allows 3): one of the three nodes of the Auto
// Scaling group "small" (its 20 % allows one, rounded up), and both nodes of a node group
// known by its label only (their instances are in no Auto Scaling group). The first is
// repaired; the other two are held by their group's breaker, which the Events, the node
// condition, the metric and `lifeboat status` say. Once one of the two recovers, the other is
// repaired and its condition no longer says held.
func TestNodeRepairBreakerPerGroup(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := newIntakeWorld(t, ctx, 15)
	small, gpu := w.nodes[:3], w.nodes[3:5]
	for i, n := range w.nodes {
		group := "workers"
		switch {
		case i < 3:
			group = "small"
		case i < 5:
			group = ""
			w.updateNode(t, ctx, n, false, func(got *corev1.Node) { got.Labels[nodecondition.LabelEKSNodegroup] = "gpu" })
		}
		w.fake.AddInstance(fakeaws.Instance{ID: episode.InstanceIDOf(n), PrivateDNSName: n.Name, Tags: ourTags, AutoScalingGroup: group})
	}
	longAgo := time.Now().Add(-time.Hour).Truncate(time.Second)
	for _, n := range []*corev1.Node{small[0], gpu[0], gpu[1]} {
		w.setCondition(t, ctx, n, "KernelReady", corev1.ConditionFalse, longAgo)
	}
	w.run(t, ctx, append(repairConditions, "NODE_REPAIR_MAX_UNHEALTHY_PERCENT", "20")...)

	w.waitDrained(t, ctx, small[0], repairID(small[0], "KernelReady"))
	for _, n := range gpu {
		c := w.waitHeld(t, ctx, n, "GroupUnhealthyShare")
		if !strings.Contains(c.Message, "2 of 2 nodes of eks.amazonaws.com/nodegroup=gpu unhealthy, more than the 1") {
			t.Errorf("%s: condition message %q does not name its group's breaker", n.Name, c.Message)
		}
		if got := w.eventCountReaching(t, ctx, n, "NodeRepairHeld", 1); got != 1 {
			t.Errorf("%s: %d NodeRepairHeld Events, want 1", n.Name, got)
		}
		if !w.untouchedNode(t, ctx, n) {
			t.Errorf("%s was touched while its group's breaker is open", n.Name)
		}
	}
	if got := w.metrics.Value("lifeboat_node_repair_breaker_open", "cause", "group_unhealthy_share"); got != 1 {
		t.Errorf("lifeboat_node_repair_breaker_open{cause=group_unhealthy_share} = %v, want 1", got)
	}
	cfg := sandboxtest.Config(t, config.ModeController, append([]string{"QUEUE_URL", w.queueURL, "AWS_REGION", "us-east-1"}, repairConditions...)...)
	report, err := status.Collect(ctx, w.c.Client, cfg, time.Now(), status.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if report.Repairs == nil || report.Repairs.Open || len(report.Repairs.Held) != 2 || !strings.Contains(report.Repairs.Held[0].Reason, "nodegroup=gpu") {
		t.Errorf("status: %+v, want the cluster's breaker closed and both gpu nodes held by their group's", report.Repairs)
	}
	for _, n := range w.nodes[5:] {
		if !w.untouchedNode(t, ctx, n) {
			t.Errorf("healthy %s was touched", n.Name)
		}
	}

	w.setCondition(t, ctx, gpu[0], "KernelReady", corev1.ConditionTrue, time.Now())
	w.waitDrained(t, ctx, gpu[1], repairID(gpu[1], "KernelReady"))
	for _, n := range gpu {
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
			c := w.heldCondition(t, ctx, n)
			return c != nil && c.Status == corev1.ConditionFalse && c.Reason == nodecondition.ReasonNotHeld, nil
		})
		if err != nil {
			t.Errorf("%s: condition %+v still says held", n.Name, w.heldCondition(t, ctx, n))
		}
	}
	if !w.untouchedNode(t, ctx, gpu[0]) {
		t.Error("the recovered gpu node was touched")
	}
}

// NODE_REPAIR_MAX_PER_HOUR bounds the repairs started within an hour: of three sick nodes one
// is repaired, the others are held, and stay held across a restart (the records and repair
// memories on the Nodes count). A tripped breaker blocks no uncordon and no end of an
// episode: the operator takes the repaired node back and its episode ends while the others
// are still held; a held node that recovers no longer says held.
func TestNodeRepairMaxPerHour(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := newIntakeWorld(t, ctx, 4)
	for _, n := range w.nodes {
		w.fake.AddInstance(fakeaws.Instance{ID: episode.InstanceIDOf(n), PrivateDNSName: n.Name, Tags: ourTags, AutoScalingGroup: "workers"})
	}
	sick := w.nodes[:3]
	longAgo := time.Now().Add(-time.Hour).Truncate(time.Second)
	for _, n := range sick {
		w.setCondition(t, ctx, n, "KernelReady", corev1.ConditionFalse, longAgo)
	}
	settings := slices.Concat(repairSettings, []string{"NODE_REPAIR_MAX_PER_HOUR", "1"}) // a copy: other tests append to repairSettings too
	stop := w.run(t, ctx, settings...)

	var repaired *corev1.Node
	var held []*corev1.Node
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		repaired, held = nil, nil
		for _, n := range sick {
			switch c := w.heldCondition(t, ctx, n); {
			case w.phase(t, ctx, n) == record.PhaseDrained:
				repaired = n
			case c != nil && c.Reason == "MaxPerHour":
				held = append(held, n)
			}
		}
		return repaired != nil && len(held) == 2, nil
	})
	if err != nil {
		t.Fatalf("want one node repaired and two held by the rate: repaired %v, held %d", repaired != nil, len(held))
	}
	for _, n := range held {
		if !w.untouchedNode(t, ctx, n) {
			t.Errorf("%s was touched", n.Name)
		}
		if got := w.eventCountReaching(t, ctx, n, "NodeRepairHeld", 1); got != 1 {
			t.Errorf("%s: %d NodeRepairHeld Events, want 1", n.Name, got)
		}
	}
	if got := w.metrics.Value("lifeboat_node_repair_breaker_open", "cause", "max_per_hour"); got != 1 {
		t.Errorf("lifeboat_node_repair_breaker_open{cause=max_per_hour} = %v, want 1", got)
	}

	stop()
	mark := w.logMark()
	w.run(t, ctx, settings...)
	for n, got := range w.lookedAt(t, ctx, mark, held...) {
		if got != nodecondition.LookedNotAdmitted {
			t.Errorf("after a restart, %s: look %s, want %s", n, got, nodecondition.LookedNotAdmitted)
		}
	}
	for _, n := range held {
		if !w.untouchedNode(t, ctx, n) {
			t.Errorf("after a restart, %s was repaired beyond NODE_REPAIR_MAX_PER_HOUR", n.Name)
		}
	}

	// The operator takes the repaired node back: its episode ends, whatever the breaker.
	w.updateNode(t, ctx, repaired, false, func(n *corev1.Node) { n.Spec.Unschedulable = false })
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		r, _ := record.Read(w.node(t, ctx, repaired))
		return !r.Open(), nil
	})
	if err != nil {
		t.Fatal("the repaired node's episode did not end once it was uncordoned, while the breaker held the others")
	}
	if w.node(t, ctx, repaired).Spec.Unschedulable {
		t.Error("the repaired node is cordoned again")
	}
	w.setCondition(t, ctx, held[0], "KernelReady", corev1.ConditionTrue, time.Now())
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		c := w.heldCondition(t, ctx, held[0])
		return c != nil && c.Status == corev1.ConditionFalse, nil
	})
	if err != nil {
		t.Errorf("the recovered node's condition still says held: %+v", w.heldCondition(t, ctx, held[0]))
	}
	// The still-held node, looked at again now that the first one's episode ended:
	mark = w.logMark()
	w.updateNode(t, ctx, held[1], false, func(n *corev1.Node) { n.Labels["example.com/looked-at"] = "again" })
	if got := w.lookedAt(t, ctx, mark, held[1])[held[1].Name]; got != nodecondition.LookedNotAdmitted {
		t.Errorf("the still-held node: look %s, want %s", got, nodecondition.LookedNotAdmitted)
	}
	if !w.untouchedNode(t, ctx, held[1]) {
		t.Error("the still-held node was repaired beyond NODE_REPAIR_MAX_PER_HOUR once the first one's episode ended")
	}
}
