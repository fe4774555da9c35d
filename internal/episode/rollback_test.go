// SPDX-License-Identifier: Apache-2.0

package episode

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"

	"lifeboat.dev/lifeboat/internal/events"
	"lifeboat.dev/lifeboat/internal/lifecycle"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/record"
	"lifeboat.dev/lifeboat/internal/record/recordtest"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// Upgrades and rollbacks: a node in the middle of an episode is read by another release of
// Lifeboat than the one that wrote its record. In each direction the other release carries
// the episode on (drains, finishes, releases) or, where it cannot, gives the node back once
// the writer has evidently left it: no node stays cordoned for a release that is gone.

// rollbackWorld is a fake cluster with one schedulable node of recordtest.Instance (booted as
// b1) and a handler of the queue's origin that taints, with a lifecycle completer it counts.
type rollbackWorld struct {
	client    *fake.Clientset
	h         *Handler
	completed []notice.Notice
}

func newRollbackWorld(t *testing.T, node *corev1.Node) *rollbackWorld {
	t.Helper()
	if node == nil {
		node = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", ResourceVersion: "1"},
			Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/" + recordtest.Instance}}
		node.Status.NodeInfo.BootID = "b1"
	}
	w := &rollbackWorld{client: fake.NewSimpleClientset(node)}
	recorder, stop, err := events.New(w.client, events.Options{Enabled: true, Host: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	w.h = NewHandler(sandboxtest.Config(t, "", "TAINT_NODE", "true"), w.client, slog.New(slog.DiscardHandler), Options{Origin: queueOrigin, Events: recorder,
		Completer: CompleteFunc(func(_ context.Context, _ string, n notice.Notice) (*lifecycle.Completed, error) {
			w.completed = append(w.completed, n)
			return nil, nil
		})})
	return w
}

func (w *rollbackWorld) node(t *testing.T) *corev1.Node {
	t.Helper()
	n, err := w.client.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// setRecord replaces the node's record annotation with raw, as another release's write would.
func (w *rollbackWorld) setRecord(t *testing.T, raw string, mods ...func(*corev1.Node)) *corev1.Node {
	t.Helper()
	n := w.node(t)
	nodes.SetAnnotation(record.Annotation, raw)(n)
	for _, m := range mods {
		m(n)
	}
	updated, err := w.client.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return updated
}

// reasons lists the reasons of the Events on the node so far, once they are there.
func (w *rollbackWorld) reasons(t *testing.T, want string) []string {
	t.Helper()
	var got []string
	_ = wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 3*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := w.client.CoreV1().Events("").List(ctx, metav1.ListOptions{})
		got = got[:0]
		for _, e := range list.Items {
			got = append(got, e.Reason)
		}
		return slices.Contains(got, want), err
	})
	return got
}

// noticeOf is a notice of kind k for the world's node from its kind's first source, due in
// ten minutes; a termination hook's has its lifecycle action.
func noticeOf(k notice.Kind) notice.Notice {
	rules, _ := notice.RulesOf(k)
	n := notice.Notice{ID: notice.ID(k, recordtest.Instance, "rollback"), Kind: k, Source: rules.Sources[0], InstanceID: recordtest.Instance,
		Deadline: time.Now().Add(10 * time.Minute), Action: "terminate"}
	if k.Hook() == notice.HookTermination {
		n.Lifecycle = &notice.Lifecycle{Group: "workers", Hook: "drain"}
	}
	return n
}

// midEpisode takes the notice as this release's intake does, and returns the node it leaves:
// cordoned, tainted and recorded, its drain claimed when due now.
func midEpisode(t *testing.T, n notice.Notice) *corev1.Node {
	t.Helper()
	w := newRollbackWorld(t, nil)
	if err := w.h.Intake(context.Background(), n, "n1", nil); err != nil {
		t.Fatal(err)
	}
	return w.node(t)
}

// A rollback to the previous release: its own reader (frozen in previous_reader_test.go) reads
// the record this release writes in the middle of an episode of every kind as one of its own,
// and carries the episode on (drains it, finishes it, or releases it when its event ends):
// no record of this release makes it hold the node.
func TestPreviousReleaseCarriesOnThisReleasesRecords(t *testing.T) {
	for _, k := range notice.Kinds() {
		if !k.Recorded() {
			continue
		}
		t.Run(string(k), func(t *testing.T) {
			n := noticeOf(k)
			node := midEpisode(t, n)
			cur, err := record.Read(node)
			if err != nil || !cur.Open() {
				t.Fatalf("this release's record: %+v, %v", cur, err)
			}
			prev, err := prevRead(node)
			carriesOn, open, left := prevVerdict(prev, err)
			if !carriesOn || !slices.Equal(open, []string{n.ID}) || len(left) > 0 {
				t.Fatalf("%s holds the node: version %d, err %v, open %q, left to a newer release %q\n%s",
					prevRelease, prev.Version, err, open, left, node.Annotations[record.Annotation])
			}
			in, _ := prev.intent(n.ID)
			want, _ := cur.Intent(n.ID)
			if in.Kind != want.Kind || !in.Deadline.Equal(want.Deadline) || in.Origin != want.Origin || prev.Phase != cur.Phase.String() ||
				(want.Lifecycle != nil) != (in.Lifecycle != nil) || (in.Lifecycle != nil && in.Lifecycle.Group != want.Lifecycle.Group) {
				t.Errorf("%s reads the intent %+v in phase %q; this release wrote %+v in %q", prevRelease, in, prev.Phase, want, cur.Phase)
			}
			if (cur.Owner == nil) != (prev.Owner == nil) || (cur.Owner != nil && (prev.Owner.Origin != cur.Owner.Origin || !prev.Owner.Renewed.Equal(cur.Owner.Renewed))) {
				t.Errorf("%s reads the drain's owner %+v; this release wrote %+v", prevRelease, prev.Owner, cur.Owner)
			}
		})
	}
	t.Run("drained and finished", func(t *testing.T) {
		n := noticeOf(notice.ASGTermination)
		w := newRollbackWorld(t, nil)
		if err := w.h.Intake(context.Background(), n, "n1", nil); err != nil {
			t.Fatal(err)
		}
		if _, err := w.h.Reconcile(context.Background(), w.node(t)); err != nil {
			t.Fatal(err)
		}
		prev, err := prevRead(w.node(t))
		if carriesOn, open, _ := prevVerdict(prev, err); !carriesOn || len(open) > 0 || prev.Phase != "drained" || !slices.Contains(prev.Finished, n.ID) {
			t.Errorf("%s reads the finished episode as %+v (%v)", prevRelease, prev, err)
		}
	})
}

// previousRecords are records the previous release wrote in the middle of an episode, kept as
// it wrote them (testdata/records-<release>/), for recordtest.Instance's node.
func previousRecords(t *testing.T) map[string]string {
	t.Helper()
	dir := filepath.Join("testdata", "records-"+prevRelease)
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no records in %s (%v)", dir, err)
	}
	out := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimSuffix(filepath.Base(f), ".json")] = strings.TrimSpace(string(b))
	}
	return out
}

