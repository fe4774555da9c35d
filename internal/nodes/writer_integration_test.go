// SPDX-License-Identifier: Apache-2.0

package nodes_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/test/sandbox"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// One control plane for all node-writer tests; each subtest has its own node.
func TestWriterAgainstAPIServer(t *testing.T) {
	c, _ := sandboxtest.Shared(t, sandbox.ClusterOptions{NoKwok: true})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	next := 0
	newNode := func(t *testing.T, mods ...func(*corev1.Node)) string {
		t.Helper()
		next++
		n := sandbox.NodeSpec{Index: next}.Node()
		for _, m := range mods {
			m(n)
		}
		if _, err := c.Client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		return n.Name
	}
	get := func(t *testing.T, name string) *corev1.Node {
		t.Helper()
		n, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	w := nodes.NewWriter(c.Client)

	t.Run("cordon and uncordon only undo Lifeboat's own cordon", func(t *testing.T) {
		free := newNode(t)
		if _, err := w.Apply(ctx, free, nil, "cordon", nodes.Cordon()); err != nil {
			t.Fatal(err)
		}
		if n := get(t, free); !n.Spec.Unschedulable || n.Annotations[nodes.AnnotationCordonedBy] != "true" {
			t.Fatalf("after cordon: unschedulable=%v annotations=%v", n.Spec.Unschedulable, n.Annotations)
		}
		res, err := w.Apply(ctx, free, nil, "uncordon", nodes.Uncordon())
		if err != nil || !res.Changed {
			t.Fatalf("uncordon: changed=%v err=%v", res.Changed, err)
		}
		if n := get(t, free); n.Spec.Unschedulable || n.Annotations[nodes.AnnotationCordonedBy] != "" {
			t.Fatalf("after uncordon: unschedulable=%v annotations=%v", n.Spec.Unschedulable, n.Annotations)
		}

		cordonedByAdmin := newNode(t, func(n *corev1.Node) { n.Spec.Unschedulable = true })
		for _, e := range []nodes.Edit{nodes.Cordon(), nodes.Uncordon()} {
			res, err := w.Apply(ctx, cordonedByAdmin, nil, "cordon/uncordon", e)
			if err != nil || res.Changed {
				t.Fatalf("pre-cordoned node: changed=%v err=%v", res.Changed, err)
			}
		}
		if n := get(t, cordonedByAdmin); !n.Spec.Unschedulable {
			t.Fatal("Lifeboat uncordoned a node an administrator had cordoned")
		}
	})

	t.Run("a stale copy never deletes another writer's taint", func(t *testing.T) {
		name := newNode(t)
		stale := get(t, name)
		// Another writer adds its taint after our read.
		if _, err := nodes.NewWriter(c.Client).Apply(ctx, name, nil, "user taint", nodes.AddTaint("team/dedicated", "gpu", corev1.TaintEffectNoSchedule)); err != nil {
			t.Fatal(err)
		}
		// A plain patch of the taint list from the stale copy would drop team/dedicated.
		var conflicts atomic.Int32
		lw := nodes.NewWriter(c.Client)
		lw.Conflicts = func() { conflicts.Add(1) }
		fc := clocktesting.NewFakePassiveClock(time.Now())
		lw.Clock = fc
		if _, err := lw.Apply(ctx, name, stale, "spot taint", nodes.AddTaint(nodes.TaintSpotInterruption, "e-1", corev1.TaintEffectNoSchedule)); err != nil {
			t.Fatal(err)
		}
		keys := taintKeys(get(t, name))
		if !keys["team/dedicated"] || !keys[nodes.TaintSpotInterruption] {
			t.Errorf("taints %v, want both team/dedicated and the spot taint", keys)
		}
		if conflicts.Load() != 1 {
			t.Errorf("%d conflicts, want exactly 1 (the stale copy refused, then a fresh read)", conflicts.Load())
		}
	})

	t.Run("nothing to do is decided on fresh data", func(t *testing.T) {
		name := newNode(t)
		if _, err := w.Apply(ctx, name, nil, "taint", nodes.AddTaint(nodes.TaintRebalance, "r-1", corev1.TaintEffectNoSchedule)); err != nil {
			t.Fatal(err)
		}
		staleWithTaint := get(t, name)
		if _, err := w.Apply(ctx, name, nil, "untaint", nodes.RemoveTaint(nodes.TaintRebalance, "")); err != nil {
			t.Fatal(err)
		}
		// The stale copy says the taint is there; the writer must not believe it.
		res, err := w.Apply(ctx, name, staleWithTaint, "taint again", nodes.AddTaint(nodes.TaintRebalance, "r-1", corev1.TaintEffectNoSchedule))
		if err != nil || !res.Changed {
			t.Fatalf("changed=%v err=%v", res.Changed, err)
		}
		if !taintKeys(get(t, name))[nodes.TaintRebalance] {
			t.Error("taint not restored")
		}
	})

	t.Run("dry run writes nothing", func(t *testing.T) {
		name := newNode(t)
		dry := nodes.NewWriter(c.Client)
		dry.DryRun = true
		res, err := dry.Apply(ctx, name, nil, "cordon", nodes.Cordon(), nodes.SetLabel(nodes.LabelExcludeFromLoadBalancers, "true"))
		if err != nil || !res.Changed || !strings.Contains(string(res.Patch), `"unschedulable":true`) {
			t.Fatalf("dry run: changed=%v patch=%s err=%v", res.Changed, res.Patch, err)
		}
		if n := get(t, name); n.Spec.Unschedulable || n.Labels[nodes.LabelExcludeFromLoadBalancers] != "" {
			t.Error("dry run changed the node")
		}
	})

	t.Run("errors name the node and the change", func(t *testing.T) {
		_, err := w.Apply(ctx, "no-such-node", nil, "cordon for spot notice e-9", nodes.Cordon())
		if err == nil || !strings.Contains(err.Error(), "node no-such-node: cordon for spot notice e-9: ") || !strings.Contains(err.Error(), "not found") {
			t.Errorf("error %v", err)
		}
	})

	t.Run("race: 20 concurrent writers lose and resurrect nothing", func(t *testing.T) {
		name := newNode(t, func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: "preexisting/taint", Effect: corev1.TaintEffectNoSchedule}}
		})
		const writers, rounds = 20, 15
		type model struct{ taint, label bool }
		final := make([]model, writers)
		var wg sync.WaitGroup
		errs := make(chan error, writers+1)
		for i := range writers {
			wg.Go(func() {
				ww := nodes.NewWriter(c.Client)
				key := fmt.Sprintf("writer-%02d.example/own", i)
				rng := rand.New(rand.NewPCG(uint64(i), 7))
				var m model
				for r := range rounds {
					var edits []nodes.Edit
					if rng.IntN(2) == 0 {
						m.taint = !m.taint
						if m.taint {
							edits = append(edits, nodes.AddTaint(key, fmt.Sprint(r), corev1.TaintEffectPreferNoSchedule))
						} else {
							edits = append(edits, nodes.RemoveTaint(key, ""))
						}
					} else {
						m.label = !m.label
						if m.label {
							edits = append(edits, nodes.SetLabel(key, fmt.Sprint(r)))
						} else {
							edits = append(edits, nodes.RemoveLabel(key))
						}
					}
					if _, err := ww.Apply(ctx, name, nil, key, edits...); err != nil {
						errs <- err
						return
					}
				}
				final[i] = m
			})
		}
		// Meanwhile Lifeboat taints, labels, cordons and uncordons the same node over and over.
		stop := make(chan struct{})
		var lifeboatRounds int
		var lwg sync.WaitGroup
		lwg.Go(func() {
			var hint *corev1.Node
			for {
				select {
				case <-stop:
					if _, err := w.Apply(ctx, name, hint, "final taint", nodes.AddTaint(nodes.TaintSpotInterruption, "final", corev1.TaintEffectNoSchedule),
						nodes.SetLabel(nodes.LabelExcludeFromLoadBalancers, "true"), nodes.Cordon()); err != nil {
						errs <- err
					}
					return
				default:
				}
				lifeboatRounds++
				on := lifeboatRounds%2 == 1
				edits := []nodes.Edit{nodes.Cordon(), nodes.AddTaint(nodes.TaintSpotInterruption, fmt.Sprint(lifeboatRounds), corev1.TaintEffectNoSchedule), nodes.SetLabel(nodes.LabelExcludeFromLoadBalancers, "true")}
				if !on {
					edits = []nodes.Edit{nodes.Uncordon(), nodes.RemoveTaint(nodes.TaintSpotInterruption, ""), nodes.RemoveLabel(nodes.LabelExcludeFromLoadBalancers)}
				}
				res, err := w.Apply(ctx, name, hint, "lifeboat round", edits...)
				if err != nil {
					errs <- err
					return
				}
				hint = res.Node // deliberately reuse possibly stale copies
				// Paced: a tight loop that needs no read per round starves the other writers,
				// which is not how Lifeboat writes (a few times per notice).
				time.Sleep(3 * time.Millisecond)
			}
		})
		wg.Wait()
		close(stop)
		lwg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}

		n := get(t, name)
		taints, lost, resurrected := taintKeys(n), 0, 0
		for i, m := range final {
			key := fmt.Sprintf("writer-%02d.example/own", i)
			_, hasLabel := n.Labels[key]
			for _, pair := range [][2]bool{{m.taint, taints[key]}, {m.label, hasLabel}} {
				switch {
				case pair[0] && !pair[1]:
					lost++
				case !pair[0] && pair[1]:
					resurrected++
				}
			}
		}
		if lost != 0 || resurrected != 0 {
			t.Errorf("%d lost and %d resurrected writes", lost, resurrected)
		}
		if !taints["preexisting/taint"] || !taints[nodes.TaintSpotInterruption] || !n.Spec.Unschedulable || n.Labels[nodes.LabelExcludeFromLoadBalancers] != "true" {
			t.Errorf("final node state wrong: taints %v unschedulable %v labels %v", taints, n.Spec.Unschedulable, n.Labels)
		}
		t.Logf("%d writers x %d rounds, %d Lifeboat rounds: 0 lost, 0 resurrected", writers, rounds, lifeboatRounds)
	})

	t.Run("the condition is set on the status alone, other conditions untouched", func(t *testing.T) {
		name := newNode(t)
		other := corev1.NodeCondition{Type: "example.com/DiskHealthy", Status: corev1.ConditionTrue, Reason: "Fine", Message: "theirs"}
		if _, err := nodes.NewWriter(c.Client).SetCondition(ctx, name, nil, other); err != nil {
			t.Fatal(err)
		}
		stale := get(t, name)
		// Another writer changes its condition after our read: our patch must not undo it.
		other.Message = "theirs, changed"
		if _, err := nodes.NewWriter(c.Client).SetCondition(ctx, name, nil, other); err != nil {
			t.Fatal(err)
		}
		var conflicts atomic.Int32
		lw := nodes.NewWriter(c.Client)
		lw.Conflicts = func() { conflicts.Add(1) }
		fc := clocktesting.NewFakePassiveClock(time.Now())
		lw.Clock = fc
		ours := corev1.NodeCondition{Type: nodes.ConditionInterruption, Status: corev1.ConditionTrue, Reason: "Draining", Message: "pod a/b held"}
		res, err := lw.SetCondition(ctx, name, stale, ours)
		if err != nil || !res.Changed {
			t.Fatalf("set: changed=%v err=%v", res.Changed, err)
		}
		if conflicts.Load() != 1 {
			t.Errorf("%d conflicts, want 1 (the stale copy's resourceVersion refused)", conflicts.Load())
		}
		n := get(t, name)
		got, theirs := nodes.ConditionOf(n, nodes.ConditionInterruption), nodes.ConditionOf(n, other.Type)
		if got == nil || got.Reason != "Draining" || got.Message != "pod a/b held" || theirs == nil || theirs.Message != "theirs, changed" {
			t.Fatalf("conditions %+v", n.Status.Conditions)
		}
		if res, err := lw.SetCondition(ctx, name, nil, ours); err != nil || res.Changed {
			t.Fatalf("the same again: changed=%v err=%v, want no write", res.Changed, err)
		}
		since := got.LastTransitionTime
		fc.SetTime(fc.Now().Add(time.Hour)) // the times are kept to the second
		ours.Reason, ours.Message = "HandedBack", "done"
		if _, err := lw.SetCondition(ctx, name, nil, ours); err != nil {
			t.Fatal(err)
		}
		if got := nodes.ConditionOf(get(t, name), ours.Type); !got.LastTransitionTime.Equal(&since) {
			t.Errorf("transition time moved from %v to %v with the status unchanged", since, got.LastTransitionTime)
		}
		ours.Status, ours.Reason = corev1.ConditionFalse, "EpisodeEnded"
		if _, err := lw.SetCondition(ctx, name, nil, ours); err != nil {
			t.Fatal(err)
		}
		n = get(t, name)
		if got := nodes.ConditionOf(n, ours.Type); got.Status != corev1.ConditionFalse || !got.LastTransitionTime.Time.Equal(fc.Now().UTC().Truncate(time.Second)) {
			t.Errorf("after the end: %+v, want it False since the writer's time now", got)
		}
		if len(n.Status.Conditions) != 2 {
			t.Errorf("conditions %+v, want theirs and ours", n.Status.Conditions)
		}
		// Removed from a stale copy: the conflict is retried, and theirs stays as they left it.
		stale = get(t, name)
		other.Message = "theirs, changed again"
		if _, err := nodes.NewWriter(c.Client).SetCondition(ctx, name, nil, other); err != nil {
			t.Fatal(err)
		}
		conflicts.Store(0)
		if res, err := lw.RemoveCondition(ctx, name, stale, ours.Type); err != nil || !res.Changed || conflicts.Load() != 1 {
			t.Fatalf("remove: changed=%v err=%v conflicts=%d; want a removal after one conflict", res.Changed, err, conflicts.Load())
		}
		n = get(t, name)
		if nodes.ConditionOf(n, ours.Type) != nil || len(n.Status.Conditions) != 1 || n.Status.Conditions[0].Message != "theirs, changed again" {
			t.Errorf("after the removal: %+v, want theirs alone, as they last wrote it", n.Status.Conditions)
		}
		if res, err := lw.RemoveCondition(ctx, name, nil, ours.Type); err != nil || res.Changed {
			t.Errorf("removed again: changed=%v err=%v, want no write", res.Changed, err)
		}
	})

	t.Run("a plain patch from a stale copy does lose the taint (why the precondition exists)", func(t *testing.T) {
		name := newNode(t)
		stale := get(t, name)
		if _, err := w.Apply(ctx, name, nil, "user taint", nodes.AddTaint("team/dedicated", "gpu", corev1.TaintEffectNoSchedule)); err != nil {
			t.Fatal(err)
		}
		taints := append(stale.Spec.Taints, corev1.Taint{Key: nodes.TaintSpotInterruption, Effect: corev1.TaintEffectNoSchedule})
		patch := fmt.Sprintf(`{"spec":{"taints":[{"key":%q,"effect":"NoSchedule"}]}}`, taints[0].Key)
		if _, err := c.Client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		if taintKeys(get(t, name))["team/dedicated"] {
			t.Fatal("expected the unconditional patch to drop the other writer's taint; the race test above would then prove nothing")
		}
	})
}

func taintKeys(n *corev1.Node) map[string]bool {
	out := map[string]bool{}
	for _, t := range n.Spec.Taints {
		out[t.Key] = true
	}
	return out
}
