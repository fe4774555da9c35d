// SPDX-License-Identifier: Apache-2.0

package controller_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"lifeboat.dev/lifeboat/internal/episode"
	"lifeboat.dev/lifeboat/internal/events"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/ownership"
	"lifeboat.dev/lifeboat/internal/record"
	"lifeboat.dev/lifeboat/internal/source/nodecondition"
	"lifeboat.dev/lifeboat/test/sandbox"
	"lifeboat.dev/lifeboat/test/sandbox/fakeaws"
)

// repairConditions repair KernelReady False for 3 s, NetworkingReady False for an hour.
var repairConditions = []string{"ENABLE_NODE_REPAIR", "true", "NODE_REPAIR_CONDITIONS", "KernelReady=False:3s,NetworkingReady=False:1h"}

// repairSettings are repairConditions without the breaker's share: these small clusters have
// half their nodes unhealthy.
var repairSettings = append(repairConditions, "NODE_REPAIR_MAX_UNHEALTHY_PERCENT", "100")

// setCondition sets a node condition on the status subresource, as a node agent does.
func (w *intakeWorld) setCondition(t *testing.T, ctx context.Context, n *corev1.Node, typ string, status corev1.ConditionStatus, since time.Time) {
	t.Helper()
	w.updateNode(t, ctx, n, true, func(got *corev1.Node) {
		// The message names the write: times are stored to the second, and a write equal to
		// the stored node changes nothing, so a look the test waits for would never come.
		c := corev1.NodeCondition{Type: corev1.NodeConditionType(typ), Status: status, Reason: "AgentSays",
			Message:           "set by the test at " + time.Now().Format(time.RFC3339Nano),
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.NewTime(since)}
		for i := range got.Status.Conditions {
			if string(got.Status.Conditions[i].Type) == typ {
				got.Status.Conditions[i] = c
				return
			}
		}
		got.Status.Conditions = append(got.Status.Conditions, c)
	})
}

// repairID is the repair notice of a node for its condition typ.
func repairID(n *corev1.Node, typ string) string {
	return notice.ID(notice.NodeRepair, episode.InstanceIDOf(n), typ)
}

