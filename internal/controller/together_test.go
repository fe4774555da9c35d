// SPDX-License-Identifier: Apache-2.0

package controller_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"lifeboat.dev/lifeboat/internal/agent"
	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/episode"
	"lifeboat.dev/lifeboat/internal/events"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/record"
	"lifeboat.dev/lifeboat/internal/source/imds"
	"lifeboat.dev/lifeboat/internal/webhook"
	"lifeboat.dev/lifeboat/internal/wiring"
	"lifeboat.dev/lifeboat/test/sandbox"
	"lifeboat.dev/lifeboat/test/sandbox/fakeaws"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// webhookCounter counts the notifications that name each node.
type webhookCounter struct {
	mu     sync.Mutex
	server *httptest.Server
	bodies []string
}

func newWebhookCounter(t *testing.T) *webhookCounter {
	w := &webhookCounter{}
	w.server = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.mu.Lock()
		w.bodies = append(w.bodies, string(b))
		w.mu.Unlock()
	}))
	t.Cleanup(w.server.Close)
	return w
}

func (w *webhookCounter) naming(node string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	count := 0
	for _, b := range w.bodies {
		if strings.Contains(b, node) {
			count++
		}
	}
	return count
}

// runAgent runs an agent for the node, its instance metadata from a mock started with the
// arguments, until the test ends.
func (w *intakeWorld) runAgent(t *testing.T, ctx context.Context, node *corev1.Node, mockArgs []string, hook *webhookCounter, settings ...string) {
	t.Helper()
	m := sandboxtest.IMDS(t, sandbox.IMDSOptions{InstanceID: episode.InstanceIDOf(node), Hostname: node.Name, Args: mockArgs})
	rc, err := w.c.UserConfig("lifeboat-agent-"+node.Name, "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	cfg := sandboxtest.Config(t, config.ModeAgent, append([]string{"NODE_NAME", node.Name, "INSTANCE_METADATA_URL", m.URL,
		"IMDS_POLL_INTERVAL", "200ms", "EMIT_KUBERNETES_EVENTS", "true", "WEBHOOK_URL", hook.server.URL}, settings...)...)
	client := kubernetes.NewForConfigOrDie(rc)
	logs := &sandboxtest.LogBuffer{}
	recorder, stopEvents, err := events.New(client, wiring.Events(cfg, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	sender, err := webhook.New(wiring.Webhook(cfg), webhook.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a := agent.New(agent.Options{Config: cfg, Client: client, IMDS: imds.NewClient(cfg.MetadataURL, cfg.MetadataTries, false), Logger: slog.New(slog.NewTextHandler(logs, nil)),
		Handler: episode.Options{Events: recorder, Webhook: sender}})
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.Run(runCtx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && runCtx.Err() == nil {
			t.Errorf("agent for %s stopped: %v", node.Name, err)
		}
		stopEvents()
		if t.Failed() {
			t.Logf("agent log for %s:\n%s", node.Name, logs)
		}
	})
}

// addHeldPods puts two pods on the node that a PodDisruptionBudget ("held", in namespace
// shop) lets none of leave until the test deletes it.
func (w *intakeWorld) addHeldPods(t *testing.T, ctx context.Context, node *corev1.Node) {
	t.Helper()
	for i := range 2 {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: fmt.Sprintf("held-%d", i), Labels: map[string]string{"app": "held"}},
			Spec: corev1.PodSpec{NodeName: node.Name, Containers: []corev1.Container{{Name: "c", Image: "img"}}}}
		if _, err := w.c.Client.CoreV1().Pods("shop").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "held"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(2)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "held"}}}}
	if _, err := w.c.Client.PolicyV1().PodDisruptionBudgets("shop").Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// An agent on every node and a controller reading the queue, as a cluster may run them while
