// SPDX-License-Identifier: Apache-2.0

package controller_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"lifeboat.dev/lifeboat/internal/episode"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/record"
	"lifeboat.dev/lifeboat/internal/source/nodecondition"
	"lifeboat.dev/lifeboat/test/sandbox/fakeaws"
)

// rebootPolicy reboots a node whose AcceleratedHardwareReady is False for 2 s.
const rebootPolicy = `[{condition: AcceleratedHardwareReady, status: "False", wait: 2s, action: reboot}]`

// rebootWorld is a node with a GPU condition False for an hour, its instance in a group, and
// a boot id the reboot will change.
func rebootWorld(t *testing.T, ctx context.Context) (*intakeWorld, *corev1.Node) {
	t.Helper()
	w := newIntakeWorld(t, ctx, 2)
	n := w.nodes[0]
	w.fake.AddInstance(fakeaws.Instance{ID: episode.InstanceIDOf(n), PrivateDNSName: n.Name, Tags: ourTags, AutoScalingGroup: "workers"})
	w.updateNode(t, ctx, n, true, func(got *corev1.Node) { got.Status.NodeInfo.BootID = "boot-1" })
	w.setCondition(t, ctx, n, "AcceleratedHardwareReady", corev1.ConditionFalse, time.Now().Add(-time.Hour).Truncate(time.Second))
	return w, n
}

// waitRebooted waits until the node is drained for its reboot and EC2 was asked to reboot it,
// then plays the reboot: the node comes back with a new boot id.
func (w *intakeWorld) waitRebooted(t *testing.T, ctx context.Context, n *corev1.Node) {
	t.Helper()
	w.waitDrained(t, ctx, n, notice.ID(notice.NodeRepair, episode.InstanceIDOf(n), "reboot-AcceleratedHardwareReady"))
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		b := mustRepairMemory(t, w.node(t, ctx, n)).Reboot
		return w.fake.Reboots(episode.InstanceIDOf(n)) == 1 && b != nil && !b.Rebooted.IsZero(), nil
	})
	if err != nil {
		t.Fatalf("the drained node was not rebooted, or the reboot not recorded: %d reboots, memory %+v", w.fake.Reboots(episode.InstanceIDOf(n)),
			mustRepairMemory(t, w.node(t, ctx, n)))
	}
	if got := w.eventCountReaching(t, ctx, n, "NodeRepairRebooted", 1); got != 1 {
		t.Errorf("%d NodeRepairRebooted Events, want 1", got)
	}
	w.updateNode(t, ctx, n, true, func(got *corev1.Node) { got.Status.NodeInfo.BootID = "boot-2" })
	// The boot ends the reboot's episode: the node is schedulable again.
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		got := w.node(t, ctx, n)
		r, _ := record.Read(got)
		return !r.Open() && !got.Spec.Unschedulable, nil
	})
	if err != nil {
		t.Fatal("the reboot's episode did not end with the new boot")
	}
}

// A policy that reboots: the node is drained and rebooted (RebootInstances, once), its
// condition clears after the boot, and it is released without a replacement; the reboot step
// is said at each step and then forgotten.
func TestNodeRepairRebootRecovers(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w, n := rebootWorld(t, ctx)
	w.run(t, ctx, "ENABLE_NODE_REPAIR", "true", "NODE_REPAIR_MAX_UNHEALTHY_PERCENT", "100", "NODE_REPAIR_POLICIES", rebootPolicy,
		// Long enough for the test to play the boot and clear the condition on a loaded
		// machine (8 s from the reboot once): a wait that runs out first replaces the node.
		"NODE_REPAIR_REBOOT_WAIT", "45s")
	w.waitRebooted(t, ctx, n)
	w.setCondition(t, ctx, n, "AcceleratedHardwareReady", corev1.ConditionTrue, time.Now())

	if got := w.eventCountReaching(t, ctx, n, "NodeRepairRecovered", 1); got != 1 {
		t.Fatalf("%d NodeRepairRecovered Events, want 1", got)
	}
	// The ladder is over once its step is forgotten; a look at the recovered node after that
	// finds nothing due, so no replacement can start.
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		return mustRepairMemory(t, w.node(t, ctx, n)).Reboot == nil, nil
	})
	if err != nil {
		t.Errorf("the reboot step is still remembered: %+v", mustRepairMemory(t, w.node(t, ctx, n)).Reboot)
	}
	if got := w.lookedAt(t, ctx, 0, n)[n.Name]; got != nodecondition.LookedNotDue {
		t.Errorf("the recovered node: look %s, want %s", got, nodecondition.LookedNotDue)
	}
	id := episode.InstanceIDOf(n)
	if got := w.node(t, ctx, n); got.Spec.Unschedulable || got.Annotations[record.Annotation] != "" && w.phase(t, ctx, n) != record.PhaseNone {
		t.Errorf("the recovered node is held: unschedulable %v, phase %v", got.Spec.Unschedulable, w.phase(t, ctx, n))
	}
	if w.fake.UnhealthyMarks(id) != 0 || w.fake.Terminations(id) != 0 || w.fake.Reboots(id) != 1 {
		t.Errorf("%d Unhealthy marks, %d terminations, %d reboots; want 0, 0, 1", w.fake.UnhealthyMarks(id), w.fake.Terminations(id), w.fake.Reboots(id))
	}
	if got := w.metrics.Value("lifeboat_node_repairs_total", "outcome", "recovered"); got != 1 {
		t.Errorf("lifeboat_node_repairs_total{outcome=recovered} = %v, want 1", got)
	}
	if got := w.metrics.Value("lifeboat_actions_total", "action", "reboot_instance", "result", "ok"); got != 1 {
		t.Errorf("lifeboat_actions_total{action=reboot_instance,result=ok} = %v, want 1", got)
	}
}

