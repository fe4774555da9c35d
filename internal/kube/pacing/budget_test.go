package pacing

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// request starts one request's wait in its own goroutine and returns a channel that is closed
// at its turn (or carries the error that ended the wait).
func request(ctx context.Context, b *Budget, lane Lane) <-chan error {
	done := make(chan error, 1)
	go func() { done <- b.Lane(lane).Wait(ctx) }()
	return done
}

// emptied takes every token a budget holds, so the next request has to wait.
func emptied(t *testing.T, b *Budget) {
	t.Helper()
	for b.Lane(Ordinary).TryAccept() {
	}
}

func TestLanesAndDeadlinesOrderTheQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New(Options{Start: 10, Burst: 1, Fixed: true})
		emptied(t, b)

		var mu sync.Mutex
		var order []string
		enqueue := func(name string, lane Lane, deadline time.Duration) {
			ctx := context.Background()
			if deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, deadline)
				t.Cleanup(cancel)
			}
			go func() {
				if err := b.Lane(lane).Wait(ctx); err != nil {
					t.Errorf("%s: %v", name, err)
				}
				mu.Lock()
				order = append(order, name)
				mu.Unlock()
			}()
			synctest.Wait() // queued before the next one arrives
		}
		enqueue("event", Background, 0)
		enqueue("eviction due in 60s", Ordinary, time.Minute)
		enqueue("eviction due in 10s", Ordinary, 10*time.Second)
		enqueue("record write", Ordinary, 0) // no deadline: due when it arrived, so before both
		enqueue("cordon", Urgent, 0)

		time.Sleep(time.Second) // 10 requests/s: every one has had its turn
		synctest.Wait()
		want := []string{"cordon", "record write", "eviction due in 10s", "eviction due in 60s", "event"}
		if len(order) != len(want) {
			t.Fatalf("granted %v, want %v", order, want)
		}
		for i := range want {
			if order[i] != want[i] {
				t.Fatalf("granted %v, want %v", order, want)
			}
		}
	})
}

// Thousands of waits cancelled at a drain's deadline must leave no debt behind: the next
// request waits for one token, not for the cancelled ones.
func TestCancelledWaitsLeaveNoDebt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New(Options{Start: 100, Burst: 200, Fixed: true})
		emptied(t, b)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		var waits []<-chan error
		for range 2000 {
			waits = append(waits, request(ctx, b, Ordinary))
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		cancel()
		granted, cancelled := 0, 0
		for _, w := range waits {
			switch err := <-w; {
			case err == nil:
				granted++
			case errors.Is(err, context.DeadlineExceeded):
				cancelled++
			default:
				t.Fatalf("wait: %v", err)
			}
		}
		if granted < 190 || granted > 210 || cancelled != 2000-granted {
			t.Errorf("granted %d and cancelled %d in 2 s at 100/s; want about 200 granted, the rest cancelled", granted, cancelled)
		}
		if n := b.Waiting(Ordinary); n != 0 {
			t.Errorf("%d requests still queued after their contexts ended", n)
		}

		start := time.Now()
		if err := b.Lane(Ordinary).Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		if waited := time.Since(start); waited > 10*time.Millisecond {
			t.Errorf("the next request waited %v after the cancellations; want at most one token's time (10ms)", waited)
		}
	})
}

func TestGrantsFollowTheRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New(Options{Start: 50, Burst: 10, Fixed: true})
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
		defer cancel()
		var waits []<-chan error
		for range 1000 {
			waits = append(waits, request(ctx, b, Ordinary))
		}
		granted := 0
		for _, w := range waits {
			if <-w == nil {
				granted++
			}
		}
		// The burst at once, then 50 a second for 4 s.
		if granted < 205 || granted > 211 {
			t.Errorf("granted %d in 4 s at 50/s with a burst of 10; want 210", granted)
		}
	})
}

// recorder keeps the rate changes a budget reports.
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

