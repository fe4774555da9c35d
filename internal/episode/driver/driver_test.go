// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"lifeboat.dev/lifeboat/internal/panics"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// fakeReconciler calls reconcile and keeps the time of every call per node.
type fakeReconciler struct {
	mu        sync.Mutex
	calls     map[string][]time.Time
	called    chan struct{} // closed and replaced at every call
	reconcile func(ctx context.Context, node *corev1.Node) (time.Duration, error)
}

func (f *fakeReconciler) Reconcile(ctx context.Context, node *corev1.Node) (time.Duration, error) {
	f.mu.Lock()
	if f.calls == nil {
		f.calls = map[string][]time.Time{}
	}
	f.calls[node.Name] = append(f.calls[node.Name], time.Now())
	if f.called != nil {
		close(f.called)
	}
	f.called = make(chan struct{})
	f.mu.Unlock()
	return f.reconcile(ctx, node)
}

func (f *fakeReconciler) of(name string) []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.calls[name]...)
}

// namedNodes answers every name with a node of that name, unless read says otherwise.
type namedNodes struct {
	read func(name string) (*corev1.Node, error)
}

func (n namedNodes) Node(_ context.Context, name string) (*corev1.Node, error) {
	if n.read != nil {
		return n.read(name)
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, nil
}

// panicCount counts the panics recovered at site reconcile.
type panicCount struct{ n atomic.Int32 }

func (p *panicCount) PanicRecovered(site string) {
	if site == panics.Reconcile.Name {
		p.n.Add(1)
	}
}

// running is a driver at work until the test ends (or stop is called).
type running struct {
	d    *Driver
	logs *sandboxtest.LogBuffer
	stop func()
}

func start(t *testing.T, o Options) running {
	t.Helper()
	logs := &sandboxtest.LogBuffer{}
	o.Logger = slog.New(slog.NewTextHandler(logs, nil))
	if o.Nodes == nil {
		o.Nodes = namedNodes{}
	}
	d, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); d.Run(ctx) }()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return running{d: d, logs: logs, stop: stop}
}

// waitCalls waits, call by call, until the node was reconciled at least n times; on the
// bubble's clock, the driver's timers fire as soon as everything waits for them. An hour
// without it fails the test.
func waitCalls(t *testing.T, f *fakeReconciler, name string, n int) []time.Time {
	t.Helper()
	timeout := time.After(time.Hour)
	for {
		f.mu.Lock()
		if f.called == nil {
			f.called = make(chan struct{})
		}
		calls, called := append([]time.Time(nil), f.calls[name]...), f.called
		f.mu.Unlock()
		if len(calls) >= n {
			return calls
		}
		select {
		case <-called:
		case <-timeout:
			t.Fatalf("node %s reconciled %d times in an hour, want %d", name, len(calls), n)
		}
	}
}

// growing checks that each pause between calls is at least the doubling backoff's.
func growing(t *testing.T, what string, calls []time.Time, base time.Duration) {
	t.Helper()
	for i := 1; i < len(calls); i++ {
		if gap, least := calls[i].Sub(calls[i-1]), base<<(i-1); gap < least {
			t.Errorf("%s: retry %d came %s after the one before, want at least the backoff %s", what, i, gap, least)
		}
	}
}

// A reconcile that panics for one node is recovered, counted, logged with the node and the
// stack, and that node comes back with a growing delay, while the other node goes on being
// reconciled and the driver lives on.
func TestPanicIsOneNodes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const base, tries = 10 * time.Millisecond, 5
		f := &fakeReconciler{reconcile: func(_ context.Context, n *corev1.Node) (time.Duration, error) {
			if n.Name == "bad" {
				panic("a bug met on node " + n.Name)
			}
			return base, nil // the good node comes back on its own, as a scheduled start does
		}}
		panics := &panicCount{}
		r := start(t, Options{Reconciler: f, Workers: 2, FirstRetry: base, MaxRetry: time.Minute, Panics: panics})
		r.d.Add("bad")
		r.d.Add("good")
		bad := waitCalls(t, f, "bad", tries)[:tries]
		r.stop()

		growing(t, "the panicking node", bad, base)
		during := 0
		for _, at := range f.of("good") {
			if at.After(bad[0]) && at.Before(bad[tries-1]) {
				during++
			}
		}
		if during < 3 {
			t.Errorf("the other node was reconciled %d times while the panicking one backed off, want several", during)
		}
		if n := r.d.limiter.NumRequeues("good"); n != 0 {
			t.Errorf("the other node has %d failures, want none", n)
		}
		if got := panics.n.Load(); got < tries {
			t.Errorf("%d panics counted, want at least %d", got, tries)
		}
		out := r.logs.String()
		for _, want := range []string{"recovered a panic", "site=reconcile", "node=bad", "a bug met on node bad", "driver_test.go"} {
			if !strings.Contains(out, want) {
				t.Errorf("log lacks %q", want)
			}
		}
		if strings.Contains(out, "not done yet") {
			t.Error("a panic was logged twice: as a panic and as a failure")
		}
	})
}