// Two nodes whose agent says KernelReady=False past its duration are drained and marked
// Unhealthy in their group once each: one failing for long already, one that reaches its
// duration while Lifeboat watches. An instance in no group is drained and left so, with a
// Warning Event. A node whose condition recovers within its duration, one whose condition has
// not held long enough, and a healthy one are not touched.
func TestNodeRepairDrainsAndMarksUnhealthy(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := newIntakeWorld(t, ctx, 6)
	old, fresh, flapping, slow, lonely := w.nodes[0], w.nodes[1], w.nodes[2], w.nodes[3], w.nodes[5]
	for _, n := range w.nodes[:5] {
		w.fake.AddInstance(fakeaws.Instance{ID: episode.InstanceIDOf(n), PrivateDNSName: n.Name, Tags: ourTags, AutoScalingGroup: "workers"})
	}
	longAgo := time.Now().Add(-time.Hour).Truncate(time.Second)
	w.setCondition(t, ctx, old, "KernelReady", corev1.ConditionFalse, longAgo)
	w.setCondition(t, ctx, slow, "NetworkingReady", corev1.ConditionFalse, longAgo.Add(30*time.Minute))
	w.setCondition(t, ctx, lonely, "KernelReady", corev1.ConditionFalse, longAgo)
	w.run(t, ctx, repairSettings...)
	// The watcher takes one node at a time: let it finish the repairs due at once before the
	// fresh and flapping failures, whose 3 s would otherwise pass while it is busy.
	w.waitDrained(t, ctx, old, repairID(old, "KernelReady"))
	w.waitDrained(t, ctx, lonely, repairID(lonely, "KernelReady"))
	w.lookedAt(t, ctx, 0, old, lonely)

	now := time.Now().Truncate(time.Second)
	w.setCondition(t, ctx, fresh, "KernelReady", corev1.ConditionFalse, now)
	w.setCondition(t, ctx, flapping, "KernelReady", corev1.ConditionFalse, now)
	w.lookedAt(t, ctx, 0, flapping) // it saw the failure, and its clock runs
	w.setCondition(t, ctx, flapping, "KernelReady", corev1.ConditionTrue, time.Now())

	w.waitDrained(t, ctx, old, repairID(old, "KernelReady"))
	w.waitDrained(t, ctx, fresh, repairID(fresh, "KernelReady"))
	if took := time.Since(now); took < 3*time.Second {
		t.Errorf("the fresh failure was repaired after %v, before its 3 s", took)
	}
	for _, n := range []*corev1.Node{old, fresh} {
		id := episode.InstanceIDOf(n)
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 15*time.Second, true, func(ctx context.Context) (bool, error) {
			return w.fake.UnhealthyMarks(id) > 0, nil
		})
		if err != nil {
			t.Fatalf("%s: the instance was not marked Unhealthy", n.Name)
		}
	}
	// More node updates come and go: each repair stays one drain and one mark.
	w.setCondition(t, ctx, old, "KernelReady", corev1.ConditionFalse, longAgo)
	for _, n := range []*corev1.Node{old, fresh} {
		w.waitFinished(t, ctx, n, repairID(n, "KernelReady"))
	}
	if got := w.lookedAt(t, ctx, 0, old)[old.Name]; got == nodecondition.LookedTaken {
		t.Errorf("the update of a repaired node's failure was taken as a new repair")
	}
	for _, n := range []*corev1.Node{old, fresh} {
		if got := w.fake.UnhealthyMarks(episode.InstanceIDOf(n)); got != 1 {
			t.Errorf("%s: %d Unhealthy marks, want 1", n.Name, got)
		}
		if got := w.eventCountReaching(t, ctx, n, "DrainStarted", 1); got != 1 {
			t.Errorf("%s: %d drains started, want 1", n.Name, got)
		}
		if got := w.eventCountReaching(t, ctx, n, "NodeRepair", 1); got != 1 {
			t.Errorf("%s: %d NodeRepair Events, want 1", n.Name, got)
		}
	}
	for _, n := range []*corev1.Node{flapping, slow, w.nodes[4]} {
		got := w.node(t, ctx, n)
		if got.Spec.Unschedulable || w.podsOn(t, ctx, n) != 1 || got.Annotations[record.Annotation] != "" {
			t.Errorf("%s was touched: unschedulable %v, %d pods", n.Name, got.Spec.Unschedulable, w.podsOn(t, ctx, n))
		}
	}
	if got := w.metrics.Value("lifeboat_actions_total", "action", "mark_unhealthy", "result", "ok"); got != 2 {
		t.Errorf("lifeboat_actions_total{action=mark_unhealthy,result=ok} = %v, want 2", got)
	}
	w.waitDrained(t, ctx, lonely, repairID(lonely, "KernelReady"))
	if got := w.eventCountReaching(t, ctx, lonely, "RepairInstanceNoGroup", 1); got != 1 {
		t.Errorf("%d RepairInstanceNoGroup Events for the instance in no group, want 1", got)
	}
	if got := w.metrics.Value("lifeboat_actions_total", "action", "mark_unhealthy", "result", "skipped"); got != 1 {
		t.Errorf("lifeboat_actions_total{action=mark_unhealthy,result=skipped} = %v, want 1", got)
	}
	if got := w.fake.UnhealthyMarks(episode.InstanceIDOf(lonely)); got != 0 {
		t.Errorf("the instance in no group was marked Unhealthy %d times", got)
	}
}

