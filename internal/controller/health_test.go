// SPDX-License-Identifier: Apache-2.0

package controller_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"lifeboat.dev/lifeboat/internal/episode"
	"lifeboat.dev/lifeboat/internal/events"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/record"
	"lifeboat.dev/lifeboat/test/sandbox/fakeaws"
)

// update is an AWS Health message delivered again as AWS does at a status update: the same
// event (eventArn) in a new EventBridge envelope, with the status and start it states then.
func update(t *testing.T, body, envelopeID, status string, start time.Time) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatal(err)
	}
	m["id"] = envelopeID
	d := m["detail"].(map[string]any)
	d["statusCode"] = status
	if !start.IsZero() {
		d["startTime"] = start.UTC().Format("Mon, 2 Jan 2006 15:04:05 GMT")
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// AWS Health sends one event again at each status update, each time in a new envelope. A
// retirement two weeks ahead, delivered twice, is one notice: one cordon, no drain, its start
// moved by the update; its "closed" update gives the node back within seconds, while a node
// that another open Health event still concerns stays cordoned. A reboot delivered twice is
// drained once.
func TestHealthUpdatesJoinOneNotice(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := newIntakeWorld(t, ctx, 3)
	alone, twoEvents, reboot := w.nodes[0], w.nodes[1], w.nodes[2]
	id := episode.InstanceIDOf
	const retire, stop, rebootCode = "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED", "AWS_EC2_INSTANCE_STOP_SCHEDULED", "AWS_EC2_SYSTEM_REBOOT_MAINTENANCE_SCHEDULED"
	start := time.Now().Add(14 * 24 * time.Hour).Truncate(time.Second)
	moved := start.Add(24 * time.Hour)
	retirement := fakeaws.HealthScheduledChange("retire-event-1", retire, start, start.Add(2*time.Hour), "", "", id(alone), id(twoEvents))
	other := fakeaws.HealthScheduledChange("stop-event-2", stop, start, start.Add(2*time.Hour), "", "", id(twoEvents))
	rebootSoon := time.Now().Add(time.Minute) // within NODE_TERMINATION_GRACE_PERIOD: drained at once
	rebootMsg := fakeaws.HealthScheduledChange("reboot-event-3", rebootCode, rebootSoon, rebootSoon.Add(time.Hour), "", "", id(reboot))
	w.send(t, ctx, retirement, other, rebootMsg)
	w.run(t, ctx, "TAINT_NODE", "true")

	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		return w.node(t, ctx, alone).Spec.Unschedulable && w.node(t, ctx, twoEvents).Spec.Unschedulable && w.queueLength(t, ctx) == 0, nil
	})
	if err != nil {
		t.Fatal("the Health events' nodes were not cordoned")
	}
	notice := w.waitRecordedNotice(t, ctx, alone)
	w.waitDrained(t, ctx, reboot, w.waitRecordedNotice(t, ctx, reboot))

	// The next status update of each event, in new envelopes; the retirement moved a day later.
	w.send(t, ctx, update(t, retirement, "envelope-retire-open", "open", moved), update(t, rebootMsg, "envelope-reboot-open", "open", time.Time{}))
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		r, _ := record.Read(w.node(t, ctx, alone))
		for _, i := range r.Intents {
			if i.ID == notice && i.Deadline.Equal(moved) {
				return w.queueLength(t, ctx) == 0, nil
			}
		}
		return false, nil
	})
	if err != nil {
		r, _ := record.Read(w.node(t, ctx, alone))
		t.Fatalf("%s: the update did not move the notice's start to %v: record %+v", alone.Name, moved, r)
	}
	time.Sleep(2 * time.Second) // the reboot's update, had it been a notice of its own, would drain now
	for _, n := range []struct {
		node                  *corev1.Node
		cordons               int32
		notices, drains, pods int
	}{{alone, 1, 1, 0, 1}, {twoEvents, 1, 2, 0, 1}, {reboot, 1, 1, 1, 0}} {
		if r, _ := record.Read(w.node(t, ctx, n.node)); len(r.Notices) != n.notices {
			t.Errorf("%s: notices %v, want %d (an update is the same notice)", n.node.Name, r.Notices, n.notices)
		}
		if got := w.eventCount(t, ctx, n.node, events.ReasonCordon); got != n.cordons {
			t.Errorf("%s: %d cordons, want %d", n.node.Name, got, n.cordons)
		}
		if got := w.eventCount(t, ctx, n.node, events.ReasonDrainStarted); got != int32(n.drains) {
			t.Errorf("%s: %d drains, want %d", n.node.Name, got, n.drains)
		}
		if got := w.podsOn(t, ctx, n.node); got != n.pods {
			t.Errorf("%s: %d pods left, want %d", n.node.Name, got, n.pods)
		}
	}

	// The retirement is over: its closed update releases its notices only.
	w.send(t, ctx, update(t, retirement, "envelope-retire-closed", "closed", time.Time{}))
	sent := time.Now()
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		got := w.node(t, ctx, alone)
		return !got.Spec.Unschedulable && !hasTaint(got, nodes.TaintScheduledMaintenance), nil
	})
	if err != nil {
		t.Fatalf("%s was not given back within 10 s of its event's closed update", alone.Name)
	}
	t.Logf("%s given back %.1fs after the closed update was sent", alone.Name, time.Since(sent).Seconds())
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return w.queueLength(t, ctx) == 0, nil
	})
	if err != nil {
		t.Fatal("the closed update was not handled")
	}
	time.Sleep(time.Second)
	got := w.node(t, ctx, twoEvents)
	r, _ := record.Read(got)
	if !got.Spec.Unschedulable || len(r.Released) != 1 || r.Released[0] == "" {
		t.Errorf("%s: unschedulable %v, released %v; want still cordoned for its other open event, the retirement's notice released",
			twoEvents.Name, got.Spec.Unschedulable, r.Released)
	}
}
