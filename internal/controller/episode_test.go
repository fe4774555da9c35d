// SPDX-License-Identifier: Apache-2.0

package controller_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	"lifeboat.dev/lifeboat/internal/episode"
	"lifeboat.dev/lifeboat/internal/events"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/record"
	"lifeboat.dev/lifeboat/test/sandbox/fakeaws"
)

// updateNode changes a node as another writer would (an operator, the kubelet), from a fresh
// read.
func (w *intakeWorld) updateNode(t *testing.T, ctx context.Context, n *corev1.Node, status bool, change func(*corev1.Node)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		got, err := w.c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(got)
		if status {
			_, err = w.c.Client.CoreV1().Nodes().UpdateStatus(ctx, got, metav1.UpdateOptions{})
		} else {
			_, err = w.c.Client.CoreV1().Nodes().Update(ctx, got, metav1.UpdateOptions{})
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func (w *intakeWorld) addPods(t *testing.T, ctx context.Context, n *corev1.Node, prefix string, count int) {
	t.Helper()
	for i := range count {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: fmt.Sprintf("%s-%d-%s", prefix, i, n.Name)},
			Spec: corev1.PodSpec{NodeName: n.Name, Containers: []corev1.Container{{Name: "c", Image: "img"}}}}
		if _, err := w.c.Client.CoreV1().Pods("shop").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// waitDrained waits until the node's record says drained for the notice and no pod is left.
func (w *intakeWorld) waitDrained(t *testing.T, ctx context.Context, n *corev1.Node, noticeID string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		r, _ := record.Read(w.node(t, ctx, n))
		return r.Phase == record.PhaseDrained && r.WorkDone(noticeID, true) && w.podsOn(t, ctx, n) == 0, nil
	})
	if err != nil {
		r, _ := record.Read(w.node(t, ctx, n))
		t.Fatalf("%s: not drained for %s: record %+v, %d pods left", n.Name, noticeID, r, w.podsOn(t, ctx, n))
	}
}

func (w *intakeWorld) eventCount(t *testing.T, ctx context.Context, n *corev1.Node, reason string) int32 {
	t.Helper()
	list, err := w.c.Client.CoreV1().Events("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var count int32
	for _, e := range list.Items {
		if e.InvolvedObject.Name == n.Name && e.Reason == reason {
			count += max(e.Count, 1)
		}
	}
	return count
}

// eventCountReaching is eventCount once it reaches want, or after 10 s: Events are sent after
// the work they report, by the recorder's own goroutine.
func (w *intakeWorld) eventCountReaching(t *testing.T, ctx context.Context, n *corev1.Node, reason string, want int32) int32 {
	t.Helper()
	var got int32
	wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		got = w.eventCount(t, ctx, n, reason)
		return got >= want, nil
	})
	return got
}

