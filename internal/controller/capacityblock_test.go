// SPDX-License-Identifier: Apache-2.0

package controller_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"

	"lifeboat.dev/lifeboat/internal/episode"
	"lifeboat.dev/lifeboat/internal/events"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/record"
	"lifeboat.dev/lifeboat/test/sandbox/fakeaws"
)

// A Capacity Block's expiration warning names a reservation: exactly this cluster's instances
// in it are drained, by the time EC2 begins to terminate them; a node of another reservation
// and another cluster's instance in the same reservation are left alone, and EC2 is asked
// once per warning.
func TestCapacityBlockDrainsItsInstances(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := newIntakeWorld(t, ctx, 4)
	const block, otherBlock = "cr-0123456789abcdef0", "cr-0fedcba9876543210"
	inBlock, elsewhere, plain := w.nodes[:2], w.nodes[2], w.nodes[3]
	for _, n := range inBlock {
		w.fake.AddInstance(fakeaws.Instance{ID: episode.InstanceIDOf(n), PrivateDNSName: n.Name, Tags: ourTags, CapacityReservationID: block})
	}
	w.fake.AddInstance(fakeaws.Instance{ID: episode.InstanceIDOf(elsewhere), PrivateDNSName: elsewhere.Name, Tags: ourTags, CapacityReservationID: otherBlock})
	// Another cluster's instance in the same block: no Node here.
	w.fake.AddInstance(fakeaws.Instance{ID: foreign, PrivateDNSName: "ip-10-9-0-1.ec2.internal", CapacityReservationID: block,
		Tags: map[string]string{"aws-node-termination-handler/managed": "", "kubernetes.io/cluster/other": "owned"}})
	warned := time.Now().Truncate(time.Second)
	w.fake.AddCapacityReservation(fakeaws.CapacityReservation{ID: block, EndDate: warned.Add(40 * time.Minute)})
	w.send(t, ctx, fakeaws.CapacityBlockExpirationWarning(block, warned))
	w.run(t, ctx)

	for _, n := range inBlock {
		id := notice.ID(notice.CapacityBlockExpiration, episode.InstanceIDOf(n), block)
		w.waitDrained(t, ctx, n, id)
		r, _ := record.Read(w.node(t, ctx, n))
		if want := warned.Add(10 * time.Minute); !r.Deadline.Equal(want) {
			t.Errorf("%s: deadline %v, want EC2's end date - 30 min (%v)", n.Name, r.Deadline, want)
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
		if got := w.eventCountReaching(t, ctx, n, "DrainStarted", 1); got != 1 {
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
	if reservationLookups != 2 || w.fake.CallCount("ec2", "DescribeCapacityReservations") != 2 {
		t.Errorf("%d instance and %d reservation lookups for two warnings, want one each", reservationLookups, w.fake.CallCount("ec2", "DescribeCapacityReservations"))
	}
}

// blockWorld is a cluster of two nodes whose instances run in a capacity reservation.
func blockWorld(t *testing.T, ctx context.Context, block string) *intakeWorld {
	t.Helper()
	w := newIntakeWorld(t, ctx, 2)
	for _, n := range w.nodes {
		w.fake.AddInstance(fakeaws.Instance{ID: episode.InstanceIDOf(n), PrivateDNSName: n.Name, Tags: ourTags, CapacityReservationID: block})
	}
	return w
}

// waitIgnored waits until the warning was deleted and counted as ignored for reason.
func (w *intakeWorld) waitIgnored(t *testing.T, ctx context.Context, kind, reason string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return w.metrics.Value("lifeboat_queue_messages_ignored_total", "kind", kind, "reason", reason) == 1 && w.queueLength(t, ctx) == 0, nil
	})
	if err != nil {
		t.Fatalf("not counted as ignored (%s, %s): %v\n%s", kind, reason, err, w.logs.String())
	}
}

// untouchedBy checks that no node of w was cordoned or drained, and that each has the Event.
func (w *intakeWorld) untouchedBy(t *testing.T, ctx context.Context, eventReason string) {
	t.Helper()
	for _, n := range w.nodes {
		got := w.node(t, ctx, n)
		if got.Spec.Unschedulable || w.podsOn(t, ctx, n) != 1 || got.Annotations[record.Annotation] != "" {
			t.Errorf("%s was touched: unschedulable %v, %d pods", n.Name, got.Spec.Unschedulable, w.podsOn(t, ctx, n))
		}
		if eventReason == "" {
			continue
		}
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
			return w.nodeEventReasons(t, ctx, n)[eventReason], nil
		})
		if err != nil {
			t.Errorf("%s: no %s Event", n.Name, eventReason)
		}
	}
}

