// SPDX-License-Identifier: Apache-2.0

package controller_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"lifeboat.dev/lifeboat/internal/episode"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/record"
	"lifeboat.dev/lifeboat/internal/source/nodecondition"
	"lifeboat.dev/lifeboat/test/sandbox/fakeaws"
)

// agentSays sets a condition as a node agent does, with its reason, its transition time and
// its heartbeat; Ready's heartbeat, when readyBeat is set, as the kubelet does.
func (w *intakeWorld) agentSays(t *testing.T, ctx context.Context, n *corev1.Node, typ string, status corev1.ConditionStatus, reason string,
	since, beat time.Time, readyBeat time.Time) {
	t.Helper()
	w.updateNode(t, ctx, n, true, func(got *corev1.Node) {
		c := corev1.NodeCondition{Type: corev1.NodeConditionType(typ), Status: status, Reason: reason, Message: "set by the test",
			LastHeartbeatTime: metav1.NewTime(beat), LastTransitionTime: metav1.NewTime(since)}
		if readyBeat.IsZero() {
			readyBeat = time.Now()
		}
		set := false
		for i := range got.Status.Conditions {
			switch got.Status.Conditions[i].Type {
			case c.Type:
				got.Status.Conditions[i], set = c, true
			case corev1.NodeReady:
				got.Status.Conditions[i].LastHeartbeatTime = metav1.NewTime(readyBeat)
			}
		}
		if !set {
			got.Status.Conditions = append(got.Status.Conditions, c)
		}
	})
}

// An agent that restates its condition's transition time with every new reason, under the
// same status, would keep a repair from ever coming due. The repair's wait counts from the
// first transition: the node is repaired although the condition never keeps a transition
// time for the wait, across a restart of the controller too (the clock kept on the Node), and
// each restatement is said with an Event and a metric.
func TestNodeRepairKeepsTheClockOfARestatedCondition(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	w := newIntakeWorld(t, ctx, 2)
	sick, well := w.nodes[0], w.nodes[1]
	w.fake.AddInstance(fakeaws.Instance{ID: episode.InstanceIDOf(sick), PrivateDNSName: sick.Name, Tags: ourTags, AutoScalingGroup: "workers"})
	settings := []string{"ENABLE_NODE_REPAIR", "true", "NODE_REPAIR_CONDITIONS", "KernelReady=False:8s", "NODE_REPAIR_MAX_UNHEALTHY_PERCENT", "100"}
	t0 := time.Now().Truncate(time.Second)
	w.agentSays(t, ctx, sick, "KernelReady", corev1.ConditionFalse, "IPAMDNotReady", t0, time.Now(), time.Time{})
	stop := w.run(t, ctx, settings...)

	id := repairID(sick, "KernelReady")
	testCtx := ctx
	restarted := false
	reasons := []string{"IPAMDRestarted", "IPAMDNoIPs", "IPAMDNotReady"}
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, 40*time.Second, false, func(ctx context.Context) (bool, error) {
		r, _ := record.Read(w.node(t, ctx, sick))
		if r.Has(id) {
			return true, nil
		}
		// The agent restates the transition, two seconds old at most, with a new reason.
		now := time.Now().Truncate(time.Second)
		w.agentSays(t, ctx, sick, "KernelReady", corev1.ConditionFalse, reasons[int(now.Unix())%len(reasons)], now, now, time.Time{})
		if !restarted && time.Since(t0) > 4*time.Second {
			err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
				k, kept := mustRepairMemory(t, w.node(t, ctx, sick)).Clock("KernelReady")
				return kept && k.Since.Equal(t0) && k.Restated.Equal(now), nil
			})
			if err != nil {
				t.Fatal("the restated clock was not kept on the Node")
			}
			stop()
			// The test's context, not the poll's: the poll's ends when the poll does, and the
			// controller started here must outlive it.
			stop = w.run(t, testCtx, settings...)
			restarted = true
			// A restatement made before the new controller has read the node moves the
			// condition while no controller watched, and the kept clock is then rightly not
			// trusted: the next one waits for the new controller's first look at the node.
			if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
				return lookedAfterStart(w.logs.String(), 2, sick.Name), nil
			}); err != nil {
				t.Fatal("the restarted controller never looked at the node")
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatal("the condition restated every two seconds was never repaired")
	}
	// The drain runs on a controller started mid-test: on a loaded machine it may take longer
	// than waitDrained's half minute, so it is given the test's own time.
	err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		r, _ := record.Read(w.node(t, ctx, sick))
		return r.Phase == record.PhaseDrained && r.WorkDone(id, true) && w.podsOn(t, ctx, sick) == 0, nil
	})
	if err != nil {
		t.Fatal("the repaired node was never drained")
	}
	r, _ := record.Read(w.node(t, ctx, sick))
	intent, _ := r.Intent(id)
	if !intent.Start.Equal(t0) || !strings.Contains(intent.Description, "since "+t0.UTC().Format(time.RFC3339)) {
		t.Errorf("the repair counts from %v (%q), want its first transition %v", intent.Start, intent.Description, t0)
	}
	if got := w.eventCountReaching(t, ctx, sick, "NodeConditionRestated", 2); got < 2 {
		t.Errorf("%d NodeConditionRestated Events, want one per restatement seen (at least 2)", got)
	}
	if got := w.metrics.Value("lifeboat_node_condition_restated_total"); got < 2 {
		t.Errorf("lifeboat_node_condition_restated_total = %v, want at least 2", got)
	}
	if !w.untouchedNode(t, ctx, well) {
		t.Error("the healthy node was touched")
	}
}

