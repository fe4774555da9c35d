// SPDX-License-Identifier: Apache-2.0

package controller_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"lifeboat.dev/lifeboat/internal/episode"
	"lifeboat.dev/lifeboat/test/sandbox"
	"lifeboat.dev/lifeboat/test/sandbox/fakeaws"
)

// goDark makes the node's kubelet silent, as a stopped instance's is: the fake kubelet stops
// managing it and the node lifecycle controller's verdict, Ready Unknown, is set on the status
// subresource.
func (w *intakeWorld) goDark(t *testing.T, ctx context.Context, n *corev1.Node) {
	t.Helper()
	w.updateNode(t, ctx, n, false, func(got *corev1.Node) { delete(got.Annotations, sandbox.KwokNodeAnnotation) })
	w.setCondition(t, ctx, n, string(corev1.NodeReady), corev1.ConditionUnknown, time.Now())
}

// A Spot warning for a node whose instance EC2 says is stopped, and whose Ready condition is
// Unknown: its pods go with grace 0, at once, although a disruption budget allows none of them
// to leave, and the fast path is reported. A node merely Ready Unknown while EC2 says its
// instance runs is drained as usual: its budget holds its pods.
func TestDeadInstanceFastPath(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := newIntakeWorld(t, ctx, 2)
	dead, dark := w.nodes[0], w.nodes[1]
	w.addHeldPods(t, ctx, dead)
	w.goDark(t, ctx, dead)
	w.goDark(t, ctx, dark)
	w.fake.SetInstanceState(episode.InstanceIDOf(dead), "stopped")
	w.run(t, ctx)
	start := time.Now()
	w.send(t, ctx, fakeaws.SpotInterruptionWarning(episode.InstanceIDOf(dead), "terminate", time.Now().Add(2*time.Minute)))
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return w.podsOn(t, ctx, dead) == 0, nil
	})
	if err != nil {
		t.Fatalf("%d pods still on the dead node", w.podsOn(t, ctx, dead))
	}
	t.Logf("the dead node's 3 pods were gone %v after the notice", time.Since(start).Round(time.Millisecond))
	if got := w.eventCountReaching(t, ctx, dead, "DeadInstanceFastPath", 1); got != 1 {
		t.Errorf("%d DeadInstanceFastPath Events, want 1", got)
	}
	if got := w.eventCount(t, ctx, dead, "EvictionBlocked"); got != 0 {
		t.Errorf("%d EvictionBlocked Events: an eviction was tried", got)
	}

	// Unreachable but running: no fast path; the budget holds the pods as ever.
	if err := w.c.Client.PolicyV1().PodDisruptionBudgets("shop").Delete(ctx, "held", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	w.addHeldPods(t, ctx, dark)
	w.send(t, ctx, fakeaws.SpotInterruptionWarning(episode.InstanceIDOf(dark), "terminate", time.Now().Add(2*time.Minute)))
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return w.eventCount(t, ctx, dark, "EvictionBlocked") > 0, nil
	})
	if err != nil {
		t.Fatal("the running instance's drain was not held by its budget")
	}
	if got := w.podsOn(t, ctx, dark); got < 2 {
		t.Errorf("%d pods left on the unreachable node, want the 2 its budget holds", got)
	}
	if got := w.metrics.Value("lifeboat_dead_instance_fast_path_total"); got != 1 {
		t.Errorf("lifeboat_dead_instance_fast_path_total = %v, want 1", got)
	}
}