// With NODE_REPAIR_ACTION=terminate, a repaired node's instance is terminated once, and not
// marked Unhealthy.
func TestNodeRepairTerminates(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := newIntakeWorld(t, ctx, 2)
	sick, well := w.nodes[0], w.nodes[1]
	w.fake.AddInstance(fakeaws.Instance{ID: episode.InstanceIDOf(sick), PrivateDNSName: sick.Name, Tags: ourTags, AutoScalingGroup: "workers"})
	w.setCondition(t, ctx, sick, "AcceleratedHardwareReady", corev1.ConditionFalse, time.Now().Add(-20*time.Minute))
	w.run(t, ctx, "ENABLE_NODE_REPAIR", "true", "NODE_REPAIR_ACTION", "terminate", "NODE_REPAIR_MAX_UNHEALTHY_PERCENT", "50") // the default conditions
	w.waitDrained(t, ctx, sick, repairID(sick, "AcceleratedHardwareReady"))
	id := episode.InstanceIDOf(sick)
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 15*time.Second, true, func(ctx context.Context) (bool, error) {
		return w.fake.Terminations(id) > 0, nil
	})
	if err != nil {
		t.Fatal("the repaired instance was not terminated")
	}
	w.waitFinished(t, ctx, sick, repairID(sick, "AcceleratedHardwareReady"))
	if got := w.fake.Terminations(id); got != 1 {
		t.Errorf("%d terminations, want 1", got)
	}
	if got := w.fake.UnhealthyMarks(id); got != 0 {
		t.Errorf("%d Unhealthy marks, want none", got)
	}
	if got := w.eventCountReaching(t, ctx, sick, "RepairInstanceTerminated", 1); got != 1 {
		t.Errorf("%d RepairInstanceTerminated Events, want 1", got)
	}
	if w.node(t, ctx, well).Spec.Unschedulable {
		t.Error("the healthy node was cordoned")
	}
}

// With 70 % of the nodes unhealthy and a 30 % breaker, no repair starts, and the breaker
// says so (Events on the held nodes, its metric, the log). Once enough nodes recover, the
// repairs of those still failing start, but for the node an operator vetoed.
func TestNodeRepairBreaker(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := newIntakeWorld(t, ctx, 10)
	for _, n := range w.nodes {
		w.fake.AddInstance(fakeaws.Instance{ID: episode.InstanceIDOf(n), PrivateDNSName: n.Name, Tags: ourTags, AutoScalingGroup: "workers"})
	}
	longAgo := time.Now().Add(-time.Hour).Truncate(time.Second)
	sick := w.nodes[:7]
	for _, n := range sick {
		w.setCondition(t, ctx, n, "KernelReady", corev1.ConditionFalse, longAgo)
	}
	vetoed := sick[1]
	w.updateNode(t, ctx, vetoed, false, func(n *corev1.Node) { n.Annotations["lifeboat.dev/node-repair"] = "disabled" })
	w.run(t, ctx, append(repairConditions, "NODE_REPAIR_MAX_UNHEALTHY_PERCENT", "30")...)

	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		return w.metrics.Value("lifeboat_node_repair_breaker_open", "cause", "unhealthy_share") == 1 &&
			w.eventCount(t, ctx, sick[0], "NodeRepairHeld") > 0, nil
	})
	if err != nil {
		t.Fatalf("the breaker did not say it is open: metric %v", w.metrics.Value("lifeboat_node_repair_breaker_open", "cause", "unhealthy_share"))
	}
	for n, got := range w.lookedAt(t, ctx, 0, w.nodes...) {
		if got == nodecondition.LookedTaken {
			t.Errorf("%s: its repair was taken while the breaker is open", n)
		}
	}
	for _, n := range w.nodes {
		if got := w.node(t, ctx, n); got.Spec.Unschedulable || got.Annotations[record.Annotation] != "" {
			t.Errorf("%s was touched while the breaker is open", n.Name)
		}
	}
	if got := w.metrics.Value("lifeboat_node_repair_unhealthy_nodes"); got != 7 {
		t.Errorf("lifeboat_node_repair_unhealthy_nodes = %v, want 7", got)
	}
	if !strings.Contains(w.logs.String(), "node repair breaker open") {
		t.Error("the log does not say the breaker is open")
	}
	if got := w.eventCountReaching(t, ctx, vetoed, "NodeRepairVetoed", 1); got != 1 {
		t.Errorf("%d NodeRepairVetoed Events on the vetoed node, want 1", got)
	}

	// Five recover: 2 of 10 are unhealthy, under 30 %. The one not vetoed is repaired.
	for _, n := range sick[2:] {
		w.setCondition(t, ctx, n, "KernelReady", corev1.ConditionTrue, time.Now())
	}
	w.waitDrained(t, ctx, sick[0], repairID(sick[0], "KernelReady"))
	if got := w.metrics.Value("lifeboat_node_repair_breaker_open", "cause", "unhealthy_share"); got != 0 {
		t.Errorf("the breaker still says open: %v", got)
	}
	if got := w.node(t, ctx, vetoed); got.Spec.Unschedulable || got.Annotations[record.Annotation] != "" {
		t.Errorf("the vetoed node was touched")
	}
	if got := w.metrics.Value("lifeboat_node_repairs_total", "outcome", "started"); got != 1 {
		t.Errorf("lifeboat_node_repairs_total{outcome=started} = %v, want 1", got)
	}
}