// Episodes: an interruption that is over (an operator took the node back, or the instance
// booted again) is not the end of the node's story. The next notice, even one seen before,
// opens a new episode with its own drain; a record of a newer schema is left alone.
func TestEpisodes(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	w := newIntakeWorld(t, ctx, 4)
	spotAfterUncordon, hookAfterUncordon, stopped, newer := w.nodes[0], w.nodes[1], w.nodes[2], w.nodes[3]
	id := func(n *corev1.Node) string { return episode.InstanceIDOf(n) }
	w.fake.AddInstance(fakeaws.Instance{ID: id(hookAfterUncordon), PrivateDNSName: hookAfterUncordon.Name, AutoScalingGroup: "workers", Tags: ourTags})
	w.fake.AddLifecycleHook(fakeaws.LifecycleHook{Name: "drain", AutoScalingGroup: "workers"})
	w.updateNode(t, ctx, stopped, true, func(n *corev1.Node) { n.Status.NodeInfo.BootID = "boot-1" })
	// A newer release of Lifeboat is at work on this node.
	w.updateNode(t, ctx, newer, false, func(n *corev1.Node) {
		n.Annotations[record.Annotation] = `{"version":99,"phase":"draining","notices":["from-the-future"]}`
	})
	w.run(t, ctx, "EMIT_KUBERNETES_EVENTS", "true")

	// 1. A rebalance recommendation drains two nodes (queue mode drains it).
	w.send(t, ctx, fakeaws.RebalanceRecommendation(id(spotAfterUncordon), time.Now()), fakeaws.RebalanceRecommendation(id(hookAfterUncordon), time.Now()),
		fakeaws.SpotInterruptionWarning(id(stopped), "stop", time.Now()), fakeaws.SpotInterruptionWarning(id(newer), "terminate", time.Now()))
	for _, n := range []*corev1.Node{spotAfterUncordon, hookAfterUncordon} {
		w.waitDrained(t, ctx, n, notice.ID(notice.Rebalance, id(n), ""))
	}
	stopNotice := notice.ID(notice.SpotInterruption, id(stopped), "stop")
	w.waitDrained(t, ctx, stopped, stopNotice)

	// 2. An operator takes both back, and new pods land on them; the stopped instance starts
	// again (a new boot) and gets new pods too.
	for _, n := range []*corev1.Node{spotAfterUncordon, hookAfterUncordon} {
		w.updateNode(t, ctx, n, false, func(n *corev1.Node) { n.Spec.Unschedulable = false })
		w.addPods(t, ctx, n, "late", 3)
	}
	w.updateNode(t, ctx, stopped, true, func(n *corev1.Node) { n.Status.NodeInfo.BootID = "boot-2" })
	// The instance runs again: the controller gives its node back without waiting for a notice.
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		got := w.node(t, ctx, stopped)
		r, _ := record.Read(got)
		return !got.Spec.Unschedulable && r.Phase == record.PhaseNone, nil
	})
	if err != nil {
		t.Errorf("%s: not given back after its instance booted again", stopped.Name)
	}
	w.addPods(t, ctx, stopped, "late", 2)
	time.Sleep(time.Second) // the informer sees the changes

	// 3. A Spot warning, a terminate hook, and the same Spot stop notice again.
	w.fake.BeginLifecycleAction("drain", "workers", id(hookAfterUncordon), "token-after")
	w.send(t, ctx, fakeaws.SpotInterruptionWarning(id(spotAfterUncordon), "terminate", time.Now()),
		fakeaws.TerminateLifecycleAction("workers", "drain", id(hookAfterUncordon), "token-after", time.Now()),
		fakeaws.SpotInterruptionWarning(id(stopped), "stop", time.Now()))

	w.waitDrained(t, ctx, spotAfterUncordon, notice.ID(notice.SpotInterruption, id(spotAfterUncordon), "terminate"))
	if !w.node(t, ctx, spotAfterUncordon).Spec.Unschedulable {
		t.Errorf("%s: not cordoned again", spotAfterUncordon.Name)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, completed, _, _ := w.fake.LifecycleAction("token-after")
		return completed, nil
	})
	if err != nil {
		t.Fatalf("the terminate hook after the uncordon was not completed")
	}
	if left := w.podsOn(t, ctx, hookAfterUncordon); left != 0 {
		t.Errorf("%s: the hook was completed with %d new pods still on the node", hookAfterUncordon.Name, left)
	}
	w.waitDrained(t, ctx, stopped, stopNotice)
	r, _ := record.Read(w.node(t, ctx, stopped))
	if r.BootID != "boot-2" || r.Version != record.Version {
		t.Errorf("%s: the new episode's record %+v, want boot-2 and version %d", stopped.Name, r, record.Version)
	}
	// Each episode reported its own drain.
	for _, n := range []*corev1.Node{spotAfterUncordon, hookAfterUncordon, stopped} {
		if got := w.eventCountReaching(t, ctx, n, events.ReasonDrained, 2); got != 2 {
			t.Errorf("%s: %d %s Events, want one per episode (2)", n.Name, got, events.ReasonDrained)
		}
	}

	// 4. The node whose record is newer was left alone, its notice kept.
	got := w.node(t, ctx, newer)
	if got.Spec.Unschedulable || w.podsOn(t, ctx, newer) != 1 {
		t.Errorf("%s: a record of a newer schema was acted on: unschedulable %v", newer.Name, got.Spec.Unschedulable)
	}
	if !strings.Contains(got.Annotations[record.Annotation], `"version":99`) {
		t.Errorf("%s: the newer record was rewritten: %s", newer.Name, got.Annotations[record.Annotation])
	}
	if !strings.Contains(w.logs.String(), "newer schema") {
		t.Error("no log line about the newer record")
	}
}

