package controller

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// TestReconcilePanicIsOneNodes: a reconcile that panics for one node is recovered, counted,
// logged with the node and the stack, and that node comes back with a growing delay, while
// the other node goes on being reconciled and the process lives on.
func TestReconcilePanicIsOneNodes(t *testing.T) {
	const base = 20 * time.Millisecond
	nodes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, name := range []string{"bad", "good"} {
		if err := nodes.Add(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	m := metrics.New()
	logs := &sandboxtest.LogBuffer{}
	var (
		mu    sync.Mutex
		calls = map[string][]time.Time{}
	)
	r := &reconciler{
		metrics: m,
		nodes:   nodes,
		log:     slog.New(slog.NewTextHandler(logs, nil)),
		queue: workqueue.NewTypedRateLimitingQueue(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](base, time.Minute)),
		reconcile: func(_ context.Context, n *corev1.Node) (time.Duration, error) {
			mu.Lock()
			calls[n.Name] = append(calls[n.Name], time.Now())
			mu.Unlock()
			if n.Name == "bad" {
				panic("a bug met on node " + n.Name)
			}
			return base, nil // the good node comes back on its own, as a scheduled start does
		},
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.run(ctx) }()
	r.queue.Add("bad")
	r.queue.Add("good")

	const tries = 5 // delays of 20, 40, 80 and 160 ms between them
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := len(calls["bad"])
		mu.Unlock()
		if n >= tries {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the panicking node was reconciled %d times in 30 s, want %d", n, tries)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done

	mu.Lock()
	defer mu.Unlock()
	bad, good := calls["bad"], calls["good"]
	for i := 1; i < tries; i++ {
		gap, least := bad[i].Sub(bad[i-1]), base<<(i-1)
		if gap < least {
			t.Errorf("retry %d of the panicking node came %s after the one before, want at least the backoff %s", i, gap, least)
		}
	}
	// While the bad node backed off, the good one kept being reconciled.
	during := 0
	for _, at := range good {
		if at.After(bad[0]) && at.Before(bad[tries-1]) {
			during++
		}
	}
	if during < 3 {
		t.Errorf("the other node was reconciled %d times while the panicking one backed off, want several", during)
	}
	if r.queue.NumRequeues("good") != 0 {
		t.Errorf("the other node has %d failures, want none", r.queue.NumRequeues("good"))
	}
	if got := counterValue(t, m, "lifeboat_reconcile_panics_total"); got < tries {
		t.Errorf("lifeboat_reconcile_panics_total = %v, want at least %d", got, tries)
	}
	out := logs.String()
	for _, want := range []string{"reconciling the node panicked", "node=bad", "a bug met on node bad", "panic_test.go"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, firstLines(out, 20))
		}
	}
}

func counterValue(t *testing.T, m *metrics.Metrics, name string) float64 {
	t.Helper()
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		total := 0.0
		for _, metric := range f.GetMetric() {
			total += metric.GetCounter().GetValue()
		}
		return total
	}
	t.Fatalf("no metric %s", name)
	return 0
}

func firstLines(s string, n int) string {
	lines := bytes.Split([]byte(s), []byte("\n"))
	if len(lines) > n {
		lines = lines[:n]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