// A controller stopped in the middle of a repair (its drain held by a disruption budget) and
// a new one started: the repair is neither repeated nor lost. One notice on the record, one
// NodeRepair Event, one Unhealthy mark once the budget lets the pods go.
func TestNodeRepairSurvivesRestart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := newIntakeWorld(t, ctx, 2)
	n := w.nodes[0]
	w.fake.AddInstance(fakeaws.Instance{ID: episode.InstanceIDOf(n), PrivateDNSName: n.Name, Tags: ourTags, AutoScalingGroup: "workers"})
	w.addHeldPods(t, ctx, n)
	w.setCondition(t, ctx, n, "KernelReady", corev1.ConditionFalse, time.Now().Add(-time.Hour))
	stop := w.run(t, ctx, repairSettings...)
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		return w.phase(t, ctx, n) == record.PhaseDraining && w.eventCount(t, ctx, n, "EvictionBlocked") > 0, nil
	})
	if err != nil {
		t.Fatalf("the repair's drain did not start: phase %v", w.phase(t, ctx, n))
	}
	stop()
	mark := w.logMark()
	w.run(t, ctx, repairSettings...)
	w.lookedAt(t, ctx, mark, n) // the new controller found the repair recorded before the budget lets go
	if err := w.c.Client.PolicyV1().PodDisruptionBudgets("shop").Delete(ctx, "held", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	id := repairID(n, "KernelReady")
	w.waitDrained(t, ctx, n, id)
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 15*time.Second, true, func(ctx context.Context) (bool, error) {
		return w.fake.UnhealthyMarks(episode.InstanceIDOf(n)) > 0, nil
	})
	if err != nil {
		t.Fatal("the repair was lost: the instance was not marked Unhealthy")
	}
	w.waitFinished(t, ctx, n, id)
	r, _ := record.Read(w.node(t, ctx, n))
	if len(r.Notices) != 1 || r.Notices[0] != id {
		t.Errorf("record notices %v, want only %s", r.Notices, id)
	}
	if got := w.fake.UnhealthyMarks(episode.InstanceIDOf(n)); got != 1 {
		t.Errorf("%d Unhealthy marks, want 1", got)
	}
	if got := w.eventCountReaching(t, ctx, n, "NodeRepair", 1); got != 1 {
		t.Errorf("%d NodeRepair Events, want 1", got)
	}
	if got := w.eventCountReaching(t, ctx, n, "CordonAndDrain", 1); got != 1 {
		t.Errorf("%d drained Events, want 1", got)
	}
}

