// SPDX-License-Identifier: Apache-2.0

package controller_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"lifeboat.dev/lifeboat/internal/episode"
	"lifeboat.dev/lifeboat/internal/events"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/record"
	"lifeboat.dev/lifeboat/test/sandbox/fakeaws"
)

// A Spot warning's deadline passes with a pod still terminating (its evicted copy is held by a
// finalizer, as pods on a node whose kubelet is gone stay until the node is deleted). The
// drain that met the deadline says so once; the node is not drained again every half minute
// (a read, a claim and two Events each time, per node) while only terminations are left; it
// is drained, and its notice finished, as soon as the pod is gone.
func TestPastDeadlineOnlyTerminatingPodsLeft(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := newIntakeWorld(t, ctx, 1)
	n := w.nodes[0]
	const hold = "test.lifeboat.dev/hold"
	w.addPolicyPod(t, ctx, n, "held", func(p *corev1.Pod) { p.Finalizers = []string{hold} })

	// Warned 116 s ago: the instance goes 4 s from now.
	instance := episode.InstanceIDOf(n)
	w.send(t, ctx, fakeaws.SpotInterruptionWarning(instance, "terminate", time.Now().Add(-116*time.Second)))
	w.run(t, ctx)

	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 45*time.Second, true, func(ctx context.Context) (bool, error) {
		return w.eventCount(t, ctx, n, events.ReasonDrainError) > 0, nil
	})
	if err != nil {
		t.Fatal("no drain failed at the deadline with the held pod terminating")
	}
	held, err := w.c.Client.CoreV1().Pods("shop").Get(ctx, "held", metav1.GetOptions{})
	if err != nil || held.DeletionTimestamp == nil {
		t.Fatalf("the held pod was not evicted: %v", err)
	}
	// Long enough for several retries under the workqueue's backoff (1 s, 2 s, 4 s).
	time.Sleep(10 * time.Second)
	if got := w.eventCountReaching(t, ctx, n, events.ReasonDrainStarted, 1); got != 1 {
		t.Errorf("%d drains started while only the terminating pod was left, want the first only", got)
	}
	if got := w.eventCountReaching(t, ctx, n, events.ReasonDrainError, 1); got != 1 {
		t.Errorf("%d drain failures, want the one at the deadline", got)
	}
	if p := w.phase(t, ctx, n); p != record.PhaseDraining {
		t.Errorf("phase %v while the pod terminates, want draining", p)
	}

	// The pod goes: the node is drained and its notice finished.
	patch := []byte(`{"metadata":{"finalizers":null}}`)
	if _, err := w.c.Client.CoreV1().Pods("shop").Patch(ctx, "held", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	w.waitDrained(t, ctx, n, notice.ID(notice.SpotInterruption, instance, "terminate"))
	// Events are written after the record, in the background lane.
	if got := w.eventCountReaching(t, ctx, n, events.ReasonDrained, 1); got != 1 {
		t.Errorf("%d drained Events, want 1", got)
	}
}
