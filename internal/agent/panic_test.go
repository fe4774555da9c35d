package agent

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// TestReconcilePanicIsRetried: a reconcile that panics does not end the agent's loop; it is
// counted, logged with the node and the stack, and tried again after a growing pause.
func TestReconcilePanicIsRetried(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}
	cfg := sandboxtest.Config(t, config.Mode(""), "NODE_NAME", node.Name)
	logs := &sandboxtest.LogBuffer{}
	a := New(Options{Config: cfg, Client: fake.NewSimpleClientset(node), Logger: slog.New(slog.NewTextHandler(logs, nil)), Metrics: metrics.New()})
	a.firstRetry = 20 * time.Millisecond
	var (
		mu    sync.Mutex
		calls []time.Time
	)
	a.reconcile = func(context.Context, *corev1.Node) (time.Duration, error) {
		mu.Lock()
		calls = append(calls, time.Now())
		mu.Unlock()
		panic("a bug met on the node's record")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); a.episodes(ctx, node, make(chan struct{})) }()

	const tries = 5 // pauses of about 20, 40, 80 and 160 ms between them
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := len(calls)
		mu.Unlock()
		if n >= tries {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("reconciled %d times in 30 s, want %d", n, tries)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done

	mu.Lock()
	defer mu.Unlock()
	for i := 1; i < tries; i++ {
		// The backoff adds up to a fifth at random; never less than the doubling base.
		gap, least := calls[i].Sub(calls[i-1]), a.firstRetry<<(i-1)
		if gap < least {
			t.Errorf("retry %d came %s after the one before, want at least %s", i, gap, least)
		}
	}
	families, err := a.metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	counted := 0.0
	for _, f := range families {
		if f.GetName() == "lifeboat_reconcile_panics_total" {
			counted = f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	if counted < tries {
		t.Errorf("lifeboat_reconcile_panics_total = %v, want at least %d", counted, tries)
	}
	out := logs.String()
	for _, want := range []string{"reconciling the node panicked", "node=node-a", "a bug met on the node's record", "panic_test.go"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q", want)
		}
	}
}