// An operator who takes a repaired node back (uncordons it, still sick) is heard across a
// restart: the new controller ends the episode and does not repair the node again during the
// same spell, whether it saw the episode open (TestNodeRepairMaxPerHour) or, as here, the
// uncordon came while no controller ran. A later spell of the condition is repaired.
func TestNodeRepairTakenBackStaysTakenBack(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := newIntakeWorld(t, ctx, 2)
	n := w.nodes[0]
	w.fake.AddInstance(fakeaws.Instance{ID: episode.InstanceIDOf(n), PrivateDNSName: n.Name, Tags: ourTags, AutoScalingGroup: "workers"})
	w.setCondition(t, ctx, n, "KernelReady", corev1.ConditionFalse, time.Now().Add(-time.Hour))
	id := repairID(n, "KernelReady")
	stop := w.run(t, ctx, repairSettings...)
	w.waitDrained(t, ctx, n, id)
	w.waitFinished(t, ctx, n, id)
	stop()

	w.updateNode(t, ctx, n, false, func(n *corev1.Node) { n.Spec.Unschedulable = false })
	stop = w.run(t, ctx, repairSettings...)
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		r, _ := record.Read(w.node(t, ctx, n))
		return !r.Open(), nil
	})
	if err != nil {
		t.Fatal("the taken-back node's episode did not end")
	}
	mark := w.logMark()
	w.updateNode(t, ctx, n, false, func(n *corev1.Node) { n.Labels["example.com/looked-at"] = "again" })
	if got := w.lookedAt(t, ctx, mark, n)[n.Name]; got != nodecondition.LookedAlready {
		t.Errorf("the taken-back node: look %s, want %s", got, nodecondition.LookedAlready)
	}
	if w.node(t, ctx, n).Spec.Unschedulable {
		t.Error("the taken-back node was cordoned again")
	}
	if got := w.eventCountReaching(t, ctx, n, "NodeRepair", 1); got != 1 {
		t.Errorf("%d NodeRepair Events, want 1", got)
	}
	if got := w.fake.UnhealthyMarks(episode.InstanceIDOf(n)); got != 1 {
		t.Errorf("%d Unhealthy marks, want 1", got)
	}

	// The condition clears, then fails again: a new spell, repaired.
	mark = w.logMark()
	w.setCondition(t, ctx, n, "KernelReady", corev1.ConditionTrue, time.Now())
	w.lookedAt(t, ctx, mark, n) // seen healthy: what follows is a new spell, not a restatement
	w.setCondition(t, ctx, n, "KernelReady", corev1.ConditionFalse, time.Now().Add(-30*time.Minute))
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		return w.fake.UnhealthyMarks(episode.InstanceIDOf(n)) == 2, nil
	})
	if err != nil {
		t.Errorf("a later spell of the condition was not repaired: %d Unhealthy marks, want 2", w.fake.UnhealthyMarks(episode.InstanceIDOf(n)))
	}
	stop()
}

