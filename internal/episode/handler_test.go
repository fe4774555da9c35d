// SPDX-License-Identifier: Apache-2.0

package episode_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"lifeboat.dev/lifeboat/internal/episode"
	"lifeboat.dev/lifeboat/internal/lifecycle"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/record"
	"lifeboat.dev/lifeboat/test/sandbox"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

func TestHandlerCoalescing(t *testing.T) {
	c, _ := sandboxtest.Shared(t, sandbox.ClusterOptions{AuditLog: true})
	rc, err := c.UserConfig("lifeboat-handler", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	client := kubernetes.NewForConfigOrDie(rc)
	index := 0
	nodeWithPods := func(t *testing.T, pods int) (string, string) {
		t.Helper()
		index++
		created, err := c.AddNodes(context.Background(), sandbox.NodeSpec{Index: index})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.EnsureNamespace(context.Background(), "work"); err != nil {
			t.Fatal(err)
		}
		for i := range pods {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "work", Name: fmt.Sprintf("n%d-p%d", index, i), Labels: map[string]string{"node-index": fmt.Sprint(index)}},
				Spec: corev1.PodSpec{NodeName: created[0].Name, Containers: []corev1.Container{{Name: "c", Image: "img"}}}}
			if _, err := c.Client.CoreV1().Pods("work").Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		return created[0].Name, episode.InstanceIDOf(created[0])
	}

	t.Run("spot and ASG notices at once: one drain, each completed after it", func(t *testing.T) {
		node, inst := nodeWithPods(t, 6)
		var completions sync.Map
		var hookCalls atomic.Int32
		h := episode.NewHandler(sandboxtest.Config(t, ""), client, slog.New(slog.DiscardHandler), episode.Options{
			Completer: episode.CompleteFunc(func(ctx context.Context, _ string, n notice.Notice) (*lifecycle.Completed, error) {
				hookCalls.Add(1)
				completions.Store(n.ID, true)
				return nil, nil
			})})
		soon := time.Now().Add(2 * time.Minute)
		ns := []notice.Notice{
			{ID: notice.ID(notice.SpotInterruption, inst, "terminate"), Kind: notice.SpotInterruption, InstanceID: inst, Deadline: soon},
			{ID: notice.ID(notice.ASGTermination, inst, "token"), Kind: notice.ASGTermination, Source: notice.SourceQueue, InstanceID: inst, Deadline: soon},
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var wg sync.WaitGroup
		errs := make([]error, len(ns))
		for i, n := range ns {
			wg.Go(func() { errs[i] = h.Handle(ctx, n, node) })
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("notice %s: %v", ns[i].ID, err)
			}
		}
		evictions := map[string]int{}
		events, err := c.AuditEvents(sandbox.ByUser("lifeboat-handler"))
		if err != nil {
			t.Fatal(err)
		}
		lists := 0
		for _, e := range events {
			if e.ObjectRef != nil && e.ObjectRef.Subresource == "eviction" {
				evictions[e.ObjectRef.Name]++
			}
			if e.Verb == "list" && e.ObjectRef != nil && e.ObjectRef.Resource == "pods" {
				lists++
			}
		}
		if len(evictions) != 6 || lists != 1 {
			t.Errorf("%d pods evicted, %d pod lists; want 6 pods and one drain", len(evictions), lists)
		}
		for pod, n := range evictions {
			if n != 1 {
				t.Errorf("pod %s evicted %d times", pod, n)
			}
		}
		if hookCalls.Load() != 2 {
			t.Errorf("completion hook ran %d times, want once per notice", hookCalls.Load())
		}
		n, _ := c.Client.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
		if r, _ := record.Read(n); r.Phase != record.PhaseDrained || len(r.Notices) != 2 {
			t.Errorf("record %+v", r)
		}
	})

	t.Run("a more urgent notice brings the running drain's deadline forward", func(t *testing.T) {
		node, inst := nodeWithPods(t, 2)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		sandboxtest.BlockEvictions(t, ctx, c, "work", map[string]string{"node-index": fmt.Sprint(index)})
		// An hour's drain budget, so the hook's drain starts at once with an hour to go; pods
		// are forced past their budget in the last 28 s: the hook's an hour away, the spot
		// notice's (at least 30 s, the shortest drain budget) almost at once.
		h := episode.NewHandler(sandboxtest.Config(t, "", "NODE_TERMINATION_GRACE_PERIOD", "3600", "FORCE_DELETE_BEFORE_DEADLINE_SECONDS", "28"),
			client, slog.New(slog.DiscardHandler), episode.Options{})
		hook := notice.Notice{ID: notice.ID(notice.ASGTermination, inst, "token"), Kind: notice.ASGTermination, Source: notice.SourceQueue,
			InstanceID: inst, Deadline: time.Now().Add(time.Hour)}
		hookDone := make(chan error, 1)
		go func() { hookDone <- h.Handle(ctx, hook, node) }()
		sandboxtest.UntilNode(t, ctx, client, node, "the hook's drain running, its evictions refused", func(n *corev1.Node) bool {
			c := nodes.ConditionOf(n, nodes.ConditionInterruption)
			return c != nil && strings.Contains(c.Message, "pod(s) held")
		})
		spot := notice.Notice{ID: notice.ID(notice.SpotInterruption, inst, "terminate"), Kind: notice.SpotInterruption, InstanceID: inst, Deadline: time.Now().Add(10 * time.Second)}
		joined := time.Now()
		if err := h.Handle(ctx, spot, node); err != nil {
			t.Fatalf("spot notice: %v", err)
		}
		if took := time.Since(joined); took > 30*time.Second {
			t.Errorf("the drain ended %v after the spot notice joined it, past the spot notice's 30 s budget", took)
		}
		if err := <-hookDone; err != nil {
			t.Fatalf("hook notice: %v", err)
		}
		pods, err := c.Client.CoreV1().Pods("work").List(ctx, metav1.ListOptions{LabelSelector: "node-index=" + fmt.Sprint(index)})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				t.Errorf("pod %s was not deleted", p.Name)
			}
		}
		n, _ := c.Client.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
		if r, _ := record.Read(n); r.Phase != record.PhaseDrained || len(r.Notices) != 2 {
			t.Errorf("record %+v, want drained for both notices", r)
		}
	})

	t.Run("a notice days ahead never delays an urgent one", func(t *testing.T) {
		node, inst := nodeWithPods(t, 3)
		h := episode.NewHandler(sandboxtest.Config(t, ""), client, slog.New(slog.DiscardHandler), episode.Options{})
		ctx, cancel := context.WithCancel(context.Background())
		scheduledDone := make(chan error, 1)
		scheduled := notice.Notice{ID: notice.ID(notice.ScheduledMaintenance, inst, "instance-event-1"), Kind: notice.ScheduledMaintenance,
			InstanceID: inst, Deadline: time.Now().Add(72 * time.Hour), Action: "system-maintenance"}
		go func() { scheduledDone <- h.Handle(ctx, scheduled, node) }()
		// Recorded: the scheduled notice's drain now waits for its start.
		sandboxtest.UntilNode(t, ctx, client, node, "the scheduled notice recorded", func(n *corev1.Node) bool {
			r, err := record.Read(n)
			return err == nil && r.Has(scheduled.ID)
		})
		spotCtx, spotCancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer spotCancel()
		spot := notice.Notice{ID: notice.ID(notice.SpotInterruption, inst, "terminate"), Kind: notice.SpotInterruption, InstanceID: inst, Deadline: time.Now().Add(2 * time.Minute)}
		if err := h.Handle(spotCtx, spot, node); err != nil {
			t.Fatalf("spot notice: %v", err)
		}
		n, _ := c.Client.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
		if r, _ := record.Read(n); r.Phase != record.PhaseDrained {
			t.Errorf("record %+v, want drained by the spot notice", r)
		}
		cancel()
		if err := <-scheduledDone; err == nil {
			t.Error("the scheduled notice finished instead of still waiting for its start")
		}
	})
}