// moving from one mode to the other: each node is drained once and reported once.
//   - the same Spot warning from instance metadata and from the queue: one notice, taken by
//     whichever comes first, one drain;
//   - a rebalance recommendation the agent drains for, then a Spot warning from the queue
//     while that drain is held by a disruption budget: the controller waits for the agent's
//     drain instead of running a second one, then finishes its own notice.
func TestAgentAndControllerOnOneCluster(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	w := newIntakeWorld(t, ctx, 2)
	same, held := w.nodes[0], w.nodes[1]
	id := func(n *corev1.Node) string { return episode.InstanceIDOf(n) }
	hook := newWebhookCounter(t)
	w.addPods(t, ctx, same, "web", 2)
	// The held node's pods may not leave until the test lets them.
	w.addHeldPods(t, ctx, held)

	inTwoMinutes := time.Now().Add(2 * time.Minute).UTC().Format(time.RFC3339)
	w.runAgent(t, ctx, same, []string{"spot", "-a", "terminate", "-t", inTwoMinutes}, hook)
	// The root command serves a rebalance recommendation at once; its Spot warning and
	// lifecycle state come an hour later, and its scheduled events are not acted on.
	w.runAgent(t, ctx, held, []string{"-d", "3600", "--asg-termination-delay-sec", "3600"}, hook,
		"ENABLE_REBALANCE_DRAINING", "true", "ENABLE_SCHEDULED_EVENT_DRAINING", "false")
	w.run(t, ctx, "WEBHOOK_URL", hook.server.URL)
	w.send(t, ctx, fakeaws.SpotInterruptionWarning(id(same), "terminate", time.Now()))

	// The agent's rebalance drain is under way on the held node; then the Spot warning comes.
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		r, _ := record.Read(w.node(t, ctx, held))
		return r.Owner != nil && r.Owner.Origin == string(notice.SourceIMDS) && w.eventCount(t, ctx, held, events.ReasonDrainStarted) == 1, nil
	})
	if err != nil {
		t.Fatal("the agent did not start draining the held node for its rebalance recommendation")
	}
	spotID := notice.ID(notice.SpotInterruption, id(held), "terminate")
	w.send(t, ctx, fakeaws.SpotInterruptionWarning(id(held), "terminate", time.Now()))
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return w.metrics.Value("lifeboat_drain_claims_total", "event", metrics.ClaimWaited) > 0, nil
	})
	if err != nil {
		r, _ := record.Read(w.node(t, ctx, held))
		t.Fatalf("the controller did not wait for the agent's drain: record %+v", r)
	}
	if got := w.eventCountReaching(t, ctx, held, events.ReasonDrainStarted, 1); got != 1 {
		t.Errorf("%s: %d drains started while the agent's is held, want 1", held.Name, got)
	}
	if err := w.c.Client.PolicyV1().PodDisruptionBudgets("shop").Delete(ctx, "held", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	w.waitDrained(t, ctx, same, notice.ID(notice.SpotInterruption, id(same), "terminate"))
	w.waitDrained(t, ctx, held, spotID)
	w.waitDrained(t, ctx, held, notice.ID(notice.Rebalance, id(held), ""))
	// The webhook is sent after the write that records the drain: wait for it, then give a
	// second drain or webhook the time to show.
	_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return hook.naming(same.Name) > 0 && hook.naming(held.Name) > 0, nil
	})
	time.Sleep(2 * time.Second)
	for _, n := range w.nodes {
		r, _ := record.Read(w.node(t, ctx, n))
		if r.Owner != nil {
			t.Errorf("%s: the claim outlived the drain: %+v", n.Name, r.Owner)
		}
		if got := w.eventCountReaching(t, ctx, n, events.ReasonDrainStarted, 1); got != 1 {
			t.Errorf("%s: %d drains started, want 1", n.Name, got)
		}
		if got := w.eventCountReaching(t, ctx, n, events.ReasonDrained, 1); got != 1 {
			t.Errorf("%s: %d %s Events, want 1", n.Name, got, events.ReasonDrained)
		}
		if got := hook.naming(n.Name); got != 1 {
			t.Errorf("%s: %d webhook notifications, want 1", n.Name, got)
		}
	}
	r, _ := record.Read(w.node(t, ctx, same))
	if len(r.Intents) != 1 {
		t.Errorf("%s: intents %+v, want the one Spot notice", same.Name, r.Intents)
	}
	r, _ = record.Read(w.node(t, ctx, held))
	origins := []string{}
	for _, i := range r.Intents {
		origins = append(origins, i.Origin)
	}
	slices.Sort(origins)
	if len(origins) != 2 || origins[0] != string(notice.SourceIMDS) || !strings.HasPrefix(origins[1], "queue ") {
		t.Errorf("%s: intents from %v, want the agent's rebalance and the controller's Spot warning", held.Name, origins)
	}
}