// A node of a Karpenter NodePool, and one of an EKS managed node group named as auto
// repaired, are left to their own repair with one Event each; a node of a managed node group
// not named, failing the same way, is repaired.
func TestNodeRepairLeavesOthersNodes(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := newIntakeWorld(t, ctx, 3)
	karpenter, eks, ours := w.nodes[0], w.nodes[1], w.nodes[2]
	labels := map[*corev1.Node][2]string{karpenter: {"karpenter.sh/nodepool", "default"}, eks: {"eks.amazonaws.com/nodegroup", "ng-repaired"},
		ours: {"eks.amazonaws.com/nodegroup", "ng-plain"}}
	since := time.Now().Add(-time.Hour).Truncate(time.Second)
	for n, l := range labels {
		w.fake.AddInstance(fakeaws.Instance{ID: episode.InstanceIDOf(n), PrivateDNSName: n.Name, Tags: ourTags, AutoScalingGroup: "workers"})
		w.updateNode(t, ctx, n, false, func(got *corev1.Node) { got.Labels[l[0]] = l[1] })
		w.setCondition(t, ctx, n, "KernelReady", corev1.ConditionFalse, since)
	}
	w.run(t, ctx, append(repairSettings, "NODE_REPAIR_EKS_AUTO_REPAIRED_NODEGROUPS", "ng-repaired")...)
	w.waitDrained(t, ctx, ours, repairID(ours, "KernelReady"))
	w.setCondition(t, ctx, karpenter, "KernelReady", corev1.ConditionFalse, since) // another update, the same failure
	for n, got := range w.lookedAt(t, ctx, 0, karpenter, eks) {
		if got != nodecondition.LookedNotAdmitted {
			t.Errorf("%s: look %s, want %s (left to its owner)", n, got, nodecondition.LookedNotAdmitted)
		}
	}
	for _, n := range []*corev1.Node{karpenter, eks} {
		if got := w.node(t, ctx, n); got.Spec.Unschedulable || got.Annotations[record.Annotation] != "" {
			t.Errorf("%s was touched", n.Name)
		}
		if got := w.eventCountReaching(t, ctx, n, "NodeRepairLeftToOwner", 1); got != 1 {
			t.Errorf("%s: %d NodeRepairLeftToOwner Events, want 1", n.Name, got)
		}
	}
	if got := w.metrics.Value("lifeboat_node_repairs_total", "outcome", "left_to_owner"); got != 2 {
		t.Errorf("lifeboat_node_repairs_total{outcome=left_to_owner} = %v, want 2", got)
	}
}

// The attack of two stolen kubelet credentials on node repair: two nodes that registered
// without a providerID set it to other nodes' instances and report KernelReady=False, an hour
// old, on their own status. One victim vetoes repair, the other does not. A third node is
// sick. Only the sick node is repaired; neither victim nor claimant is cordoned, drained or
// marked Unhealthy, and a Warning Event on each claimant names the refused claim.
func TestNodeRepairRefusesForgedClaims(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := newIntakeWorld(t, ctx, 3)
	victim, vetoed, sick := w.nodes[0], w.nodes[1], w.nodes[2]
	for _, n := range w.nodes {
		w.fake.AddInstance(fakeaws.Instance{ID: episode.InstanceIDOf(n), PrivateDNSName: n.Name, Tags: ourTags, AutoScalingGroup: "workers"})
	}
	w.updateNode(t, ctx, vetoed, false, func(n *corev1.Node) { n.Annotations[nodecondition.AnnotationVeto] = nodecondition.VetoValue })
	claimants, err := w.c.AddNodes(ctx, sandbox.NodeSpec{Index: 10, NoProviderID: true}, sandbox.NodeSpec{Index: 11, NoProviderID: true})
	if err != nil {
		t.Fatal(err)
	}
	longAgo := time.Now().Add(-time.Hour)
	for i, claimant := range claimants {
		own := sandbox.NodeSpec{Index: 10 + i}
		w.fake.AddInstance(fakeaws.Instance{ID: ownership.InstanceIDFromProviderID(own.ProviderID()), PrivateDNSName: claimant.Name, Tags: ourTags, AutoScalingGroup: "workers"})
		target := []*corev1.Node{victim, vetoed}[i]
		kubelet := nodeCredential(t, w.c, claimant.Name)
		patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"providerID": target.Spec.ProviderID}})
		if _, err := kubelet.CoreV1().Nodes().Patch(ctx, claimant.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatalf("the claimant's credential could not set its providerID: %v", err)
		}
		got, err := kubelet.CoreV1().Nodes().Get(ctx, claimant.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got.Status.Conditions = append(got.Status.Conditions, corev1.NodeCondition{Type: "KernelReady", Status: corev1.ConditionFalse, Reason: "Forged",
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.NewTime(longAgo)})
		if _, err := kubelet.CoreV1().Nodes().UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("the claimant's credential could not set its condition: %v", err)
		}
	}
	w.setCondition(t, ctx, sick, "KernelReady", corev1.ConditionFalse, longAgo)
	w.run(t, ctx, repairSettings...)

	w.waitDrained(t, ctx, sick, repairID(sick, "KernelReady"))
	for _, claimant := range claimants {
		if got := w.eventCountReaching(t, ctx, claimant, events.ReasonClaimRefused, 1); got < 1 {
			t.Errorf("%s: no %s Event for its forged claim", claimant.Name, events.ReasonClaimRefused)
		}
	}
	w.lookedAt(t, ctx, 0, append([]*corev1.Node{victim, vetoed}, claimants...)...) // what they asked was decided
	for _, n := range append([]*corev1.Node{victim, vetoed}, claimants...) {
		got := w.node(t, ctx, n)
		if got.Spec.Unschedulable || got.Annotations[record.Annotation] != "" {
			t.Errorf("%s was acted on: unschedulable %v, record %q", n.Name, got.Spec.Unschedulable, got.Annotations[record.Annotation])
		}
	}
	for _, n := range []*corev1.Node{victim, vetoed} {
		if w.podsOn(t, ctx, n) != 1 || w.fake.UnhealthyMarks(episode.InstanceIDOf(n)) != 0 {
			t.Errorf("victim %s: %d pods, %d Unhealthy marks; want its pod and none", n.Name, w.podsOn(t, ctx, n), w.fake.UnhealthyMarks(episode.InstanceIDOf(n)))
		}
	}
	if got := w.fake.UnhealthyMarks(episode.InstanceIDOf(sick)); got != 1 {
		t.Errorf("the sick node's instance: %d Unhealthy marks, want 1", got)
	}
	if got := w.metrics.Value("lifeboat_instance_claims_refused_total", "path", "node_condition"); got < 2 {
		t.Errorf("lifeboat_instance_claims_refused_total{path=node_condition} = %v, want at least 2", got)
	}
	// A refused repair is not a repair started: the breaker does not count it running.
	if got := w.metrics.Value("lifeboat_node_repairs_total", "outcome", "started"); got != 1 {
		t.Errorf("lifeboat_node_repairs_total{outcome=started} = %v, want 1 (the sick node's)", got)
	}
}

