package interruption

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/sandbox"
	"lifeboat.dev/lifeboat/internal/sandbox/sandboxtest"
)

func TestRelease(t *testing.T) {
	c := sandboxtest.Cluster(t, sandbox.ClusterOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	load := func(env ...string) *config.Config { return sandboxtest.Config(t, "", env...) }
	get := func(name string) *corev1.Node {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	index := 0
	newNode := func() (string, string) {
		index++
		created, err := c.AddNodes(ctx, sandbox.NodeSpec{Index: index})
		if err != nil {
			t.Fatal(err)
		}
		return created[0].Name, InstanceIDOf(created[0])
	}
	addPods := func(node string, names ...string) {
		if err := c.EnsureNamespace(ctx, "work"); err != nil {
			t.Fatal(err)
		}
		for _, name := range names {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "work", Name: name},
				Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "img"}}}}
			if _, err := c.Client.CoreV1().Pods("work").Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	scheduled := func(inst, event string, released bool) notice.Notice {
		return notice.Notice{ID: notice.ID(notice.ScheduledMaintenance, inst, event), Kind: notice.ScheduledMaintenance, InstanceID: inst,
			Deadline: time.Now().Add(time.Minute), Action: "system-maintenance", Released: released}
	}

	t.Run("a release computed from a stale copy never uncordons for another notice", func(t *testing.T) {
		node, inst := newNode()
		h := NewHandler(load("CORDON_ONLY", "true", "TAINT_NODE", "true"), c.Client, slog.New(slog.DiscardHandler))
		a := scheduled(inst, "instance-event-a", false)
		if err := h.Handle(ctx, a, node); err != nil {
			t.Fatal(err)
		}
		stale := get(node)
		staleRec, _ := ReadRecord(stale)
		spot := notice.Notice{ID: notice.ID(notice.SpotInterruption, inst, "terminate"), Kind: notice.SpotInterruption, InstanceID: inst, Deadline: time.Now().Add(2 * time.Minute)}
		if err := h.Handle(ctx, spot, node); err != nil {
			t.Fatal(err)
		}
		a.Released = true
		if err := h.release(ctx, a, stale, staleRec, slog.New(slog.DiscardHandler)); err != nil {
			t.Fatal(err)
		}
		n := get(node)
		r, _ := ReadRecord(n)
		if !n.Spec.Unschedulable || r.AllReleased() || len(r.Released) != 1 {
			t.Errorf("after releasing only the scheduled notice: unschedulable %v, record %+v", n.Spec.Unschedulable, r)
		}
	})

	t.Run("a node released after a drain is drained again by a later notice", func(t *testing.T) {
		node, inst := newNode()
		h := NewHandler(load(), c.Client, slog.New(slog.DiscardHandler))
		addPods(node, fmt.Sprintf("first-%d", index))
		if err := h.Handle(ctx, scheduled(inst, "instance-event-b", false), node); err != nil {
			t.Fatal(err)
		}
		if err := h.Handle(ctx, scheduled(inst, "instance-event-b", true), node); err != nil {
			t.Fatal(err)
		}
		if n := get(node); n.Spec.Unschedulable {
			t.Fatal("not uncordoned after the release")
		}
		addPods(node, fmt.Sprintf("second-%d", index)) // work comes back to the node
		spot := notice.Notice{ID: notice.ID(notice.SpotInterruption, inst, "terminate"), Kind: notice.SpotInterruption, InstanceID: inst, Deadline: time.Now().Add(2 * time.Minute)}
		if err := h.Handle(ctx, spot, node); err != nil {
			t.Fatal(err)
		}
		pods, _ := c.Client.CoreV1().Pods("work").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		if r, _ := ReadRecord(get(node)); r.Phase != PhaseDrained || len(pods.Items) != 0 {
			t.Errorf("record %+v, %d pods left: the later notice did not drain", r, len(pods.Items))
		}
	})
}