// The controller's claim on a drain nobody waits for is never renewed; once an agent with a
// Spot warning for the node waits (it contests the claim), the controller renews every
// OwnerRenew, so the agent does not take over past the lease while the controller's drain is
// held by a disruption budget. The node is drained once, and the agent only
// finishes its own notice.
func TestControllerRenewsOnlyOnceAnAgentWaits(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	w := newIntakeWorld(t, ctx, 1)
	held := w.nodes[0]
	id := episode.InstanceIDOf(held)
	hook := newWebhookCounter(t)
	w.addHeldPods(t, ctx, held)
	// A queue's rebalance recommendation drains by NODE_TERMINATION_GRACE_PERIOD: ten minutes.
	w.run(t, ctx, "WEBHOOK_URL", hook.server.URL, "NODE_TERMINATION_GRACE_PERIOD", "600")
	w.send(t, ctx, fakeaws.RebalanceRecommendation(id, time.Now()))
	readRecord := func() record.Record {
		r, _ := record.Read(w.node(t, ctx, held))
		return r
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		r := readRecord()
		return r.Owner != nil && strings.HasPrefix(r.Owner.Origin, "queue ") && w.eventCount(t, ctx, held, events.ReasonDrainStarted) == 1, nil
	})
	if err != nil {
		t.Fatalf("the controller did not start draining: record %+v", readRecord())
	}
	claimed := readRecord().Owner.Renewed
	time.Sleep(3 * time.Second)
	if got := w.metrics.Value("lifeboat_drain_claims_total", "event", metrics.ClaimRenewed); got != 0 {
		t.Errorf("%v renewals while nobody waited for the drain, want none", got)
	}

	// Its deadline is later than the controller's drain's, which it leaves as it is: only the
	// contest makes the controller renew.
	inFifteenMinutes := time.Now().Add(15 * time.Minute).UTC().Format(time.RFC3339)
	w.runAgent(t, ctx, held, []string{"spot", "-a", "terminate", "-t", inFifteenMinutes}, hook)
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		o := readRecord().Owner
		return o != nil && !o.Contested.IsZero(), nil
	})
	if err != nil {
		t.Fatalf("the agent did not contest the controller's claim: record %+v", readRecord())
	}
	contested := readRecord().Owner.Contested
	// Past the lease from the contest: had the controller not renewed, the agent would
	// have taken over and started a second drain.
	time.Sleep(time.Until(contested.Add(episode.OwnerLease + 8*time.Second)))
	o := readRecord().Owner
	switch {
	case o == nil || !strings.HasPrefix(o.Origin, "queue "):
		t.Errorf("the controller's claim was taken over: %+v", o)
	case !o.Renewed.After(contested) || !o.Renewed.After(claimed):
		t.Errorf("claim %+v not renewed since the contest at %v", o, contested)
	}
	if got := w.metrics.Value("lifeboat_drain_claims_total", "event", metrics.ClaimRenewed); got < 2 {
		t.Errorf("%v renewals in the lease after the contest, want 2 (every %v)", got, episode.OwnerRenew)
	}
	if got := w.eventCountReaching(t, ctx, held, events.ReasonDrainStarted, 1); got != 1 {
		t.Errorf("%d drains started while the controller's is held, want 1", got)
	}
	if err := w.c.Client.PolicyV1().PodDisruptionBudgets("shop").Delete(ctx, "held", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	w.waitDrained(t, ctx, held, notice.ID(notice.Rebalance, id, ""))
	w.waitDrained(t, ctx, held, notice.ID(notice.SpotInterruption, id, "terminate"))
	time.Sleep(2 * time.Second) // a second drain or webhook would show by now
	if r := readRecord(); r.Owner != nil {
		t.Errorf("the claim outlived the drain: %+v", r.Owner)
	}
	if got := w.eventCountReaching(t, ctx, held, events.ReasonDrainStarted, 1); got != 1 {
		t.Errorf("%d drains started, want 1", got)
	}
	if got := w.eventCountReaching(t, ctx, held, events.ReasonDrained, 1); got != 1 {
		t.Errorf("%d %s Events, want 1", got, events.ReasonDrained)
	}
	// The controller reported the drain (this harness gives it no webhook); the agent, which
	// only finished its own notice, reports nothing.
	if got := hook.naming(held.Name); got != 0 {
		t.Errorf("%d webhook notifications from the agent, want none", got)
	}
	if got := w.metrics.Value("lifeboat_drain_claims_total", "event", metrics.ClaimLost); got != 0 {
		t.Errorf("the controller lost its claim %v times", got)
	}
}
