// SPDX-License-Identifier: Apache-2.0

package controller_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/episode"
	"lifeboat.dev/lifeboat/internal/events"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/record"
	"lifeboat.dev/lifeboat/test/sandbox/fakeaws"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// addPolicyPod puts a pod on the node, changed by edit (annotations, tolerations).
func (w *intakeWorld) addPolicyPod(t *testing.T, ctx context.Context, n *corev1.Node, name string, edit func(*corev1.Pod)) {
	t.Helper()
	grace := int64(5)
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name},
		Spec: corev1.PodSpec{NodeName: n.Name, TerminationGracePeriodSeconds: &grace, Containers: []corev1.Container{{Name: "c", Image: "img"}}}}
	edit(p)
	if _, err := w.c.Client.CoreV1().Pods("shop").Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// eventMessage is the message of an Event of the reason on the named object ("" if none).
func (w *intakeWorld) eventMessage(t *testing.T, ctx context.Context, namespace, name, reason string) string {
	t.Helper()
	list, err := w.c.Client.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range list.Items {
		if e.InvolvedObject.Name == name && e.Reason == reason {
			return e.Message
		}
	}
	return ""
}

// podEvent waits a few seconds (Events are sent asynchronously) for an Event of the reason
// on a pod in shop and returns its message.
func (w *intakeWorld) podEvent(t *testing.T, ctx context.Context, pod, reason string) string {
	t.Helper()
	var msg string
	_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 5*time.Second, true, func(ctx context.Context) (bool, error) {
		msg = w.eventMessage(t, ctx, "shop", pod, reason)
		return msg != "", nil
	})
	return msg
}

// untouched reports whether the pod is still there and not being deleted.
func (w *intakeWorld) untouched(ctx context.Context, name string) bool {
	p, err := w.c.Client.CoreV1().Pods("shop").Get(ctx, name, metav1.GetOptions{})
	return err == nil && p.DeletionTimestamp == nil
}

