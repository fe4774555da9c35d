// SPDX-License-Identifier: Apache-2.0

package pacing

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// turn is one request's acquisition, started in its own goroutine.
type turn struct {
	granted chan func() // receives the request's done func at its turn
	failed  chan error  // receives the error that ended its wait
}

func acquire(ctx context.Context, b *Budget, lane Lane) turn {
	t := turn{granted: make(chan func(), 1), failed: make(chan error, 1)}
	go func() {
		done, err := b.Acquire(ctx, lane)
		if err != nil {
			t.failed <- err
			return
		}
		t.granted <- done
	}()
	return t
}

// holding fills the budget's bound with requests that stay in flight until released.
func holding(t *testing.T, b *Budget, lane Lane, n int) (release func()) {
	t.Helper()
	var dones []func()
	for range n {
		done, err := b.Acquire(context.Background(), lane)
		if err != nil {
			t.Fatal(err)
		}
		dones = append(dones, done)
	}
	return func() {
		for _, d := range dones {
			d()
		}
	}
}

func TestLanesAndDeadlinesOrderTheQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New(Options{Start: 1, Fixed: true})
		release := holding(t, b, Ordinary, 1)

		var mu sync.Mutex
		var order []string
		var granted sync.WaitGroup
		enqueue := func(name string, lane Lane, deadline time.Duration) {
			ctx := context.Background()
			if deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, deadline)
				t.Cleanup(cancel)
			}
			granted.Go(func() {
				done, err := b.Acquire(ctx, lane)
				if err != nil {
					t.Errorf("%s: %v", name, err)
					return
				}
				mu.Lock()
				order = append(order, name)
				mu.Unlock()
				done() // the bound of one goes to the next only now
			})
			synctest.Wait() // queued before the next one arrives
		}
		enqueue("event", Background, 0)
		enqueue("eviction due in 60s", Ordinary, time.Minute)
		enqueue("eviction due in 10s", Ordinary, 10*time.Second)
		enqueue("record write", Ordinary, 0) // no deadline: due when it arrived, so before both
		enqueue("cordon", Urgent, 0)         // its own bound: at once, though the shared one is full
		mu.Lock()
		if len(order) != 1 || order[0] != "cordon" {
			t.Errorf("granted %v while the bound was full; want only the cordon", order)
		}
		mu.Unlock()

		release()
		granted.Wait()
		want := []string{"cordon", "record write", "eviction due in 10s", "eviction due in 60s", "event"}
		if strings.Join(order, ", ") != strings.Join(want, ", ") {
			t.Fatalf("granted %v, want %v", order, want)
		}
	})
}

func TestBoundLimitsRequestsInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New(Options{Start: 8, Fixed: true})
		const requests = 200
		var inFlight atomic.Int32
		answer := make(chan struct{}) // each send ends one request in flight
		var wg sync.WaitGroup
		for range requests {
			wg.Go(func() {
				done, err := b.Acquire(context.Background(), Ordinary)
				if err != nil {
					t.Error(err)
					return
				}
				inFlight.Add(1)
				<-answer
				inFlight.Add(-1)
				done()
			})
		}
		// Once everything waits, the bound is in flight, or what is left.
		for answered := range requests {
			synctest.Wait()
			if n, want := inFlight.Load(), int32(min(8, requests-answered)); n != want {
				t.Fatalf("%d requests in flight with %d of %d answered; want %d", n, answered, requests, want)
			}
			answer <- struct{}{}
		}
		wg.Wait()
		if n := b.InFlight(Ordinary); n != 0 {
			t.Errorf("%d requests counted in flight after all ended", n)
		}
	})
}

// While cordons are in flight or waiting, the other lanes keep to an eighth of the bound, so
// the server answers the cordons first.
func TestUrgentRequestsKeepTheOthersToAShare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New(Options{Start: 32, Fixed: true})
		endCordon := holding(t, b, Urgent, 1)
		var evictions []turn
		for range 20 {
			evictions = append(evictions, acquire(context.Background(), b, Ordinary))
		}
		synctest.Wait()
		if got := b.InFlight(Ordinary); got != 32/urgentShare {
			t.Errorf("%d evictions in flight beside a cordon; want %d", got, 32/urgentShare)
		}
		endCordon()
		synctest.Wait()
		if got := b.InFlight(Ordinary); got != 20 {
			t.Errorf("%d evictions in flight once the cordon ended; want all 20", got)
		}
		for _, e := range evictions {
			(<-e.granted)()
		}
	})
}

