// SPDX-License-Identifier: Apache-2.0

package episode

import (
	"context"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"lifeboat.dev/lifeboat/internal/lifecycle"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/record"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// Episode edge cases, each once a defect: they run against client-go's fake clientset, which
// lets a test change the node between the handler's read and its write.

// A drained episode ends (an operator uncordons the node) between the handler's read and its
// cordon write: the write opens a new episode, and the notice drains rather than completing
// its lifecycle action at once.
func TestEpisodeEndsBetweenReadAndWrite(t *testing.T) {
	ctx := context.Background()
	inst := "i-0123456789abcdef0"
	x := notice.Notice{ID: notice.ID(notice.SpotInterruption, inst, "terminate"), Kind: notice.SpotInterruption, InstanceID: inst}
	rec := record.Record{Version: 1, BootID: "b1", Notices: []string{x.ID}, Finished: []string{x.ID}, Phase: record.PhaseDrained, Reported: []string{record.OutcomeDrained}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", ResourceVersion: "1", Annotations: map[string]string{}},
		Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/" + inst, Unschedulable: true}}
	node.Status.NodeInfo.BootID = "b1"
	record.Write(node, rec)
	client := fake.NewSimpleClientset(node.DeepCopy())
	stale := node.DeepCopy()
	first := true
	client.PrependReactor("patch", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if !first {
			return false, nil, nil
		}
		first = false
		// Meanwhile an operator uncordons the node.
		n, _ := client.Tracker().Get(schema.GroupVersionResource{Version: "v1", Resource: "nodes"}, "", "n1")
		nn := n.(*corev1.Node).DeepCopy()
		nn.Spec.Unschedulable = false
		nn.ResourceVersion = "2"
		_ = client.Tracker().Update(schema.GroupVersionResource{Version: "v1", Resource: "nodes"}, nn, "")
		return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, "n1", nil)
	})
	h := NewHandler(sandboxtest.Config(t, ""), client, slog.New(slog.DiscardHandler), Options{})
	completed := 0
	h.completion.completer = CompleteFunc(func(ctx context.Context, _ string, n notice.Notice) (*lifecycle.Completed, error) {
		completed++
		return nil, nil
	})
	y := notice.Notice{ID: notice.ID(notice.ASGTermination, inst, ""), Kind: notice.ASGTermination, InstanceID: inst, Deadline: time.Now().Add(time.Hour)}
	if err := h.Intake(ctx, y, "n1", stale); err != nil {
		t.Fatal(err)
	}
	written, _ := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if wait, err := h.Reconcile(ctx, written); err != nil || wait != 0 {
		t.Fatalf("reconcile: wait %v, %v", wait, err)
	}
	lists := podLists(client)
	got, _ := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	r, _ := record.Read(got)
	if completed != 1 || lists != 1 || r.Phase != record.PhaseDrained || !got.Spec.Unschedulable {
		t.Errorf("%d completions after %d pod lists (want a drain, then one completion); unschedulable %v, record %+v",
			completed, lists, got.Spec.Unschedulable, r)
	}
}

// An operator uncordons a node Lifeboat cordoned and tainted, then the event is canceled:
// Lifeboat's taint and label go too.
func TestReleaseAfterOperatorUncordon(t *testing.T) {
	ctx := context.Background()
	inst := "i-0123456789abcdef0"
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", ResourceVersion: "1"},
		Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/" + inst}}
	node.Status.NodeInfo.BootID = "b1"
	client := fake.NewSimpleClientset(node)
	h := NewHandler(sandboxtest.Config(t, "", "CORDON_ONLY", "true", "TAINT_NODE", "true", "EXCLUDE_FROM_LOAD_BALANCERS", "true"), client, slog.New(slog.DiscardHandler), Options{})
	x := notice.Notice{ID: notice.ID(notice.ScheduledMaintenance, inst, "instance-event-x"), Kind: notice.ScheduledMaintenance, InstanceID: inst,
		Deadline: time.Now().Add(time.Hour), Action: "system-maintenance"}
	if err := h.Handle(ctx, x, "n1"); err != nil {
		t.Fatal(err)
	}
	n, _ := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	n.Spec.Unschedulable = false // kubectl uncordon
	client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
	x.Released = true
	if err := h.Handle(ctx, x, "n1"); err != nil {
		t.Fatal(err)
	}
	n, _ = client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	t.Logf("taints %v labels %v record %s", n.Spec.Taints, n.Labels, n.Annotations[record.Annotation])
	if len(n.Spec.Taints) > 0 || n.Labels[nodes.LabelExcludeFromLoadBalancers] != "" {
		t.Errorf("released event left Lifeboat's taint or label behind")
	}
}