// A policy that reboots, a node still sick after its reboot: a new controller (a restart
// after the reboot) goes on from the reboot recorded on the Node, does not reboot again, and
// replaces the node once NODE_REPAIR_REBOOT_WAIT has passed, saying why.
func TestNodeRepairRebootThenReplace(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w, n := rebootWorld(t, ctx)
	settings := []string{"ENABLE_NODE_REPAIR", "true", "NODE_REPAIR_MAX_UNHEALTHY_PERCENT", "100", "NODE_REPAIR_POLICIES", rebootPolicy,
		"NODE_REPAIR_REBOOT_WAIT", "6s"}
	stop := w.run(t, ctx, settings...)
	w.waitRebooted(t, ctx, n)
	rebooted := mustRepairMemory(t, w.node(t, ctx, n)).Reboot.Rebooted
	stop()
	w.run(t, ctx, settings...)

	w.waitDrained(t, ctx, n, repairID(n, "AcceleratedHardwareReady"))
	id := episode.InstanceIDOf(n)
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 15*time.Second, true, func(ctx context.Context) (bool, error) {
		return w.fake.UnhealthyMarks(id) > 0, nil
	})
	if err != nil {
		t.Fatal("the node still sick after its reboot was not replaced")
	}
	if since := w.fake.Calls(); len(since) > 0 {
		for _, c := range since {
			if c.Action == "SetInstanceHealth" && c.At.Before(rebooted.Add(6*time.Second)) {
				t.Errorf("replaced at %v, before NODE_REPAIR_REBOOT_WAIT after the reboot at %v", c.At, rebooted)
			}
		}
	}
	if got := w.fake.Reboots(id); got != 1 {
		t.Errorf("%d reboots, want 1: the new controller rebooted again", got)
	}
	if got := w.eventCountReaching(t, ctx, n, "NodeRepairEscalated", 1); got != 1 {
		t.Errorf("%d NodeRepairEscalated Events, want 1", got)
	}
	if got := w.metrics.Value("lifeboat_node_repairs_total", "outcome", "escalated"); got != 1 {
		t.Errorf("lifeboat_node_repairs_total{outcome=escalated} = %v, want 1", got)
	}
	if got := w.eventCount(t, ctx, n, "NodeRepairRecovered"); got != 0 {
		t.Errorf("%d NodeRepairRecovered Events for a node that did not recover", got)
	}
}

// A reboot that AWS refuses for want of permission (ec2:RebootInstances is opt-in) does not
// hold the repair: the failure is said and recorded, and the node is replaced at once.
func TestNodeRepairRebootDeniedReplaces(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w, n := rebootWorld(t, ctx)
	w.fake.SetFault(fakeaws.Fault{Service: "ec2", Action: "RebootInstances", Status: 403, Code: "UnauthorizedOperation"})
	w.run(t, ctx, "ENABLE_NODE_REPAIR", "true", "NODE_REPAIR_MAX_UNHEALTHY_PERCENT", "100", "NODE_REPAIR_POLICIES", rebootPolicy,
		"NODE_REPAIR_REBOOT_WAIT", "1h")
	id := episode.InstanceIDOf(n)
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return w.fake.UnhealthyMarks(id) > 0, nil
	})
	if err != nil {
		t.Fatalf("the node whose reboot was refused was not replaced: memory %+v", mustRepairMemory(t, w.node(t, ctx, n)))
	}
	if b := mustRepairMemory(t, w.node(t, ctx, n)).Reboot; b == nil || b.Failed == "" || !b.Rebooted.IsZero() {
		t.Errorf("reboot step %+v, want it failed", b)
	}
	if got := w.eventCountReaching(t, ctx, n, "NodeRepairRebootFailed", 1); got != 1 {
		t.Errorf("%d NodeRepairRebootFailed Events, want 1", got)
	}
	if got := w.eventCountReaching(t, ctx, n, "NodeRepairEscalated", 1); got != 1 {
		t.Errorf("%d NodeRepairEscalated Events, want 1", got)
	}
}