// A scheduled reboot from AWS Health (queue mode): the node is drained before it; the
// instance reboots (a new boot ID) and the node is given back; AWS Health then sends the same
// event again (its status moves on, and the message says nothing about the reboot having
// happened), and at last closes it. Neither is acted on: the node stays schedulable and its
// new pods stay.
func TestScheduledRebootNotRedone(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := newIntakeWorld(t, ctx, 1)
	n := w.nodes[0]
	inst := episode.InstanceIDOf(n)
	w.updateNode(t, ctx, n, true, func(n *corev1.Node) { n.Status.NodeInfo.BootID = "boot-1" })
	w.run(t, ctx)

	const event, code = "arn:aws:health:us-east-1::event/EC2/AWS_EC2_SYSTEM_REBOOT_MAINTENANCE_SCHEDULED/reboot-1", "AWS_EC2_SYSTEM_REBOOT_MAINTENANCE_SCHEDULED"
	start := time.Now().Add(time.Minute) // within NODE_TERMINATION_GRACE_PERIOD: the drain begins at once
	w.send(t, ctx, fakeaws.HealthScheduledChange(event, code, start, start.Add(time.Hour), "", "", inst))
	r := w.waitRecordedNotice(t, ctx, n)
	w.waitDrained(t, ctx, n, r)

	w.updateNode(t, ctx, n, true, func(n *corev1.Node) { n.Status.NodeInfo.BootID = "boot-2" })
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		got := w.node(t, ctx, n)
		rec, _ := record.Read(got)
		return !got.Spec.Unschedulable && rec.Phase == record.PhaseNone, nil
	})
	if err != nil {
		t.Fatalf("%s: not given back after the reboot", n.Name)
	}
	w.addPods(t, ctx, n, "after-reboot", 2)

	// The same event again, still upcoming (Health restates it), then closed.
	w.send(t, ctx, fakeaws.HealthScheduledChange(event, code, start, start.Add(time.Hour), "", "", inst))
	time.Sleep(3 * time.Second)
	w.send(t, ctx, fakeaws.HealthScheduledChangeClosed(event, code, start, start.Add(time.Hour), inst))
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return w.queueLength(t, ctx) == 0, nil
	})
	if err != nil {
		t.Fatal("the repeated and closing messages were not handled")
	}
	time.Sleep(2 * time.Second)
	got := w.node(t, ctx, n)
	if got.Spec.Unschedulable || w.podsOn(t, ctx, n) != 2 {
		t.Errorf("%s: acted on again after the reboot: unschedulable %v, %d of 2 new pods left", n.Name, got.Spec.Unschedulable, w.podsOn(t, ctx, n))
	}
	if got := w.eventCountReaching(t, ctx, n, events.ReasonDrainStarted, 1); got != 1 {
		t.Errorf("%s: %d drains started, want 1", n.Name, got)
	}
	rec, _ := record.Read(got)
	if !slices.Contains(rec.Released, r) {
		t.Errorf("%s: record %+v, want the event's notice released", n.Name, rec)
	}
}

// waitRecordedNotice waits for the node's record to hold a notice and returns its id.
func (w *intakeWorld) waitRecordedNotice(t *testing.T, ctx context.Context, n *corev1.Node) string {
	t.Helper()
	var id string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		r, _ := record.Read(w.node(t, ctx, n))
		if len(r.Notices) > 0 {
			id = r.Notices[0]
		}
		return id != "", nil
	})
	if err != nil {
		t.Fatalf("%s: no notice recorded", n.Name)
	}
	return id
}