// lifeboatCordoned marks the node cordoned by Lifeboat, with the taint key and the notice id
// as its value, as the previous release's intake left it.
func lifeboatCordoned(key, id string) func(*corev1.Node) {
	return func(n *corev1.Node) {
		nodes.Cordon()(n)
		nodes.AddTaint(key, nodes.LabelValue(id), corev1.TaintEffectNoSchedule)(n)
	}
}

// An upgrade from the previous release: this release reads the records the previous one wrote
// in the middle of an episode, and carries each on: a drain claimed by the previous release's
// process of the same origin is drained and finished, its lifecycle action completed once; a
// scheduled event that ends is released, and Lifeboat's cordon and taint taken back.
func TestThisReleaseCarriesOnPreviousReleasesRecords(t *testing.T) {
	records := previousRecords(t)
	ctx := context.Background()
	for name, raw := range records {
		if prev, err := prevRead(recordtest.NodeWith(raw)); err != nil || prev.Version != prevVersion {
			t.Fatalf("%s is no record %s writes: %+v, %v", name, prevRelease, prev, err)
		}
	}
	t.Run("a termination hook mid-drain is drained and completed", func(t *testing.T) {
		w := newRollbackWorld(t, nil)
		raw := records["asg-termination-draining"]
		node := w.setRecord(t, raw, lifeboatCordoned(notice.TaintASGLifecycle, "asg-term-"+recordtest.Instance+"-0a1b2c3d4e5f"))
		if r, err := record.Read(node); err != nil || !r.Open() || r.Version != 6 {
			t.Fatalf("read %+v, %v", r, err)
		}
		if _, err := w.h.Reconcile(ctx, node); err != nil {
			t.Fatal(err)
		}
		r, _ := record.Read(w.node(t))
		if podLists(w.client) != 1 || len(w.completed) != 1 || w.completed[0].Lifecycle == nil || w.completed[0].Lifecycle.Hook != "drain" ||
			r.Phase != record.PhaseDrained || len(r.Finished) != 1 || r.Owner != nil {
			t.Errorf("%d drains, completions %+v, record %+v; want one drain, one completion, the notice finished", podLists(w.client), w.completed, r)
		}
	})
	t.Run("a Spot interruption mid-drain is drained", func(t *testing.T) {
		w := newRollbackWorld(t, nil)
		node := w.setRecord(t, records["spot-draining"], func(n *corev1.Node) { nodes.Cordon()(n) })
		if _, err := w.h.Reconcile(ctx, node); err != nil {
			t.Fatal(err)
		}
		if r, _ := record.Read(w.node(t)); podLists(w.client) != 1 || r.Phase != record.PhaseDrained || !w.node(t).Spec.Unschedulable {
			t.Errorf("%d drains, record %+v; want it drained, the node still cordoned for the instance's end", podLists(w.client), r)
		}
	})
	t.Run("a scheduled event that ends is released", func(t *testing.T) {
		w := newRollbackWorld(t, nil)
		id := "sched-" + recordtest.Instance + "-instance-event-0123456789abcdef0"
		w.setRecord(t, records["scheduled-waiting"], lifeboatCordoned(notice.TaintScheduledMaintenance, id))
		n := notice.Notice{ID: id, Kind: notice.ScheduledMaintenance, Source: notice.SourceQueue, InstanceID: recordtest.Instance, Released: true}
		if err := w.h.Intake(ctx, n, "n1", nil); err != nil {
			t.Fatal(err)
		}
		got := w.node(t)
		r, _ := record.Read(got)
		if got.Spec.Unschedulable || len(got.Spec.Taints) > 0 || got.Annotations[nodes.AnnotationCordonedBy] != "" || !slices.Contains(r.Released, id) || podLists(w.client) != 0 {
			t.Errorf("after the event ended: unschedulable %v, taints %v, record %+v, %d drains", got.Spec.Unschedulable, got.Spec.Taints, r, podLists(w.client))
		}
	})
}

