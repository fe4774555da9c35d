// SPDX-License-Identifier: Apache-2.0

package controller_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"lifeboat.dev/lifeboat/internal/interruption"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/record"
	"lifeboat.dev/lifeboat/test/sandbox/fakeaws"
)

// A Capacity Block's expiration warning names a reservation: exactly this cluster's instances
// in it are drained, by the time EC2 begins to terminate them; a node of another reservation
// and another cluster's instance in the same reservation are left alone, and EC2 is asked
// once per warning.
func TestCapacityBlockDrainsItsInstances(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := newIntakeWorld(t, ctx, 4)
	const block, otherBlock = "cr-0123456789abcdef0", "cr-0fedcba9876543210"
	inBlock, elsewhere, plain := w.nodes[:2], w.nodes[2], w.nodes[3]
	for _, n := range inBlock {
		w.fake.AddInstance(fakeaws.Instance{ID: interruption.InstanceIDOf(n), PrivateDNSName: n.Name, Tags: ourTags, CapacityReservationID: block})
	}
	w.fake.AddInstance(fakeaws.Instance{ID: interruption.InstanceIDOf(elsewhere), PrivateDNSName: elsewhere.Name, Tags: ourTags, CapacityReservationID: otherBlock})
	// Another cluster's instance in the same block: no Node here.
	w.fake.AddInstance(fakeaws.Instance{ID: foreign, PrivateDNSName: "ip-10-9-0-1.ec2.internal", CapacityReservationID: block,
		Tags: map[string]string{"aws-node-termination-handler/managed": "", "kubernetes.io/cluster/other": "owned"}})
	warned := time.Now().Truncate(time.Second)
	w.send(t, ctx, fakeaws.CapacityBlockExpirationWarning(block, warned))
	w.run(t, ctx)

	for _, n := range inBlock {
		id := notice.ID(notice.CapacityBlockExpiration, interruption.InstanceIDOf(n), block)
		w.waitDrained(t, ctx, n, id)
		r, _ := record.Read(w.node(t, ctx, n))
		if want := warned.Add(10 * time.Minute); !r.Deadline.Equal(want) {
			t.Errorf("%s: deadline %v, want the warning + 10 min (%v)", n.Name, r.Deadline, want)
		}
	}
	// The other spelling of the same warning, delivered again: one drain per node still.
	w.send(t, ctx, fakeaws.CapacityBlockReservationExpirationWarning(block, warned))
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 15*time.Second, true, func(ctx context.Context) (bool, error) {
		return w.fake.CallCount("ec2", "DescribeInstances") >= 2 && w.queueLength(t, ctx) == 0, nil
	})
	if err != nil {
		t.Fatalf("the second warning was not taken: %v", err)
	}
	for _, n := range inBlock {
		if got := w.eventCount(t, ctx, n, "DrainStarted"); got != 1 {
			t.Errorf("%s: %d drains started, want 1", n.Name, got)
		}
	}
	for _, n := range []*corev1.Node{elsewhere, plain} {
		got := w.node(t, ctx, n)
		if got.Spec.Unschedulable || w.podsOn(t, ctx, n) != 1 || got.Annotations[record.Annotation] != "" {
			t.Errorf("%s, not in the block, was touched: unschedulable %v, %d pods", n.Name, got.Spec.Unschedulable, w.podsOn(t, ctx, n))
		}
	}
	var reservationLookups int
	for _, c := range w.fake.Calls() {
		if c.Action == "DescribeInstances" && c.Params.Get("Filter.1.Name") == "capacity-reservation-id" {
			reservationLookups++
			if v := c.Params.Get("Filter.1.Value.1"); v != block {
				t.Errorf("looked up reservation %s", v)
			}
		}
	}
	if reservationLookups != 2 {
		t.Errorf("%d reservation lookups for two warnings, want one each", reservationLookups)
	}
}