// A node whose reconcile asks to wait comes back once the wait is over, and not again once
// it has nothing more to do.
func TestWaitComesBackAfterIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const wait = 50 * time.Millisecond
		var calls atomic.Int32
		f := &fakeReconciler{reconcile: func(context.Context, *corev1.Node) (time.Duration, error) {
			if calls.Add(1) == 1 {
				return wait, nil
			}
			return 0, nil
		}}
		r := start(t, Options{Reconciler: f})
		r.d.Add("n")
		got := waitCalls(t, f, "n", 2)
		if gap := got[1].Sub(got[0]); gap < wait {
			t.Errorf("came back %s after the first reconcile, want after the wait %s", gap, wait)
		}
		time.Sleep(time.Hour)
		if n := len(f.of("n")); n != 2 {
			t.Errorf("reconciled %d times, want 2: done means not back until woken", n)
		}
		if n := r.d.limiter.NumRequeues("n"); n != 0 {
			t.Errorf("%d failures remembered, want none", n)
		}
	})
}

// A failing reconcile is retried with a doubling backoff and logged; a success afterwards
// starts the backoff afresh.
func TestErrorBacksOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const base, failures = 10 * time.Millisecond, 4
		var calls atomic.Int32
		f := &fakeReconciler{reconcile: func(context.Context, *corev1.Node) (time.Duration, error) {
			if calls.Add(1) <= failures {
				return 0, errors.New("the API server is away")
			}
			return 0, nil
		}}
		r := start(t, Options{Reconciler: f, FirstRetry: base, MaxRetry: time.Second})
		r.d.Add("n")
		got := waitCalls(t, f, "n", failures+1)
		growing(t, "the failing node", got, base)
		r.stop()
		if n := r.d.limiter.NumRequeues("n"); n != 0 {
			t.Errorf("%d failures remembered after the success, want none", n)
		}
		out := r.logs.String()
		for _, want := range []string{"not done yet; retrying", "node=n", "the API server is away", "retryIn="} {
			if !strings.Contains(out, want) {
				t.Errorf("log lacks %q", want)
			}
		}
	})
}

// A node that cannot be read is retried with backoff; one that is gone is not reconciled.
func TestNodeReads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const base = 10 * time.Millisecond
		var reads atomic.Int32
		nodes := namedNodes{read: func(name string) (*corev1.Node, error) {
			switch {
			case name == "gone":
				return nil, nil
			case reads.Add(1) <= 2:
				return nil, errors.New("connection refused")
			}
			return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, nil
		}}
		f := &fakeReconciler{reconcile: func(context.Context, *corev1.Node) (time.Duration, error) { return 0, nil }}
		r := start(t, Options{Reconciler: f, Nodes: nodes, FirstRetry: base})
		r.d.Add("gone")
		r.d.Add("flaky")
		began := time.Now()
		got := waitCalls(t, f, "flaky", 1)
		if waited := got[0].Sub(began); waited < base+2*base {
			t.Errorf("reconciled %s after two failed reads, want after their backoff (%s at least)", waited, 3*base)
		}
		r.stop()
		if n := len(f.of("gone")); n != 0 {
			t.Errorf("a node that is gone was reconciled %d times", n)
		}
		if !strings.Contains(r.logs.String(), "connection refused") {
			t.Error("the failed read is not logged")
		}
	})
}

