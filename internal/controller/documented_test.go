// SPDX-License-Identifier: Apache-2.0

package controller_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"lifeboat.dev/lifeboat/internal/episode"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/test/sandbox/fakeaws"
)

// The interruptible Capacity Reservation warning as the EC2 user guide prints it, with
// resources a string: a field Lifeboat does not need never drops the notice.
func TestDocumentedCapacityReservationWarningDrains(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := newIntakeWorld(t, ctx, 1)
	n := w.nodes[0]
	w.send(t, ctx, fakeaws.CapacityReservationInterruptionWarningDocumented(episode.InstanceIDOf(n), time.Now()))
	w.run(t, ctx)
	w.waitDrained(t, ctx, n, notice.ID(notice.CapacityReservationInterruption, episode.InstanceIDOf(n), "terminate"))
	if strings.Contains(w.logs.String(), "level=ERROR") {
		t.Errorf("an ERROR was logged:\n%s", w.logs.String())
	}
}

// "Capacity Block Delivered", keyed as AWS's page prints it, is recognised: deleted, logged
// at Info and counted by kind and reason, never an error; nothing is touched.
func TestCapacityBlockDeliveredIgnored(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := newIntakeWorld(t, ctx, 1)
	now := time.Now()
	w.send(t, ctx, fakeaws.CapacityBlockDelivered("cr-0123456789abcdef0", now, now.Add(24*time.Hour)))
	w.run(t, ctx)
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return w.metrics.Value("lifeboat_queue_messages_ignored_total", "kind", "capacity_block_delivered", "reason", "capacity_starts") == 1 && w.queueLength(t, ctx) == 0, nil
	})
	if err != nil {
		t.Fatalf("the Delivered event was not counted as ignored and deleted: %v\n%s", err, w.logs.String())
	}
	out := w.logs.String()
	if strings.Contains(out, "level=ERROR") || !strings.Contains(out, "queue message ignored") || !strings.Contains(out, "capacity_block_delivered") {
		t.Errorf("want one Info line naming the kind, no ERROR:\n%s", out)
	}
	if got := w.node(t, ctx, w.nodes[0]); got.Spec.Unschedulable {
		t.Error("the node was cordoned")
	}
}