func TestRateFollowsTheServersAnswers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		b := New(Options{Start: 100, Ceiling: 400, Floor: 5, Burst: 1, Interval: time.Second, Observer: rec})
		// interval lets the budget hear n answers, then reconsider: the first event after an
		// interval (here an answer that never came back, which counts for nothing) does it.
		interval := func(code string, took time.Duration, n int) {
			for range n {
				b.KubeRequest("main", "create", "pods/eviction", code, took)
			}
			time.Sleep(time.Second)
			b.KubeRequest("main", "get", "nodes", "error", 0)
		}
		expect := func(rate float64, reason string) {
			t.Helper()
			if got := b.Rate(); got != rate || rec.last() != reason {
				t.Fatalf("rate %g (%s), want %g (%s)", got, rec.last(), rate, reason)
			}
		}

		// Requests keep waiting and answers are fast: the rate rises by half each interval
		// up to the ceiling, as long as the server has not pushed back.
		backlog, endBacklog := context.WithCancel(context.Background())
		for range 20000 {
			request(backlog, b, Ordinary)
		}
		for _, want := range []float64{150, 225, 337.5, 400, 400} {
			interval("201", 100*time.Millisecond, 10)
			expect(want, ReasonDemand)
		}
		// A 429 halves it.
		interval("429", 5*time.Millisecond, 1)
		expect(200, ReasonThrottled)
		// Once pushed back, demand raises it by a tenth an interval; answers at ten times
		// their idle time (100 ms) are a busy server, not one falling behind.
		interval("201", time.Second, 10)
		expect(220, ReasonDemand)
		// Over four times plus a second: eased off by a fifth.
		interval("201", 1500*time.Millisecond, 10)
		expect(176, ReasonSlow)
		endBacklog()
		synctest.Wait()
		if n := b.Waiting(Ordinary); n != 0 {
			t.Fatalf("%d requests still queued after their contexts ended", n)
		}
		// Nobody waiting: it stays.
		interval("201", 100*time.Millisecond, 10)
		interval("201", 100*time.Millisecond, 10)
		expect(176, ReasonSlow) // unchanged since the last change
		// 429s never take it under the floor.
		for range 10 {
			interval("429", time.Millisecond, 1)
		}
		expect(5, ReasonThrottled)
	})
}

func TestFixedRateIgnoresTheAnswers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New(Options{Start: 50, Fixed: true, Interval: time.Second})
		for range 5 {
			time.Sleep(time.Second)
			b.KubeRequest("main", "patch", "nodes", "429", time.Millisecond)
		}
		if got := b.Rate(); got != 50 {
			t.Errorf("rate %g, want the fixed 50", got)
		}
	})
}

func TestOptionsDefaults(t *testing.T) {
	o := Options{Ceiling: 20}.withDefaults()
	if o.Start != 20 || o.Floor != DefaultFloor || o.Burst != DefaultBurst || o.Interval != DefaultInterval {
		t.Errorf("defaults with a ceiling of 20: %+v; want the start capped at the ceiling", o)
	}
	if o := (Options{}).withDefaults(); o.Start != DefaultStart || o.Ceiling != DefaultCeiling {
		t.Errorf("defaults: %+v", o)
	}
}

// Cordons keep the starting rate while 429s have cut the shared one, and the other lanes
// pay for them afterwards.
func TestUrgentLaneKeepsItsReserve(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New(Options{Start: 100, Floor: 5, Burst: 10, Interval: time.Second})
		for range 6 { // halved to the floor, 5/s
			time.Sleep(time.Second)
			b.KubeRequest("main", "create", "pods/eviction", "429", time.Millisecond)
		}
		if got := b.Rate(); got != 5 {
			t.Fatalf("rate %g after the 429s, want the floor, 5", got)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		var cordons, evictions []<-chan error
		for range 200 {
			evictions = append(evictions, request(ctx, b, Ordinary))
		}
		synctest.Wait()
		for range 300 {
			cordons = append(cordons, request(ctx, b, Urgent))
		}
		count := func(waits []<-chan error) (n int) {
			for _, w := range waits {
				if <-w == nil {
					n++
				}
			}
			return n
		}
		// In 2 s: the urgent reserve (10, then 100/s) gives about 200 cordons; the shared
		// tokens (10, taken by the evictions queued first, then 5/s) are spent on cordons
		// and owed, so no more evictions go.
		if got := count(cordons); got < 190 || got > 220 {
			t.Errorf("%d cordons in 2 s at a shared rate of 5/s; want about 200 from the urgent reserve", got)
		}
		if got := count(evictions); got > 10 {
			t.Errorf("%d evictions went while cordons spent the shared tokens; want at most the first burst", got)
		}
	})
}