// At most Workers nodes are reconciled at once, and one node never twice at once; a node
// added while it is reconciled is reconciled once more afterwards.
func TestWorkersAndOneReconcilePerNode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const workers, nodes = 3, 9
		var (
			now, most atomic.Int32
			perNode   sync.Map // name -> *atomic.Int32 in flight
			twice     atomic.Bool
			release   = make(chan struct{})
		)
		f := &fakeReconciler{reconcile: func(_ context.Context, n *corev1.Node) (time.Duration, error) {
			in, _ := perNode.LoadOrStore(n.Name, &atomic.Int32{})
			if in.(*atomic.Int32).Add(1) > 1 {
				twice.Store(true)
			}
			defer in.(*atomic.Int32).Add(-1)
			v := now.Add(1)
			defer now.Add(-1)
			for old := most.Load(); v > old && !most.CompareAndSwap(old, v); old = most.Load() {
			}
			<-release
			return 0, nil
		}}
		r := start(t, Options{Reconciler: f, Workers: workers})
		names := []string{"n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8"}
		for _, n := range names[:nodes] {
			r.d.Add(n)
		}
		synctest.Wait()
		if n := now.Load(); n != workers {
			t.Fatalf("%d nodes reconciled at once with %d waiting, want %d", n, nodes, workers)
		}
		r.d.Add("n0") // while n0 is being reconciled
		close(release)
		for _, n := range names {
			want := 1
			if n == "n0" {
				want = 2
			}
			waitCalls(t, f, n, want)
		}
		r.stop()
		if got := most.Load(); got != workers {
			t.Errorf("%d nodes reconciled at once, want %d", got, workers)
		}
		if twice.Load() {
			t.Error("a node was reconciled twice at once")
		}
		if n := len(f.of("n0")); n != 2 {
			t.Errorf("the node woken during its reconcile was reconciled %d times, want 2", n)
		}
	})
}

// Run returns only once every worker has: a reconcile in flight when ctx ends finishes
// first, and its failure then is not retried.
func TestShutdownWaitsForWorkers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		entered, release, finished := make(chan struct{}), make(chan struct{}), atomic.Bool{}
		f := &fakeReconciler{reconcile: func(ctx context.Context, _ *corev1.Node) (time.Duration, error) {
			close(entered)
			<-ctx.Done()
			<-release // work that ends a while after ctx
			finished.Store(true)
			return 0, ctx.Err()
		}}
		r := start(t, Options{Reconciler: f, Workers: 4})
		r.d.Add("n")
		<-entered
		stopped := make(chan struct{})
		go func() { r.stop(); close(stopped) }()
		synctest.Wait()
		select {
		case <-stopped:
			t.Fatal("Run returned while a reconcile was still in flight")
		default:
		}
		close(release)
		<-stopped
		if !finished.Load() {
			t.Fatal("Run returned before the reconcile in flight")
		}
		if n := len(f.of("n")); n != 1 {
			t.Errorf("reconciled %d times, want 1", n)
		}
		if strings.Contains(r.logs.String(), "not done yet") {
			t.Error("a reconcile cut short by the end was logged as a failure to retry")
		}
	})
}

// Each backoff pause is lengthened by at most a fifth, at random.
func TestBackoffJitter(t *testing.T) {
	d, err := New(Options{Reconciler: &fakeReconciler{}, Nodes: namedNodes{}, FirstRetry: time.Second, MaxRetry: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer d.ShutDown()
	seen := map[time.Duration]bool{}
	for i := range 50 {
		name := string(rune('a' + i%26))
		if i >= 26 {
			name += "2"
		}
		got := d.limiter.When(name)
		if got < time.Second || got > 1200*time.Millisecond {
			t.Fatalf("first pause %s, want within [1s, 1.2s]", got)
		}
		seen[got] = true
	}
	if len(seen) < 10 {
		t.Errorf("%d distinct first pauses of 50, want them spread", len(seen))
	}
	for range 20 {
		d.limiter.When("long")
	}
	if got := d.limiter.When("long"); got < time.Minute || got > 72*time.Second {
		t.Errorf("pause after many failures %s, want the cap of a minute lengthened by at most a fifth", got)
	}
}

func TestNewRefusesBadOptions(t *testing.T) {
	f, nodes := &fakeReconciler{}, namedNodes{}
	for _, tc := range []struct {
		name string
		o    Options
		want string
	}{
		{"no reconciler", Options{Nodes: nodes}, "Reconciler"},
		{"no nodes", Options{Reconciler: f}, "Nodes"},
		{"negative workers", Options{Reconciler: f, Nodes: nodes, Workers: -1}, "Workers (-1)"},
		{"negative retry", Options{Reconciler: f, Nodes: nodes, FirstRetry: -time.Second}, "FirstRetry (-1s)"},
		{"first retry over the most", Options{Reconciler: f, Nodes: nodes, FirstRetry: time.Minute, MaxRetry: time.Second}, "FirstRetry 1m0s is longer than MaxRetry 1s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := New(tc.o)
			if err == nil {
				d.ShutDown()
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not name %q", err, tc.want)
			}
		})
	}
}