// newer is a record this release writes mid-drain, rewritten as the next release would write
// it: a later schema version, a field this release does not know, and readableFrom when the
// next release says this one may carry it on (0: it does not).
func newer(t *testing.T, node *corev1.Node, readableFrom int, deadline time.Time) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(node.Annotations[record.Annotation]), &m); err != nil {
		t.Fatal(err)
	}
	m["version"], m["aLaterField"] = record.Version+1, []string{"x"}
	if readableFrom > 0 {
		m["readableFrom"] = readableFrom
	}
	if !deadline.IsZero() {
		m["deadline"] = deadline.UTC().Format(time.RFC3339)
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A rollback from the next release to this one, mid-drain. A record the next release says this
// one may carry on is drained and finished. One it may not is left alone while the next
// release may still be at work, then taken back: Lifeboat's cordon, taints and labels undone,
// an Event, and the node protected by this release again. An operator's cordon stays.
func TestRollbackToThisReleaseLeavesNoNodeStuck(t *testing.T) {
	ctx := context.Background()
	n := noticeOf(notice.ASGTermination)
	written := midEpisode(t, n)

	t.Run("readable by this release: carried on", func(t *testing.T) {
		w := newRollbackWorld(t, written.DeepCopy())
		node := w.setRecord(t, newer(t, written, record.Version, time.Time{}))
		if _, err := w.h.Reconcile(ctx, node); err != nil {
			t.Fatal(err)
		}
		r, err := record.Read(w.node(t))
		if err != nil || podLists(w.client) != 1 || len(w.completed) != 1 || r.Phase != record.PhaseDrained || r.Version != record.Version ||
			strings.Contains(w.node(t).Annotations[record.Annotation], "aLaterField") {
			t.Errorf("%d drains, %d completions, record %+v (%v); want it drained, completed and written at version %d",
				podLists(w.client), len(w.completed), r, err, record.Version)
		}
	})

	t.Run("not readable: held while the next release may be at work, then taken back", func(t *testing.T) {
		w := newRollbackWorld(t, written.DeepCopy())
		node := w.setRecord(t, newer(t, written, 0, time.Now().Add(time.Minute)), func(n *corev1.Node) {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule})
		})
		if rec, _ := record.Read(node); !HasWork(node, rec, w.h.cfg, queueOrigin) {
			t.Error("HasWork is false for the next release's record mid-drain: the controller would never look at it again")
		}
		w.client.ClearActions()
		wait, err := w.h.Reconcile(ctx, node)
		if err != nil || wait < record.NewerHold || wait > record.NewerHold+2*time.Minute || countVerb(w.client.Actions(), "patch") > 0 {
			t.Fatalf("before the hold ends: wait %v, %v, %d writes; want it held, looked at again after the hold", wait, err, countVerb(w.client.Actions(), "patch"))
		}
		if err := w.h.Intake(ctx, noticeOf(notice.SpotInterruption), "n1", nil); !errors.Is(err, ErrNewerRecord) {
			t.Errorf("a notice while held: %v, want ErrNewerRecord", err)
		}
		node = w.setRecord(t, newer(t, written, 0, time.Now().Add(-record.NewerHold-time.Minute)))
		if _, err := w.h.Reconcile(ctx, node); err != nil {
			t.Fatal(err)
		}
		got := w.node(t)
		r, err := record.Read(got)
		if got.Spec.Unschedulable || got.Annotations[nodes.AnnotationCordonedBy] != "" || len(got.Spec.Taints) != 1 || got.Spec.Taints[0].Key != "dedicated" ||
			err != nil || r.Version != record.Version || r.Open() || podLists(w.client) != 0 || len(w.completed) != 0 {
			t.Errorf("after the hold: unschedulable %v, taints %v, record %+v (%v), %d drains, %d completions; want Lifeboat's cordon and taint undone, nothing drained",
				got.Spec.Unschedulable, got.Spec.Taints, r, err, podLists(w.client), len(w.completed))
		}
		if reasons := w.reasons(t, events.ReasonTakenFromNewer); !slices.Contains(reasons, events.ReasonTakenFromNewer) {
			t.Errorf("Events %q, want %s", reasons, events.ReasonTakenFromNewer)
		}
		if err := w.h.Intake(ctx, noticeOf(notice.SpotInterruption), "n1", nil); err != nil || !w.node(t).Spec.Unschedulable {
			t.Errorf("a notice after the take-back: %v; want the node cordoned again by this release", err)
		}
	})

	t.Run("a newer record with no episode open is no work until a notice comes", func(t *testing.T) {
		node := recordtest.NodeWith(`{"version":99,"phase":"","notices":[],"released":["` + n.ID + `"]}`)
		if rec, err := record.Read(node); err != nil || HasWork(node, rec, sandboxtest.Config(t, ""), queueOrigin) {
			t.Errorf("HasWork true (%v): each of them would be rewritten at once during an upgrade", err)
		}
	})

	t.Run("an operator's cordon stays", func(t *testing.T) {
		w := newRollbackWorld(t, written.DeepCopy())
		node := w.setRecord(t, newer(t, written, 0, time.Now().Add(-record.NewerHold-time.Minute)), func(n *corev1.Node) {
			delete(n.Annotations, nodes.AnnotationCordonedBy) // cordoned before Lifeboat's notice
		})
		if _, err := w.h.Reconcile(ctx, node); err != nil {
			t.Fatal(err)
		}
		if got := w.node(t); !got.Spec.Unschedulable || len(got.Spec.Taints) > 0 {
			t.Errorf("unschedulable %v, taints %v; want the operator's cordon kept, Lifeboat's taint gone", got.Spec.Unschedulable, got.Spec.Taints)
		}
	})

	t.Run("a notice of a kind this release does not know: held, then released", func(t *testing.T) {
		w := newRollbackWorld(t, written.DeepCopy())
		later := written.DeepCopy()
		r, _ := record.Read(later)
		r.Intents[0].Kind, r.Intents[0].Lifecycle = "a-later-kind", nil
		r.Intents[0].Deadline = time.Now().Add(time.Minute).UTC().Truncate(time.Second)
		record.Write(later, r)
		node := w.setRecord(t, later.Annotations[record.Annotation])
		if rec, _ := record.Read(node); !HasWork(node, rec, w.h.cfg, queueOrigin) {
			t.Error("HasWork is false for a notice of a later kind alone: the controller would never look at it again")
		}
		if wait, err := w.h.Reconcile(ctx, node); err != nil || wait < record.NewerHold || w.node(t).Annotations[record.Annotation] != later.Annotations[record.Annotation] {
			t.Fatalf("before the hold ends: wait %v, %v; want it held untouched", wait, err)
		}
		r.Intents[0].Deadline = time.Now().Add(-record.NewerHold - time.Minute).UTC().Truncate(time.Second)
		record.Write(later, r)
		node = w.setRecord(t, later.Annotations[record.Annotation])
		if _, err := w.h.Reconcile(ctx, node); err != nil {
			t.Fatal(err)
		}
		got := w.node(t)
		after, _ := record.Read(got)
		if got.Spec.Unschedulable || len(got.Spec.Taints) > 0 || !after.AllReleased() || podLists(w.client) != 0 {
			t.Errorf("after the hold: unschedulable %v, taints %v, record %+v; want the notice released and the node given back", got.Spec.Unschedulable, got.Spec.Taints, after)
		}
	})
}
