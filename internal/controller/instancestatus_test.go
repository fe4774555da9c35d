// SPDX-License-Identifier: Apache-2.0

package controller_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"lifeboat.dev/lifeboat/internal/episode"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/record"
	"lifeboat.dev/lifeboat/test/sandbox/fakeaws"
)

// statusSettings turns the DescribeInstanceStatus poll on, every second, with a threshold of
// three seconds.
var statusSettings = []string{"ENABLE_INSTANCE_STATUS_DRAINING", "true", "INSTANCE_STATUS_INTERVAL", "1", "INSTANCE_IMPAIRED_THRESHOLD", "3"}

// An instance whose status checks keep failing past the threshold is drained and, with
// SET_IMPAIRED_INSTANCE_UNHEALTHY, marked Unhealthy in its group once; one that recovers
// before the threshold, and a healthy one, are not touched.
func TestImpairedInstanceDrained(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := newIntakeWorld(t, ctx, 3)
	failing, recovering := w.nodes[0], w.nodes[1]
	failingID, recoveringID := episode.InstanceIDOf(failing), episode.InstanceIDOf(recovering)
	w.fake.AddInstance(fakeaws.Instance{ID: failingID, PrivateDNSName: failing.Name, Tags: ourTags, AutoScalingGroup: "workers"})
	w.fake.SetInstanceStatus(failingID, fakeaws.Status{Failed: []string{"system"}})
	w.fake.SetInstanceStatus(recoveringID, fakeaws.Status{Failed: []string{"ebs"}})
	started := time.Now()
	w.run(t, ctx, append(statusSettings, "SET_IMPAIRED_INSTANCE_UNHEALTHY", "true")...)
	// Once a pass has seen both failing, one recovers, well within the threshold.
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		return w.metrics.Value("lifeboat_instance_status_impaired") == 2, nil
	})
	if err != nil {
		t.Fatal("no pass saw the two failing instances")
	}
	w.fake.SetInstanceStatus(recoveringID, fakeaws.Status{})

	id := notice.ID(notice.InstanceImpaired, failingID, "")
	w.waitDrained(t, ctx, failing, id)
	if took := time.Since(started); took < 3*time.Second {
		t.Errorf("drained %v after the failure was first seen, before the 3 s threshold", took)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 15*time.Second, true, func(ctx context.Context) (bool, error) {
		return w.fake.UnhealthyMarks(failingID) > 0, nil
	})
	if err != nil {
		t.Fatalf("the impaired instance was not marked Unhealthy")
	}
	// Passes go on: one mark, one drain, and the others untouched.
	w.morePasses(t, ctx, 3)
	if got := w.fake.UnhealthyMarks(failingID); got != 1 {
		t.Errorf("%d Unhealthy marks, want 1", got)
	}
	if got := w.eventCountReaching(t, ctx, failing, "DrainStarted", 1); got != 1 {
		t.Errorf("%d drains started, want 1", got)
	}
	for _, n := range w.nodes[1:] {
		got := w.node(t, ctx, n)
		if got.Spec.Unschedulable || w.podsOn(t, ctx, n) != 1 || got.Annotations[record.Annotation] != "" {
			t.Errorf("%s was touched: unschedulable %v, %d pods", n.Name, got.Spec.Unschedulable, w.podsOn(t, ctx, n))
		}
	}
	// Each pass is one request naming this cluster's instances only, running ones reported.
	for _, c := range w.fake.Calls() {
		if c.Action != "DescribeInstanceStatus" {
			continue
		}
		var named []string
		for k, v := range c.Params {
			if len(k) > len("InstanceId.") && k[:len("InstanceId.")] == "InstanceId." {
				named = append(named, v...)
			}
		}
		if len(named) != 3 || slices.Contains(named, foreign) || c.Params.Get("IncludeAllInstances") == "true" {
			t.Errorf("request %v", c.Params)
			break
		}
	}
	if passes := w.metrics.Value("lifeboat_instance_status_pass_requests"); passes < 5 {
		t.Errorf("%v passes counted, want one a second", passes)
	}
	if got := w.metrics.Value("lifeboat_actions_total", "action", "mark_unhealthy", "result", "ok"); got != 1 {
		t.Errorf("lifeboat_actions_total{action=mark_unhealthy,result=ok} = %v, want 1", got)
	}
}