// lookedAfterStart reports whether node repair looked at the node after the nth start of its
// watch in the controller's log.
func lookedAfterStart(log string, nth int, node string) bool {
	const started = "watching node conditions for repairs"
	at := -1
	for i := 0; i < nth; i++ {
		next := strings.Index(log[at+1:], started)
		if next < 0 {
			return false
		}
		at += 1 + next
	}
	return strings.Contains(log[at:], `msg="node repair looked at the node" source=node-condition node=`+node+" ")
}

// mustRepairMemory is the node's repair memory.
func mustRepairMemory(t *testing.T, n *corev1.Node) record.Repair {
	t.Helper()
	m, err := record.ReadRepair(n)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// A condition that latched (its agent set it once and stopped refreshing it, while the
// kubelet still reports the node Ready) is said stale with an Event and a metric, and not
// repaired. Once its agent refreshes it, it is repaired.
func TestNodeRepairLeavesALatchedCondition(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := newIntakeWorld(t, ctx, 2)
	latched := w.nodes[0]
	w.fake.AddInstance(fakeaws.Instance{ID: episode.InstanceIDOf(latched), PrivateDNSName: latched.Name, Tags: ourTags, AutoScalingGroup: "workers"})
	longAgo := time.Now().Add(-time.Hour).Truncate(time.Second)
	w.agentSays(t, ctx, latched, "NetworkingReady", corev1.ConditionFalse, "IPAMDNotReady", longAgo, longAgo, time.Now())
	w.run(t, ctx, "ENABLE_NODE_REPAIR", "true", "NODE_REPAIR_CONDITIONS", "NetworkingReady=False:3s", "NODE_REPAIR_MAX_UNHEALTHY_PERCENT", "100",
		"NODE_REPAIR_STALE_AFTER", "1m")

	if got := w.eventCountReaching(t, ctx, latched, "NodeConditionStale", 1); got != 1 {
		t.Fatalf("%d NodeConditionStale Events, want 1", got)
	}
	// The kubelet goes on reporting: the node is looked at again, and not said stale again.
	for i := range 3 {
		mark := w.logMark()
		w.updateNode(t, ctx, latched, true, func(n *corev1.Node) {
			if c := nodes.ConditionOf(n, corev1.NodeReady); c != nil {
				c.LastHeartbeatTime = metav1.NewTime(time.Now().Add(time.Duration(i+1) * time.Second))
			}
		})
		if got := w.lookedAt(t, ctx, mark, latched)[latched.Name]; got == nodecondition.LookedTaken {
			t.Fatalf("heartbeat %d: the latched condition's repair was taken", i+1)
		}
	}
	if !w.untouchedNode(t, ctx, latched) {
		t.Fatal("the latched condition was repaired")
	}
	if got := w.eventCountReaching(t, ctx, latched, "NodeConditionStale", 1); got != 1 {
		t.Errorf("%d NodeConditionStale Events, want 1", got)
	}
	if got := w.metrics.Value("lifeboat_node_repairs_total", "outcome", "stale"); got != 1 {
		t.Errorf("lifeboat_node_repairs_total{outcome=stale} = %v, want 1", got)
	}
	if got := w.metrics.Value("lifeboat_node_repairs_total", "outcome", "started"); got != 0 {
		t.Errorf("lifeboat_node_repairs_total{outcome=started} = %v, want 0", got)
	}

	// Its agent refreshes it: it is no longer stale, and is repaired.
	w.agentSays(t, ctx, latched, "NetworkingReady", corev1.ConditionFalse, "IPAMDNotReady", longAgo, time.Now(), time.Now())
	w.waitDrained(t, ctx, latched, repairID(latched, "NetworkingReady"))
}
