// SPDX-License-Identifier: Apache-2.0

package controller_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/episode"
	"lifeboat.dev/lifeboat/internal/events"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/test/sandbox"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// TestInterruptionVisible drains a node whose pod a PodDisruptionBudget holds, as an operator
// watches it: the node's lifeboat.dev/Interruption condition is True, Draining, naming the held
// pod and its budget, and its lifeboat.dev/phase label says draining; every pod the drain moves
// gets an Event of its own; once the budget allows, the condition says HandedBack; when an
// operator takes the node back the episode ends and the condition turns False, the label gone.
// The condition's writes, from the audit log: one per phase change, no more. The interruption's
// latency is measured once per stage.
func TestInterruptionVisible(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := newOperateWorld(t, ctx, sandbox.ClusterOptions{AuditLog: true})
	grace := int64(5)
	ledger := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "ledger-0", Labels: map[string]string{"app": "ledger"}},
		Spec: corev1.PodSpec{NodeName: w.node.Name, TerminationGracePeriodSeconds: &grace, Containers: []corev1.Container{{Name: "c", Image: "img"}}}}
	if _, err := w.c.Client.CoreV1().Pods("shop").Create(ctx, ledger, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	lift := sandboxtest.BlockEvictions(t, ctx, w.c, "shop", map[string]string{"app": "ledger"})
	cfg := sandboxtest.Config(t, config.ModeController, "ENABLE_SQS_TERMINATION_DRAINING", "true", "QUEUE_URL", w.queueURL,
		"AWS_REGION", "us-east-1", "AWS_ENDPOINT", w.fake.URL(), "CLUSTER_NAME", "sandbox", "SQS_MSG_VISIBILITY_TIMEOUT_SEC", "5",
		"EMIT_KUBERNETES_EVENTS", "true", "WAIT_FOR_LOAD_BALANCER_TARGETS", "false")
	m := metrics.New()
	w.run(t, ctx, cfg, "lifeboat", m, nil)
	w.send(t, ctx, spotMessage(w.instance))

	var last *corev1.Node
	waitFor := func(what string, ok func(c *corev1.NodeCondition, n *corev1.Node) bool) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 45*time.Second, true, func(ctx context.Context) (bool, error) {
			n, err := w.c.Client.CoreV1().Nodes().Get(ctx, w.node.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			last = n
			c := nodes.ConditionOf(n, nodes.ConditionInterruption)
			return c != nil && ok(c, n), nil
		})
		if err != nil {
			t.Fatalf("%s: condition %+v, labels %v", what, nodes.ConditionOf(last, nodes.ConditionInterruption), last.Labels)
		}
	}
	waitFor("draining, naming the held pod", func(c *corev1.NodeCondition, n *corev1.Node) bool {
		return c.Status == corev1.ConditionTrue && c.Reason == episode.ConditionDraining &&
			strings.Contains(c.Message, "shop/ledger-0") && strings.Contains(c.Message, "PodDisruptionBudget block-evictions")
	})
	if got := last.Labels[nodes.LabelPhase]; got != "draining" {
		t.Errorf("label %s = %q while draining, want draining", nodes.LabelPhase, got)
	}
	evictionEvent := func(pod string) string {
		t.Helper()
		var msg string
		_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
			list, err := w.c.Client.CoreV1().Events("shop").List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			for _, e := range list.Items {
				if e.InvolvedObject.Name == pod && e.Reason == events.ReasonPodEvicted {
					msg = e.Message
				}
			}
			return msg != "", nil
		})
		return msg
	}
	for _, pod := range []string{"web-0", "web-1"} {
		if msg := evictionEvent(pod); !strings.Contains(msg, w.node.Name) {
			t.Errorf("pod %s: %s Event %q, want one naming the node", pod, events.ReasonPodEvicted, msg)
		}
	}
	if msg := evictionEvent("ledger-0"); msg != "" {
		t.Errorf("the held pod has an eviction Event while held: %q", msg)
	}

	lift()
	waitFor("handed back", func(c *corev1.NodeCondition, n *corev1.Node) bool {
		return c.Status == corev1.ConditionTrue && c.Reason == episode.ConditionHandedBack && n.Labels[nodes.LabelPhase] == "drained"
	})
	if msg := evictionEvent("ledger-0"); !strings.Contains(msg, w.node.Name) {
		t.Errorf("the pod held, then moved: %s Event %q, want one naming the node", events.ReasonPodEvicted, msg)
	}
	since := nodes.ConditionOf(last, nodes.ConditionInterruption).LastTransitionTime
	// The interruption's latency, from the warning's time, once per stage.
	for _, stage := range []string{metrics.StageCordoned, metrics.StageDrained, metrics.StageHandedBack} {
		if got := m.Value("lifeboat_interruption_latency_seconds", "kind", "spot_interruption", "stage", stage); got != 1 {
			t.Errorf("lifeboat_interruption_latency_seconds{kind=spot_interruption, stage=%s} counted %v, want 1", stage, got)
		}
	}

	// An operator takes the node back: the episode is over.
	if _, err := w.c.Client.CoreV1().Nodes().Patch(ctx, w.node.Name, types.MergePatchType, []byte(`{"spec":{"unschedulable":false}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("cleared", func(c *corev1.NodeCondition, n *corev1.Node) bool {
		_, labelled := n.Labels[nodes.LabelPhase]
		return c.Status == corev1.ConditionFalse && c.Reason == episode.ConditionEpisodeEnded && !labelled
	})
	if c := nodes.ConditionOf(last, nodes.ConditionInterruption); c.LastTransitionTime.Equal(&since) {
		t.Errorf("the condition's transition time did not move when it turned False: %+v", c)
	}
	for _, c := range last.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
			t.Errorf("the node's Ready condition changed: %+v", c)
		}
	}

	// Writes of the condition: Draining, its message refreshed when the held pod was named (at
	// most once per 30 s), HandedBack, False. The audit log is written behind the answers: wait
	// for the last of them.
	var audit []sandbox.AuditEvent
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		var err error
		audit, err = w.c.AuditEvents(func(e sandbox.AuditEvent) bool {
			return e.User.Username == "lifeboat" && e.Verb == "patch" && e.ObjectRef != nil && e.ObjectRef.Resource == "nodes" && e.ObjectRef.Subresource == "status"
		})
		return err == nil && len(audit) >= 3, err
	})
	if err != nil {
		t.Fatalf("the condition's writes are not in the audit log: %d of at least 3 (%v)", len(audit), err)
	}
	written := 0
	for _, e := range audit {
		if e.ResponseStatus != nil && e.ResponseStatus.Code == 200 {
			written++
		}
	}
	t.Logf("condition writes in the episode: %d (%d status patches)", written, len(audit))
	if written < 3 || written > 5 {
		t.Errorf("%d condition writes in the episode, want 3 to 5 (one per phase change, one refresh)", written)
	}
}