// A scheduled event canceled while its notice waits for its start: no drain.
func TestReleasedWhileWaitingForStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		inst := "i-0123456789abcdef0"
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", ResourceVersion: "1"},
			Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/" + inst}}
		node.Status.NodeInfo.BootID = "b1"
		client := fake.NewSimpleClientset(node)
		// Drains start NODE_TERMINATION_GRACE_PERIOD before the event (at least 30 s ahead): in 2 s.
		h := NewHandler(sandboxtest.Config(t, "", "NODE_TERMINATION_GRACE_PERIOD", "29"), client, slog.New(slog.DiscardHandler), Options{})
		drained := 0
		h.completion.completer = CompleteFunc(func(ctx context.Context, _ string, n notice.Notice) (*lifecycle.Completed, error) {
			drained++
			return nil, nil
		})
		x := notice.Notice{ID: notice.ID(notice.ScheduledMaintenance, inst, "evt"), Kind: notice.ScheduledMaintenance, Source: notice.SourceQueue,
			InstanceID: inst, Deadline: time.Now().Add(31 * time.Second), Action: "instance-stop"}
		done := make(chan error)
		go func() { done <- h.Handle(ctx, x, "n1") }()
		synctest.Wait() // the notice is recorded, and its drain waits for its start
		if n, _ := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{}); !recordHas(n, x.ID) {
			t.Fatalf("the notice is not recorded while it waits for its start: %s", n.Annotations[record.Annotation])
		}
		rel := x
		rel.Released = true // AWS Health sends the event again, closed (canceled)
		if err := h.Handle(ctx, rel, "n1"); err != nil {
			t.Fatal(err)
		}
		n, _ := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
		t.Logf("after release: unschedulable %v record %s", n.Spec.Unschedulable, n.Annotations[record.Annotation])
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		n, _ = client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
		t.Logf("after the wait: unschedulable %v completions %d record %s", n.Spec.Unschedulable, drained, n.Annotations[record.Annotation])
		if drained > 0 {
			t.Errorf("a released notice drained the node")
		}
	})
}

// An episode that ends by a new boot releases its scheduled events (they happened), not its
// A copy of a scheduled notice whose start could not be read only cordons; a later copy of
// the same notice with a readable start schedules its drain (this process must not remember
// the first as done).
func TestCordonOnlyCopyThenReadableCopyDrains(t *testing.T) {
	ctx := context.Background()
	inst := "i-0123456789abcdef0"
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", ResourceVersion: "1"},
		Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/" + inst}}
	client := fake.NewSimpleClientset(node)
	h := NewHandler(sandboxtest.Config(t, ""), client, slog.New(slog.DiscardHandler), Options{})
	unreadable := notice.Notice{ID: notice.ID(notice.ScheduledMaintenance, inst, "evt"), Kind: notice.ScheduledMaintenance, Source: notice.SourceQueue,
		InstanceID: inst, Action: "instance-stop", CordonOnly: `detail.startTime "soon" is not a time`}
	for range 2 { // a repeat of the unreadable copy changes nothing
		if err := h.Handle(ctx, unreadable, "n1"); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{}); !n.Spec.Unschedulable {
		t.Fatal("the cordon-only notice did not cordon")
	}
	readable := unreadable
	readable.CordonOnly, readable.Deadline = "", time.Now().Add(time.Minute) // due now: the drain starts at once
	if err := h.Handle(ctx, readable, "n1"); err != nil {
		t.Fatal(err)
	}
	n, _ := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if r, _ := record.Read(n); r.Phase != record.PhaseDrained || !r.WorkDone(readable.ID, true) {
		t.Errorf("the readable copy did not drain: record %+v", r)
	}
}