// Pod policies. A pod marked not to disrupt stays under a rebalance recommendation (no
// reclaim), reported as holding the node; a Spot warning that follows evicts it, last, at
// the deadline minus its grace period. A pod that tolerates the node's interruption taint
// stays through a Spot warning.
func TestPodPolicies(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := newIntakeWorld(t, ctx, 2)
	rebalanced, tolerant := w.nodes[0], w.nodes[1]
	doNotDisrupt := func(p *corev1.Pod) { p.Annotations = map[string]string{drain.AnnotationDoNotDisrupt: "true"} }
	pinned := "batch-" + rebalanced.Name
	w.addPolicyPod(t, ctx, rebalanced, pinned, doNotDisrupt)
	watcher := "watcher-" + tolerant.Name
	w.addPolicyPod(t, ctx, tolerant, watcher, func(p *corev1.Pod) {
		p.Spec.Tolerations = []corev1.Toleration{{Key: nodes.TaintSpotInterruption, Operator: corev1.TolerationOpExists}}
	})
	w.addPolicyPod(t, ctx, tolerant, "ca-pinned-"+tolerant.Name, func(p *corev1.Pod) {
		p.Annotations = map[string]string{drain.AnnotationSafeToEvict: "false"}
	})
	w.run(t, ctx, "TAINT_NODE", "true")

	// A rebalance recommendation: everything leaves but the pinned pod.
	w.send(t, ctx, fakeaws.RebalanceRecommendation(episode.InstanceIDOf(rebalanced), time.Now()))
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		r, _ := record.Read(w.node(t, ctx, rebalanced))
		return r.Phase == record.PhaseDrained && len(r.Finished) == 1 && w.podsOn(t, ctx, rebalanced) == 1, nil
	})
	if err != nil {
		r, _ := record.Read(w.node(t, ctx, rebalanced))
		t.Fatalf("the rebalance drain did not finish with one pod left: record %+v, %d pods", r, w.podsOn(t, ctx, rebalanced))
	}
	if !w.untouched(ctx, pinned) {
		t.Fatal("the pod marked not to disrupt was evicted under a rebalance recommendation")
	}
	if r, _ := record.Read(w.node(t, ctx, rebalanced)); !slices.Equal(r.Held, []string{"shop/" + pinned}) {
		t.Errorf("record holds %v, want the pinned pod", r.Held)
	}
	if w.eventCount(t, ctx, rebalanced, events.ReasonPodsHeld) != 1 {
		t.Errorf("no %s Event on the node", events.ReasonPodsHeld)
	}
	if v := w.metrics.Value("lifeboat_drain_pods_left_total", "reason", "do_not_disrupt"); v != 1 {
		t.Errorf("lifeboat_drain_pods_left_total{reason=do-not-disrupt} = %v, want 1", v)
	}
	if msg := w.podEvent(t, ctx, pinned, events.ReasonPodHeld); !strings.Contains(msg, rebalanced.Name) || !strings.Contains(msg, "marked not to disrupt") {
		t.Errorf("the pinned pod's %s Event is %q; want it to name the node and the mark", events.ReasonPodHeld, msg)
	}
	// The episode gauges, read from the records: the node is drained and holds the pod.
	if v := w.metrics.Value("lifeboat_episode_pods_held"); v != 1 {
		t.Errorf("lifeboat_episode_pods_held = %v, want 1", v)
	}
	if v := w.metrics.Value("lifeboat_episodes", "phase", "drained"); v != 1 {
		t.Errorf("lifeboat_episodes{phase=drained} = %v, want 1", v)
	}

	// Spot warnings already 110 s old: the drain has its 30 s minimum budget.
	sent := time.Now()
	w.send(t, ctx, fakeaws.SpotInterruptionWarning(episode.InstanceIDOf(rebalanced), "terminate", sent.Add(-110*time.Second)),
		fakeaws.SpotInterruptionWarning(episode.InstanceIDOf(tolerant), "terminate", sent.Add(-110*time.Second)))
	leftAt := map[string]time.Time{}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 45*time.Second, true, func(ctx context.Context) (bool, error) {
		for _, name := range []string{pinned, "ca-pinned-" + tolerant.Name, "app-" + tolerant.Name} {
			if _, seen := leftAt[name]; !seen && !w.untouched(ctx, name) {
				leftAt[name] = time.Now()
			}
		}
		r1, _ := record.Read(w.node(t, ctx, rebalanced))
		r2, _ := record.Read(w.node(t, ctx, tolerant))
		return len(r1.Finished) == 2 && len(r2.Finished) == 1, nil
	})
	if err != nil {
		t.Fatalf("the Spot warnings were not finished: %v", err)
	}
	// 30 s budget minus the 5 s grace period minus the margin: about 23 s after the notice.
	for _, name := range []string{pinned, "ca-pinned-" + tolerant.Name} {
		if at := leftAt[name].Sub(sent); at < 18*time.Second || at > 28*time.Second {
			t.Errorf("%s left %v after the Spot warning; want about 23 s (last, at the deadline minus its grace period)", name, at)
		}
	}
	if at := leftAt["app-"+tolerant.Name].Sub(sent); at > 10*time.Second {
		t.Errorf("the ordinary pod left %v after the Spot warning; want at once", at)
	}
	if r, _ := record.Read(w.node(t, ctx, rebalanced)); len(r.Held) != 0 {
		t.Errorf("record still holds %v after the reclaim's drain", r.Held)
	}
	if v := w.metrics.Value("lifeboat_episode_pods_held"); v != 0 {
		t.Errorf("lifeboat_episode_pods_held = %v after the reclaim's drain, want 0", v)
	}
	if v := w.metrics.Value("lifeboat_drain_deadline_used_ratio"); v < 3 {
		t.Errorf("lifeboat_drain_deadline_used_ratio observed %v drains, want the three", v)
	}
	if !w.untouched(ctx, watcher) {
		t.Error("the pod tolerating the Spot taint was evicted")
	}
	if v := w.metrics.Value("lifeboat_drain_pods_left_total", "reason", "tolerates_taint"); v != 1 {
		t.Errorf("lifeboat_drain_pods_left_total{reason=tolerates_taint} = %v, want 1", v)
	}
}