// A forged warning drains nothing: one naming a reservation EC2 does not know, and one naming
// an ordinary Capacity Reservation that runs this cluster's nodes (whose drain would ignore
// do-not-disrupt, as for any reclaim). The second says so on the nodes with a Warning.
func TestCapacityBlockForgedReservation(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const ordinary = "cr-0aaaaaaaaaaaaaaa1"
	w := blockWorld(t, ctx, ordinary)
	now := time.Now()
	w.fake.AddCapacityReservation(fakeaws.CapacityReservation{ID: ordinary, Type: "default", InstanceType: "m7i.large", EndDate: now.Add(40 * time.Minute)})
	w.send(t, ctx, fakeaws.CapacityBlockExpirationWarning("cr-0bbbbbbbbbbbbbbb2", now))
	w.run(t, ctx, "POD_NAME", "lifeboat-0", "NAMESPACE", "kube-system")
	w.waitIgnored(t, ctx, "capacity_block_expiration", "reservation_not_found")
	w.send(t, ctx, fakeaws.CapacityBlockExpirationWarning(ordinary, now))
	w.waitIgnored(t, ctx, "capacity_block_expiration", "not_capacity_block")
	w.untouchedBy(t, ctx, events.ReasonCapacityBlockNotDrained)
	if out := w.logs.String(); strings.Contains(out, "level=ERROR") || !strings.Contains(out, "does not know") || !strings.Contains(out, "not a Capacity Block") {
		t.Errorf("want a Warn line for each, no ERROR:\n%s", out)
	}
	// Both are told on Lifeboat's own pod too: the first names no instance to tell.
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := w.c.Client.CoreV1().Events("kube-system").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("involvedObject.name", "lifeboat-0").String()})
		if err != nil {
			return false, err
		}
		var n int32
		for _, e := range list.Items {
			if e.Reason == events.ReasonCapacityBlockNotDrained && e.Type == corev1.EventTypeWarning {
				n += max(e.Count, 1)
			}
		}
		return n == 2, nil
	})
	if err != nil {
		t.Errorf("no two Warning Events on Lifeboat's own pod: %v", err)
	}
}

// A block extended after its warning was sent (EC2's end date is days away) drains nothing,
// and says so.
func TestCapacityBlockExtended(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const block = "cr-0ccccccccccccccc3"
	w := blockWorld(t, ctx, block)
	warned := time.Now()
	w.fake.AddCapacityReservation(fakeaws.CapacityReservation{ID: block, EndDate: warned.Add(7*24*time.Hour + 40*time.Minute)})
	w.send(t, ctx, fakeaws.CapacityBlockExpirationWarning(block, warned))
	w.run(t, ctx)
	w.waitIgnored(t, ctx, "capacity_block_expiration", "extended")
	w.untouchedBy(t, ctx, events.ReasonCapacityBlockNotDrained)
	if !strings.Contains(w.logs.String(), "extended") {
		t.Errorf("the log does not say the block was extended:\n%s", w.logs.String())
	}
}

// An UltraServer block's instances must be gone 60 minutes before its end, not 30: the
// deadline comes from EC2's end date and instance type, whatever the message says. The
// warning is keyed as the EC2 user guide prints it (detail_type, customer_event_id).
func TestCapacityBlockUltraServerDeadline(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const block = "cr-0ddddddddddddddd4"
	w := blockWorld(t, ctx, block)
	warned := time.Now().Truncate(time.Second)
	end := warned.Add(40 * time.Minute)
	w.fake.AddCapacityReservation(fakeaws.CapacityReservation{ID: block, InstanceType: "p6e-gb200.36xlarge", EndDate: end})
	// The message claims a later end: EC2's is taken.
	w.send(t, ctx, fakeaws.CapacityBlockExpirationWarningDocumented(block, warned, end.Add(time.Hour)))
	w.run(t, ctx)
	for _, n := range w.nodes {
		w.waitDrained(t, ctx, n, notice.ID(notice.CapacityBlockExpiration, episode.InstanceIDOf(n), block))
		r, _ := record.Read(w.node(t, ctx, n))
		if want := end.Add(-60 * time.Minute); !r.Deadline.Equal(want) {
			t.Errorf("%s: deadline %v, want EC2's end date - 60 min (%v)", n.Name, r.Deadline, want)
		}
	}
}
