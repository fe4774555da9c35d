// SPDX-License-Identifier: Apache-2.0

package controller_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/episode"
	"lifeboat.dev/lifeboat/internal/source/nodecondition"
	"lifeboat.dev/lifeboat/test/sandbox/fakeaws"
)

// Policies by condition and reason, before the default policies: a KernelReady whose reason a
// policy repairs after 3 s is repaired; one whose reason a policy leaves alone (action none)
// is neither repaired nor counted unhealthy by the breaker; DiskPressure is never repaired (a
// default); a KernelReady of another reason falls to the default policy (30 minutes), which it
// has held.
func TestNodeRepairPoliciesByReason(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := newIntakeWorld(t, ctx, 5)
	oops, conntrack, disk, other, well := w.nodes[0], w.nodes[1], w.nodes[2], w.nodes[3], w.nodes[4]
	for _, n := range w.nodes {
		w.fake.AddInstance(fakeaws.Instance{ID: episode.InstanceIDOf(n), PrivateDNSName: n.Name, Tags: ourTags, AutoScalingGroup: "workers"})
	}
	longAgo := time.Now().Add(-2 * time.Hour).Truncate(time.Second)
	w.agentSays(t, ctx, oops, "KernelReady", corev1.ConditionFalse, "KernelOops", time.Now().Truncate(time.Second), time.Now(), time.Time{})
	w.agentSays(t, ctx, conntrack, "KernelReady", corev1.ConditionFalse, "ConntrackExceededKernel", longAgo, time.Now(), time.Time{})
	w.agentSays(t, ctx, disk, "DiskPressure", corev1.ConditionTrue, "KubeletHasDiskPressure", longAgo, time.Now(), time.Time{})
	w.agentSays(t, ctx, other, "KernelReady", corev1.ConditionFalse, "ForkFailedOutOfPIDs", longAgo, time.Now(), time.Time{})
	// Two of five unhealthy are allowed at 40 %: counting the conntrack or disk node would
	// open the breaker.
	w.run(t, ctx, "ENABLE_NODE_REPAIR", "true", "NODE_REPAIR_MAX_UNHEALTHY_PERCENT", "40", "NODE_REPAIR_POLICIES", `
- condition: KernelReady
  status: False
  reason: Kernel(Oops|Panic)
  wait: 3s
  action: replace
- condition: KernelReady
  status: False
  reason: Conntrack.*
  action: none
`)
	w.waitDrained(t, ctx, oops, repairID(oops, "KernelReady"))
	w.waitDrained(t, ctx, other, repairID(other, "KernelReady"))
	for n, got := range w.lookedAt(t, ctx, 0, conntrack, disk, well) {
		if got == nodecondition.LookedTaken {
			t.Errorf("%s: its repair was taken", n)
		}
	}
	for _, n := range []*corev1.Node{conntrack, disk, well} {
		if !w.untouchedNode(t, ctx, n) {
			t.Errorf("%s was touched", n.Name)
		}
	}
	if got := w.metrics.Value("lifeboat_node_repair_unhealthy_nodes"); got != 2 {
		t.Errorf("lifeboat_node_repair_unhealthy_nodes = %v, want 2 (the conntrack and disk-pressure nodes are not counted)", got)
	}
	if got := w.metrics.Value("lifeboat_node_repairs_total", "outcome", "started"); got != 2 {
		t.Errorf("lifeboat_node_repairs_total{outcome=started} = %v, want 2", got)
	}
	for _, n := range []*corev1.Node{oops, other} {
		if got := w.fake.UnhealthyMarks(episode.InstanceIDOf(n)); got != 1 {
			t.Errorf("%s: %d Unhealthy marks, want 1", n.Name, got)
		}
	}
}