// Thousands of waits cancelled at a drain's deadline must leave nothing behind: the next
// request goes as soon as the bound has room.
func TestCancelledWaitsLeaveNoDebt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New(Options{Start: 4, Fixed: true})
		release := holding(t, b, Ordinary, 4)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		var waits []turn
		for range 2000 {
			waits = append(waits, acquire(ctx, b, Ordinary))
		}
		for _, w := range waits { // each ends with the context, two seconds on
			select {
			case err := <-w.failed:
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("wait: %v", err)
				}
			case <-w.granted:
				t.Fatal("a request was granted while the bound was full")
			}
		}
		if n := b.Waiting(Ordinary); n != 0 {
			t.Errorf("%d requests still queued after their contexts ended", n)
		}
		release()
		if n := b.InFlight(Ordinary); n != 0 {
			t.Errorf("%d requests counted in flight after all ended", n)
		}
		start := time.Now()
		done, err := b.Acquire(context.Background(), Ordinary)
		if err != nil {
			t.Fatal(err)
		}
		done()
		done() // a second call changes nothing
		if waited := time.Since(start); waited > 0 {
			t.Errorf("the next request waited %v after the cancellations; want none", waited)
		}
		if n := b.InFlight(Ordinary); n != 0 {
			t.Errorf("%d in flight after a request ended twice; want 0", n)
		}
	})
}

func TestRateCapSpacesTheTurns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New(Options{Rate: 50, Burst: 10, Fixed: true})
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
		defer cancel()
		var granted atomic.Int32
		var wg sync.WaitGroup
		for range 1000 {
			wg.Go(func() {
				if done, err := b.Acquire(ctx, Ordinary); err == nil {
					granted.Add(1)
					done()
				}
			})
		}
		wg.Wait()
		// The burst at once, then 50 a second for 4 s.
		if got := granted.Load(); got < 205 || got > 211 {
			t.Errorf("granted %d in 4 s under a cap of 50/s with a burst of 10; want 210", got)
		}
	})
}

// recorder keeps the changes a budget reports.
type recorder struct {
	mu      sync.Mutex
	reasons []string
}

func (r *recorder) BudgetChanged(_ float64, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reasons = append(r.reasons, reason)
}

func (r *recorder) last() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.reasons) == 0 {
		return ""
	}
	return r.reasons[len(r.reasons)-1]
}

// answering lets a budget hear answers and reconsider its bound, one interval at a time.
type answering struct {
	t   *testing.T
	b   *Budget
	rec *recorder
}

// interval lets the budget hear n answers of kind (verb and resource), then reconsider: the
// first event after an interval (here an answer that never came back, which counts for
// nothing) does it. A 429 is the server's throttling.
func (a answering) interval(kind, code string, took time.Duration, n int) {
	a.answers(kind, code, code == "429", took, n)
}

// budgetRefusals is interval with n 429s that are a disruption budget's refusals of evictions.
func (a answering) budgetRefusals(took time.Duration, n int) {
	a.answers("create pods/eviction", "429", false, took, n)
}

func (a answering) answers(kind, code string, throttled bool, took time.Duration, n int) {
	verb, resource, _ := strings.Cut(kind, " ")
	for range n {
		a.b.KubeRequest("main", verb, resource, code, throttled, took)
	}
	time.Sleep(a.b.opts.Interval)
	a.b.KubeRequest("main", "get", "nodes", "error", false, 0)
}

func (a answering) expect(limit float64, reason string) {
	a.t.Helper()
	if got := a.b.Limit(); got != limit || a.rec.last() != reason {
		a.t.Fatalf("bound %g (%s), want %g (%s)", got, a.rec.last(), limit, reason)
	}
}

// backlog queues n requests that stay in flight once granted, so that the bound always holds
// some back; cancel ends their waits.
func backlog(b *Budget, n int) (cancel func()) {
	ctx, cancel := context.WithCancel(context.Background())
	for range n {
		acquire(ctx, b, Ordinary)
	}
	synctest.Wait()
	return cancel
}