// A scheduled event DescribeInstanceStatus lists is a scheduled-maintenance notice named by
// its event id (as instance metadata names it); an AWS Health event for the same reboot
// names it by its ARN, so the two are two notices of one episode: one drain. The event that
// leaves the list releases its notice only; the node is given back once the Health event
// closes too.
func TestScheduledEventFromInstanceStatus(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := newIntakeWorld(t, ctx, 2)
	n, other := w.nodes[0], w.nodes[1]
	instance := episode.InstanceIDOf(n)
	start := time.Now().Add(12 * time.Second).Truncate(time.Second)
	event := fakeaws.StatusEvent{ID: "instance-event-0d59937288b749b32", Code: "system-reboot", Description: "The instance is scheduled for a reboot",
		NotBefore: start, NotAfter: start.Add(2 * time.Hour)}
	w.fake.SetInstanceStatus(instance, fakeaws.Status{Events: []fakeaws.StatusEvent{event}})
	const code = "AWS_EC2_SYSTEM_REBOOT_MAINTENANCE_SCHEDULED"
	w.send(t, ctx, fakeaws.HealthScheduledChange("reboot-1", code, start, start.Add(2*time.Hour), "", "", instance))
	w.run(t, ctx, append(statusSettings, "NODE_TERMINATION_GRACE_PERIOD", "5")...)

	sched := notice.ID(notice.ScheduledMaintenance, instance, event.ID)
	w.waitDrained(t, ctx, n, sched)
	r, _ := record.Read(w.node(t, ctx, n))
	if len(r.Notices) != 2 || !r.Has(sched) {
		t.Errorf("record notices %v, want the listed event's and the Health event's", r.Notices)
	}
	if !r.Deadline.Equal(start) {
		t.Errorf("deadline %v, want the event's start %v", r.Deadline, start)
	}
	w.morePasses(t, ctx, 2)
	if got := w.eventCountReaching(t, ctx, n, "DrainStarted", 1); got != 1 {
		t.Errorf("%d drains started, want 1", got)
	}
	// The event leaves the list: its notice is released, the Health one keeps the node.
	w.fake.SetInstanceStatus(instance, fakeaws.Status{})
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		r, _ := record.Read(w.node(t, ctx, n))
		return slices.Contains(r.Released, sched), nil
	})
	if err != nil {
		r, _ := record.Read(w.node(t, ctx, n))
		t.Fatalf("the event no longer listed was not released: %+v", r)
	}
	if !w.node(t, ctx, n).Spec.Unschedulable {
		t.Errorf("the node was given back while the Health event is still open")
	}
	w.send(t, ctx, fakeaws.HealthScheduledChangeClosed("reboot-1", code, start, start.Add(2*time.Hour), instance))
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 15*time.Second, true, func(ctx context.Context) (bool, error) {
		return !w.node(t, ctx, n).Spec.Unschedulable, nil
	})
	if err != nil {
		t.Errorf("the node was not given back once both notices were released")
	}
	if got := w.node(t, ctx, other); got.Spec.Unschedulable || got.Annotations[record.Annotation] != "" {
		t.Errorf("%s, with no event, was touched", other.Name)
	}
}

// morePasses waits until the DescribeInstanceStatus poll has made n more passes.
func (w *intakeWorld) morePasses(t *testing.T, ctx context.Context, n float64) {
	t.Helper()
	passes := func() float64 {
		return w.metrics.Value("lifeboat_instance_status_passes_total", "result", "ok") + w.metrics.Value("lifeboat_instance_status_passes_total", "result", "error")
	}
	from := passes()
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Duration(n*5)*time.Second, true, func(context.Context) (bool, error) {
		return passes() >= from+n, nil
	})
	if err != nil {
		t.Fatalf("the poll made %v of %v more passes", passes()-from, n)
	}
}