// A pod a PodDisruptionBudget holds is named, with its budget, in a Warning Event on the pod
// and on its node and in the blocked-pods gauge while it is held; once the budget allows, it
// leaves and the gauge drops.
func TestBlockedPodReported(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := newIntakeWorld(t, ctx, 1)
	n := w.nodes[0]
	w.addPolicyPod(t, ctx, n, "ledger-0", func(p *corev1.Pod) { p.Labels = map[string]string{"app": "ledger"} })
	lift := sandboxtest.BlockEvictions(t, ctx, w.c, "shop", map[string]string{"app": "ledger"})
	w.run(t, ctx)
	w.send(t, ctx, spotMessage(episode.InstanceIDOf(n)))

	eventOn := func(namespace, name string) string {
		return w.eventMessage(t, ctx, namespace, name, events.ReasonEvictionBlocked)
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return eventOn("shop", "ledger-0") != "" && eventOn("", n.Name) != "", nil
	})
	if err != nil {
		t.Fatalf("no %s Events on the pod and the node: pod %q, node %q", events.ReasonEvictionBlocked, eventOn("shop", "ledger-0"), eventOn("", n.Name))
	}
	for _, msg := range []string{eventOn("shop", "ledger-0"), eventOn("", n.Name)} {
		if !strings.Contains(msg, "PodDisruptionBudget block-evictions") {
			t.Errorf("Event %q does not name the budget", msg)
		}
	}
	if !strings.Contains(eventOn("", n.Name), "shop/ledger-0") {
		t.Errorf("the node's Event %q does not name the pod", eventOn("", n.Name))
	}
	if v := w.metrics.Value("lifeboat_drain_blocked_pods", "reason", "disruption_budget"); v != 1 {
		t.Errorf("lifeboat_drain_blocked_pods{reason=disruption_budget} = %v while held, want 1", v)
	}
	lift()
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return w.podsOn(t, ctx, n) == 0 && w.metrics.Value("lifeboat_drain_blocked_pods", "reason", "disruption_budget") == 0, nil
	})
	if err != nil {
		t.Errorf("after the budget was lifted: %d pods on the node, blocked gauge %v", w.podsOn(t, ctx, n), w.metrics.Value("lifeboat_drain_blocked_pods", "reason", "disruption_budget"))
	}
}

// With READINESS_REPORT_INTERVAL set, the leader runs the periodic check at once and then
// periodically, and publishes the workloads found per namespace and reason.
func TestPeriodicCheck(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w := newIntakeWorld(t, ctx, 1)
	w.addPolicyPod(t, ctx, w.nodes[0], "slow-0", func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](600) })
	w.run(t, ctx, "READINESS_REPORT_INTERVAL", "1m")
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		return w.metrics.Value("lifeboat_readiness_last_run_timestamp_seconds", "result", "ok") > 0, nil
	})
	if err != nil {
		t.Fatalf("the readiness check did not run: %v", err)
	}
	// The world's app pod (300 s) and slow-0 (600 s).
	if v := w.metrics.Value("lifeboat_readiness_findings", "namespace", "shop", "reason", "grace_period_above_warning"); v != 2 {
		t.Errorf("lifeboat_readiness_findings{shop, grace_period_above_warning} = %v, want 2", v)
	}
	if v := w.metrics.Value("lifeboat_readiness_findings", "namespace", "shop", "reason", "unmanaged_pod"); v < 1 {
		t.Errorf("lifeboat_readiness_findings{shop, unmanaged_pod} = %v, want the pods without a controller", v)
	}
}