func TestBoundFollowsTheServersAnswers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		b := New(Options{Start: 32, Ceiling: 100, Floor: 2, Interval: time.Second, Observer: rec})
		a := answering{t, b, rec}
		const eviction = "create pods/eviction"

		endBacklog := backlog(b, 2000)
		// The first answers of a kind only set its baseline: nothing to judge them by yet.
		a.interval(eviction, "201", 100*time.Millisecond, 10)
		a.expect(32, "")
		// Answers at the idle pace: nothing queued at the server, and requests wait. The bound
		// rises by half each interval up to the ceiling, as long as the server has not pushed
		// back.
		for _, want := range []float64{48, 72, 100, 100} {
			a.interval(eviction, "201", 100*time.Millisecond, 10)
			a.expect(want, ReasonDemand)
		}
		// Too few answers to judge, however fast: no raise.
		b.limit = 90
		a.interval(eviction, "201", 100*time.Millisecond, minSamples-1)
		a.expect(90, ReasonDemand)
		// A disruption budget's refusals are 429s too, but the server is not throttling: the
		// bound holds.
		a.budgetRefusals(2*time.Millisecond, 10)
		a.expect(90, ReasonDemand)
		// A 429 halves it.
		a.interval(eviction, "429", 5*time.Millisecond, 1)
		a.expect(45, ReasonThrottled)
		// For a few intervals after it (this one included), demand does not raise it: the
		// refused requests come back together after Retry-After.
		for range quietAfterThrottle - 2 {
			a.interval(eviction, "201", 100*time.Millisecond, 10)
			a.expect(45, ReasonThrottled)
		}
		// Then, pushed back once, demand raises it by a tenth an interval.
		a.interval(eviction, "201", 100*time.Millisecond, 10)
		a.expect(49.5, ReasonDemand)
		// Ten answers a second past the idle pace in one second: ten requests queued at the
		// server on average, between an eighth and a quarter of the bound. It holds.
		a.interval(eviction, "201", 1100*time.Millisecond, 10)
		a.expect(49.5, ReasonDemand)
		// Twenty queued, over a quarter of the bound (12.375): lowered by half the excess.
		a.interval(eviction, "201", 2100*time.Millisecond, 10)
		lowered := 49.5 - (20-49.5/4)/2
		a.expect(lowered, ReasonQueueing)
		// A hundred queued: lowered, by half at most in one interval, and not under the start.
		a.interval(eviction, "201", 10100*time.Millisecond, 10)
		a.expect(32, ReasonQueueing)
		a.interval(eviction, "201", 10100*time.Millisecond, 10)
		a.expect(32, ReasonQueueing)
		// Lists take as long as their result is large: they say nothing about a queue.
		a.interval("list pods", "200", 30*time.Second, 100)
		a.expect(32, ReasonQueueing)
		// An eviction of a pod already gone is answered at once: a kind of its own, so that
		// it does not make accepted evictions look queued.
		a.interval(eviction, "404", 2*time.Millisecond, 10)
		a.interval(eviction, "201", 100*time.Millisecond, 100)
		a.expect(35.2, ReasonDemand)
		endBacklog()
		synctest.Wait()
		if n := b.Waiting(Ordinary); n != 0 {
			t.Fatalf("%d requests still queued after their contexts ended", n)
		}
		// 429s never take it under the floor.
		for range 10 {
			a.interval(eviction, "429", time.Millisecond, 1)
		}
		a.expect(2, ReasonThrottled)
	})
}

// While cordons keep the other lanes to a share of the bound, fast answers say nothing of
// what the whole bound would do to the server: no raise until the bound is in use, even
// though in the short gaps between cordons the whole bound goes out and requests wait.
func TestBoundRisesOnlyWhenItIsUsed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		b := New(Options{Start: 32, Ceiling: 128, Interval: time.Second, Observer: rec})
		ctx, stop := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		// Evictions, more than the bound holds, each answered at the idle pace.
		for range 200 {
			wg.Go(func() {
				for {
					done, err := b.Acquire(ctx, Ordinary)
					if err != nil {
						return
					}
					time.Sleep(100 * time.Millisecond)
					b.KubeRequest("main", "create", "pods/eviction", "201", false, 100*time.Millisecond)
					done()
				}
			})
		}
		// Cordons for ten seconds, one after another with a gap of 50 ms each second.
		for range 10 {
			done, err := b.Acquire(ctx, Urgent)
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(950 * time.Millisecond)
			done()
			time.Sleep(50 * time.Millisecond)
		}
		if got := b.Limit(); got != 32 {
			t.Errorf("bound %g (%s) after ten seconds of cordons; want the start, 32", got, rec.last())
		}
		// The cordons are over: the whole bound is in use, answered at the idle pace.
		time.Sleep(3 * time.Second)
		if got := b.Limit(); got <= 32 || rec.last() != ReasonDemand {
			t.Errorf("bound %g (%s) once the cordons were over; want raised on demand", got, rec.last())
		}
		stop()
		wg.Wait()
	})
}

func TestQueueingBaselineFollowsALastingChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		b := New(Options{Start: 8, Floor: 1, Interval: time.Second, Observer: rec})
		a := answering{t, b, rec}
		const patch = "patch nodes"
		defer backlog(b, 500)()

		a.interval(patch, "200", 10*time.Millisecond, 20) // the baseline: 10 ms
		for _, want := range []float64{12, 18, 27, 40.5} {
			a.interval(patch, "200", 10*time.Millisecond, 100)
			a.expect(want, ReasonDemand)
		}
		// From now on the server answers in 200 ms, however few requests are at it: every
		// answer looks queued. The bound comes down, but not under its start.
		for range 20 {
			a.interval(patch, "200", 200*time.Millisecond, 100)
		}
		a.expect(8, ReasonQueueing)
		// Within two baseline windows the slower pace is the new idle one, and the bound
		// rises again on demand.
		for range 2 * int(baselineWindow/time.Second) {
			a.interval(patch, "200", 200*time.Millisecond, 100)
		}
		if got := b.Limit(); got <= 8 || rec.last() != ReasonDemand {
			t.Fatalf("bound %g (%s) two baseline windows after the server slowed for good; want raised on demand", got, rec.last())
		}
		if got := b.kinds[patch+" 200"].baseline(); got != 200*time.Millisecond {
			t.Errorf("baseline %v, want the new pace, 200ms", got)
		}
	})
}

func TestFixedBoundIgnoresTheAnswers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New(Options{Start: 50, Fixed: true, Interval: time.Second})
		for range 5 {
			time.Sleep(time.Second)
			b.KubeRequest("main", "patch", "nodes", "429", true, time.Millisecond)
		}
		if got := b.Limit(); got != 50 {
			t.Errorf("bound %g, want the fixed 50", got)
		}
	})
}

func TestOptionsDefaults(t *testing.T) {
	o := Options{Ceiling: 20}.withDefaults()
	if o.Start != 20 || o.Floor != DefaultFloor || o.Urgent != DefaultUrgent || o.Burst != DefaultBurst || o.Interval != DefaultInterval {
		t.Errorf("defaults with a ceiling of 20: %+v; want the start capped at the ceiling", o)
	}
	if o := (Options{}).withDefaults(); o.Start != DefaultStart || o.Ceiling != DefaultCeiling || o.Rate != 0 {
		t.Errorf("defaults: %+v", o)
	}
}

// The transport holds a request's turn until its answer has been read, and lets watches by.
func TestTransportHoldsTheTurnUntilTheAnswerIsRead(t *testing.T) {
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"kind":"Node"}`)
	}))
	defer server.Close()
	b := New(Options{Start: 1, Fixed: true})
	client := &http.Client{Transport: b.Transport(Ordinary, http.DefaultTransport)}

	resp, err := client.Get(server.URL + "/api/v1/nodes/a")
	if err != nil {
		t.Fatal(err)
	}
	if got := b.InFlight(Ordinary); got != 1 {
		t.Fatalf("%d in flight with an answer unread; want 1", got)
	}
	// A watch goes although the bound is full, and is not counted.
	for _, path := range []string{"/api/v1/pods?watch=true", "/api/v1/watch/pods"} {
		w, err := client.Get(server.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		w.Body.Close()
	}
	// Another request waits for the turn.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, server.URL+"/api/v1/nodes/b", nil)
	if _, err := client.Do(req); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a second request with the bound full: %v; want it to wait until its deadline", err)
	}
	if _, err := io.ReadAll(resp.Body); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := b.InFlight(Ordinary); got != 0 {
		t.Fatalf("%d in flight after the answer was read; want 0", got)
	}
	resp, err = client.Get(server.URL + "/api/v1/nodes/b")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}