// nodeCredential is a client with a node's kubelet credential.
func nodeCredential(t *testing.T, c *sandbox.Cluster, node string) kubernetes.Interface {
	t.Helper()
	rc, err := c.UserConfig("system:node:"+node, "system:nodes")
	if err != nil {
		t.Fatal(err)
	}
	return kubernetes.NewForConfigOrDie(rc)
}

// A node agent's long condition message in multi-byte characters is recorded cut on a
// character boundary: the record reads back, and the node is drained and marked, not left
// cordoned with a record nothing can read.
func TestNodeRepairLongMultiByteMessage(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := newIntakeWorld(t, ctx, 1)
	sick := w.nodes[0]
	w.fake.AddInstance(fakeaws.Instance{ID: episode.InstanceIDOf(sick), PrivateDNSName: sick.Name, Tags: ourTags, AutoScalingGroup: "workers"})
	w.updateNode(t, ctx, sick, true, func(n *corev1.Node) {
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: "KernelReady", Status: corev1.ConditionFalse, Reason: "KernelBug",
			Message: "a" + strings.Repeat("内核模块加载失败，", 60), LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.NewTime(time.Now().Add(-time.Hour))})
	})
	w.run(t, ctx, repairSettings...)
	w.waitDrained(t, ctx, sick, repairID(sick, "KernelReady"))
	rec, err := record.Read(w.node(t, ctx, sick))
	if err != nil {
		t.Fatalf("the record does not read back: %v", err)
	}
	if d := rec.Intents[0].Description; !strings.Contains(d, "内核") || !strings.HasSuffix(d, "…") {
		t.Errorf("recorded description %q, want the message cut with a mark", d)
	}
	if got := w.metrics.Value("lifeboat_invalid_records_total"); got != 0 {
		t.Errorf("lifeboat_invalid_records_total = %v, want 0", got)
	}
}