// A record left by the previous release (version 1: no intents) is read, never redone: a
// notice it finished is not drained or completed again, and one it began gets its intent and
// is driven to its end.
func TestVersionOneRecord(t *testing.T) {
	ctx := context.Background()
	inst := "i-0123456789abcdef0"
	spot := notice.Notice{ID: notice.ID(notice.SpotInterruption, inst, "terminate"), Kind: notice.SpotInterruption, Source: notice.SourceQueue,
		InstanceID: inst, Deadline: time.Now().Add(2 * time.Minute)}
	hook := notice.Notice{ID: notice.ID(notice.ASGTermination, inst, notice.TokenDigest("token")), Kind: notice.ASGTermination, Source: notice.SourceQueue,
		InstanceID: inst, Deadline: time.Now().Add(time.Hour), Lifecycle: &notice.Lifecycle{Group: "workers", Hook: "drain"}}
	for _, tc := range []struct {
		name                      string
		record                    string
		handle                    []notice.Notice
		wantLists, wantCompletion int
	}{
		{"finished", `{"version":1,"bootID":"b1","notices":["` + spot.ID + `"],"phase":"drained","finished":["` + spot.ID + `"],"notified":true}`,
			[]notice.Notice{spot}, 0, 0},
		// The notice comes again (its message was not deleted), and a hook joins the episode.
		{"draining", `{"version":1,"bootID":"b1","notices":["` + spot.ID + `"],"phase":"draining"}`,
			[]notice.Notice{spot, hook}, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", ResourceVersion: "1", Annotations: map[string]string{record.Annotation: tc.record}},
				Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/" + inst, Unschedulable: true}}
			node.Status.NodeInfo.BootID = "b1"
			client := fake.NewSimpleClientset(node)
			h := NewHandler(sandboxtest.Config(t, ""), client, slog.New(slog.DiscardHandler), Options{})
			var completed []string
			h.completion.completer = CompleteFunc(func(ctx context.Context, _ string, n notice.Notice) (*lifecycle.Completed, error) {
				if n.Lifecycle != nil {
					completed = append(completed, n.Lifecycle.Group+"/"+n.Lifecycle.Hook)
				}
				return nil, nil
			})
			for _, n := range tc.handle {
				if err := h.Handle(ctx, n, "n1"); err != nil {
					t.Fatal(err)
				}
			}
			lists := podLists(client)
			got, _ := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
			r, _ := record.Read(got)
			if lists != tc.wantLists || len(completed) != tc.wantCompletion {
				t.Errorf("%d pod lists, %d completions; want %d and %d; record %+v", lists, len(completed), tc.wantLists, tc.wantCompletion, r)
			}
			if r.Phase != record.PhaseDrained || !r.WorkDone(spot.ID, true) {
				t.Errorf("record %+v: want the spot notice drained and finished", r)
			}
		})
	}
}

// podLists counts the pod lists the handler made: one per drain.
func podLists(client *fake.Clientset) int {
	lists := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == "list" && a.GetResource().Resource == "pods" {
			lists++
		}
	}
	return lists
}

// A dry run writes nothing, so its notice comes again (the queue message after a few minutes,
// instance metadata on every poll): the process remembers what it showed, and a copy does not
// run the dry drain, its Events and its webhook again.
func TestDryRunShowsANoticeOnce(t *testing.T) {
	ctx := context.Background()
	inst := "i-0123456789abcdef0"
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", ResourceVersion: "1"},
		Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/" + inst}}
	client := fake.NewSimpleClientset(node)
	h := NewHandler(sandboxtest.Config(t, "", "DRY_RUN", "true"), client, slog.New(slog.DiscardHandler), Options{})
	spot := notice.Notice{ID: notice.ID(notice.SpotInterruption, inst, "terminate"), Kind: notice.SpotInterruption, Source: notice.SourceQueue,
		InstanceID: inst, Deadline: time.Now().Add(2 * time.Minute)}
	for range 3 {
		if err := h.Intake(ctx, spot, "n1", nil); err != nil {
			t.Fatal(err)
		}
	}
	if lists := podLists(client); lists != 1 {
		t.Errorf("the dry drain ran %d times for three copies of one notice, want once", lists)
	}
	for _, a := range client.Actions() {
		if a.GetVerb() == "patch" {
			t.Errorf("a dry run wrote: %v", a)
		}
	}
}

// recordHas reports whether the node's record lists notice id.
func recordHas(n *corev1.Node, id string) bool {
	r, err := record.Read(n)
	return err == nil && r.Has(id)
}
