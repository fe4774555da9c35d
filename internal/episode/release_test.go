// SPDX-License-Identifier: Apache-2.0

package episode

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
	"lifeboat.dev/lifeboat/internal/record"
	"lifeboat.dev/lifeboat/test/sandbox"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

func TestRelease(t *testing.T) {
	c, _ := sandboxtest.Shared(t, sandbox.ClusterOptions{})
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
		h := NewHandler(load("CORDON_ONLY", "true", "TAINT_NODE", "true"), c.Client, slog.New(slog.DiscardHandler), Options{})
		a := scheduled(inst, "instance-event-a", false)
		if err := h.Handle(ctx, a, node); err != nil {
			t.Fatal(err)
		}
		stale := get(node)
		staleRec, _ := record.Read(stale)
		spot := notice.Notice{ID: notice.ID(notice.SpotInterruption, inst, "terminate"), Kind: notice.SpotInterruption, InstanceID: inst, Deadline: time.Now().Add(2 * time.Minute)}
		if err := h.Handle(ctx, spot, node); err != nil {
			t.Fatal(err)
		}
		a.Released = true
		if err := h.ends.release(ctx, a, stale, staleRec, slog.New(slog.DiscardHandler)); err != nil {
			t.Fatal(err)
		}
		n := get(node)
		r, _ := record.Read(n)
		if !n.Spec.Unschedulable || r.AllReleased() || len(r.Released) != 1 {
			t.Errorf("after releasing only the scheduled notice: unschedulable %v, record %+v", n.Spec.Unschedulable, r)
		}
	})

	t.Run("a node released after a drain is drained again by a later notice", func(t *testing.T) {
		node, inst := newNode()
		h := NewHandler(load(), c.Client, slog.New(slog.DiscardHandler), Options{})
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
		if r, _ := record.Read(get(node)); r.Phase != record.PhaseDrained || len(pods.Items) != 0 {
			t.Errorf("record %+v, %d pods left: the later notice did not drain", r, len(pods.Items))
		}
	})

	t.Run("a node that booted again since its episode is given back, released notices kept", func(t *testing.T) {
		node, inst := newNode()
		setBoot := func(boot string) {
			n := get(node)
			n.Status.NodeInfo.BootID = boot
			if _, err := c.Client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		setBoot("boot-1")
		h := NewHandler(load("CORDON_ONLY", "true", "TAINT_NODE", "true"), c.Client, slog.New(slog.DiscardHandler), Options{})
		gone, stop := scheduled(inst, "instance-event-gone", false), notice.Notice{ID: notice.ID(notice.SpotInterruption, inst, "stop"),
			Kind: notice.SpotInterruption, InstanceID: inst, Deadline: time.Now().Add(2 * time.Minute), Action: "stop"}
		for _, n := range []notice.Notice{gone, stop} {
			if err := h.Handle(ctx, n, node); err != nil {
				t.Fatal(err)
			}
		}
		// The scheduled event is completed while the Spot stop keeps the node cordoned.
		gone.Released = true
		if err := h.Handle(ctx, gone, node); err != nil {
			t.Fatal(err)
		}
		// Same boot: nothing to end.
		if ended, err := h.EndBootedEpisode(ctx, get(node)); err != nil || ended {
			t.Fatalf("same boot: ended=%v %v", ended, err)
		}
		setBoot("boot-2")
		ended, err := h.EndBootedEpisode(ctx, get(node))
		if err != nil || !ended {
			t.Fatalf("new boot: ended=%v %v", ended, err)
		}
		n := get(node)
		r, _ := record.Read(n)
		if n.Spec.Unschedulable || len(n.Spec.Taints) != 0 || r.Phase != record.PhaseNone || len(r.Notices) != 0 {
			t.Errorf("not given back: unschedulable %v, taints %v, record %+v", n.Spec.Unschedulable, n.Spec.Taints, r)
		}
		if len(r.Released) != 1 || r.Released[0] != gone.ID {
			t.Errorf("released notices %v, want %s kept", r.Released, gone.ID)
		}
		// The released event, still listed, changes nothing; the same stop notice opens a new episode.
		gone.Released = false
		if err := h.Handle(ctx, gone, node); err != nil || get(node).Spec.Unschedulable {
			t.Errorf("a released notice acted on again: %v", err)
		}
		if err := h.Handle(ctx, stop, node); err != nil {
			t.Fatal(err)
		}
		n = get(node)
		if r, _ := record.Read(n); !n.Spec.Unschedulable || r.BootID != "boot-2" || !r.Has(stop.ID) {
			t.Errorf("the stop notice after the new boot: unschedulable %v, record %+v", n.Spec.Unschedulable, r)
		}
	})

	t.Run("a cordon-only episode escalated to a drain reports the drain once more", func(t *testing.T) {
		node, inst := newNode()
		addPods(node, "escalated-0")
		h := NewHandler(load("ENABLE_REBALANCE_MONITORING", "true"), c.Client, slog.New(slog.DiscardHandler), Options{})
		rebalance := notice.Notice{ID: notice.ID(notice.Rebalance, inst, ""), Kind: notice.Rebalance, Source: notice.SourceIMDS,
			InstanceID: inst, Deadline: time.Now().Add(time.Minute)}
		spot := notice.Notice{ID: notice.ID(notice.SpotInterruption, inst, "terminate"), Kind: notice.SpotInterruption,
			Source: notice.SourceIMDS, InstanceID: inst, Deadline: time.Now().Add(2 * time.Minute)}
		for _, n := range []notice.Notice{rebalance, rebalance, spot, spot} {
			if err := h.Handle(ctx, n, node); err != nil {
				t.Fatal(err)
			}
		}
		r, _ := record.Read(get(node))
		if fmt.Sprint(r.Reported) != fmt.Sprint([]string{record.OutcomeCordoned, record.OutcomeDrained}) || r.Phase != record.PhaseDrained {
			t.Errorf("record %+v, want the cordon and then the drain reported, once each", r)
		}
	})
}
