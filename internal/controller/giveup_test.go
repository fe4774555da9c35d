// SPDX-License-Identifier: Apache-2.0

package controller_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"lifeboat.dev/lifeboat/internal/episode"
	"lifeboat.dev/lifeboat/internal/record"
	"lifeboat.dev/lifeboat/test/sandbox/fakeaws"
)

// A notice that cannot be recorded (its node's record is of a newer schema) is retried while
// its deadline is ahead, as the agent's intake does, and given up once that deadline is more
// than a minute past: its message is deleted, the log says why, and the node is left alone.
func TestIntakeGivesUpLateNotices(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := newIntakeWorld(t, ctx, 2)
	late, due := w.nodes[0], w.nodes[1]
	for _, n := range w.nodes {
		w.updateNode(t, ctx, n, false, func(n *corev1.Node) {
			n.Annotations[record.Annotation] = `{"version":99,"phase":"draining","notices":["from-the-future"]}`
		})
	}
	w.run(t, ctx)
	// A Spot warning gives two minutes: sent five minutes ago, its deadline is three past.
	w.send(t, ctx, fakeaws.SpotInterruptionWarning(episode.InstanceIDOf(late), "terminate", time.Now().Add(-5*time.Minute)))
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return w.metrics.Value("lifeboat_queue_messages_total", "outcome", "done") == 1 && w.queueLength(t, ctx) == 0, nil
	})
	if err != nil {
		t.Fatalf("the late notice's message was not deleted: %v done, %d on the queue", w.metrics.Value("lifeboat_queue_messages_total", "outcome", "done"), w.queueLength(t, ctx))
	}
	if out := w.logs.String(); !strings.Contains(out, "giving up on notice") || !strings.Contains(out, "too late") {
		t.Error("no log line giving the late notice up")
	}

	w.send(t, ctx, fakeaws.SpotInterruptionWarning(episode.InstanceIDOf(due), "terminate", time.Now()))
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return w.metrics.Value("lifeboat_queue_messages_total", "outcome", "retry") >= 2, nil
	})
	if err != nil {
		t.Fatal("the notice whose deadline is ahead was not retried")
	}
	if w.queueLength(t, ctx) == 0 {
		t.Error("the retried message was deleted, want it kept")
	}
	for _, n := range w.nodes {
		if got := w.node(t, ctx, n); got.Spec.Unschedulable || !strings.Contains(got.Annotations[record.Annotation], `"version":99`) {
			t.Errorf("%s: a node whose record is newer was acted on", n.Name)
		}
	}
}
