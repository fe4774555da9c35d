// SPDX-License-Identifier: Apache-2.0

package imds

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/panics/panicstest"
)

// fakeGetter answers from a function that sees how many times each path was read.
type fakeGetter struct {
	mu     sync.Mutex
	calls  map[string]int
	answer func(path string, call int) ([]byte, bool, error)
}

func (g *fakeGetter) Get(_ context.Context, path string) ([]byte, bool, error) {
	g.mu.Lock()
	g.calls[path]++
	n := g.calls[path]
	g.mu.Unlock()
	return g.answer(path, n)
}

func collect(t *testing.T, p *Poller, d time.Duration) []notice.Notice {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	out := make(chan notice.Notice, 100)
	p.Run(ctx, out)
	close(out)
	var ns []notice.Notice
	for n := range out {
		ns = append(ns, n)
	}
	return ns
}

func TestMovingSpotTimeIsOneNotice(t *testing.T) {
	g := &fakeGetter{calls: map[string]int{}, answer: func(path string, call int) ([]byte, bool, error) {
		// The time moves on every poll, as the IMDS mock does without a fixed -t.
		return fmt.Appendf(nil, `{"action":"terminate","time":"%s"}`, time.Now().Add(2*time.Minute).Format(time.RFC3339Nano)), true, nil
	}}
	ns := collect(t, NewPoller(g, inst, Options{Spot: true, Interval: 10 * time.Millisecond}), 300*time.Millisecond)
	if len(ns) != 1 || g.calls[PathSpot] < 10 {
		t.Fatalf("%d notices from %d polls, want 1", len(ns), g.calls[PathSpot])
	}
}

func TestLifecycleDeadlineFromFirstSeen(t *testing.T) {
	g := &fakeGetter{calls: map[string]int{}, answer: func(path string, call int) ([]byte, bool, error) {
		if call < 3 {
			return []byte("InService"), true, nil
		}
		return []byte("Terminated"), true, nil
	}}
	start := time.Now()
	ns := collect(t, NewPoller(g, inst, Options{Lifecycle: true, Interval: 5 * time.Millisecond, DrainBudget: time.Minute}), 200*time.Millisecond)
	if len(ns) != 1 || ns[0].Kind != notice.ASGTermination {
		t.Fatalf("notices %+v", ns)
	}
	if d := ns[0].Deadline.Sub(start); d < time.Minute || d > time.Minute+200*time.Millisecond {
		t.Errorf("deadline %v after start, want first-seen + 1m", d)
	}
}

func TestFailingMetadataBacksOffReportsAndRecovers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var p *Poller
		g := &fakeGetter{calls: map[string]int{}, answer: func(path string, call int) ([]byte, bool, error) {
			if call <= 6 {
				if call%2 == 0 {
					return []byte("<html>garbage</html>"), true, nil
				}
				return nil, false, errors.New("500 Internal Server Error")
			}
			return nil, false, nil // recovered: no event
		}}
		var observed []error
		unhealthySeen := false
		ninth := make(chan struct{})
		// Told after each poll, on the poller's goroutine: health is read as each poll left it.
		observe := func(path string, err error) {
			observed = append(observed, err)
			if p.Healthy() != nil {
				unhealthySeen = true
			}
			if len(observed) == 9 {
				close(ninth)
			}
		}
		p = NewPoller(g, inst, Options{Spot: true, Interval: 2 * time.Millisecond, FailingAfter: 5 * time.Millisecond, Observe: observe})
		ctx, cancel := context.WithCancel(context.Background())
		out := make(chan notice.Notice, 1)
		done := make(chan struct{})
		go func() { p.Run(ctx, out); close(done) }()
		<-ninth // the bubble's clock runs through the backoff by itself
		cancel()
		<-done
		if !unhealthySeen {
			t.Error("never reported unhealthy during sustained failure")
		}
		if err := p.Healthy(); err != nil {
			t.Errorf("still unhealthy after recovery: %v", err)
		}
		failures := 0
		for _, err := range observed[:6] {
			if err != nil {
				failures++
			}
		}
		if failures != 6 || observed[len(observed)-1] != nil {
			t.Errorf("observed %v: want 6 failures (errors and garbage) then success", observed)
		}
	})
}

// A lifecycle state Lifeboat does not know (Standby is known; Quarantined is not) is logged
// and counted once, never fails a poll and never turns readiness red; Terminated still
// makes its notice afterwards.
func TestUnknownLifecycleStateIsIgnoredOnce(t *testing.T) {
	g := &fakeGetter{calls: map[string]int{}, answer: func(path string, call int) ([]byte, bool, error) {
		switch {
		case call < 5:
			return []byte("Standby"), true, nil
		case call < 15:
			return []byte("Quarantined"), true, nil
		}
		return []byte("Terminated"), true, nil
	}}
	var (
		mu       sync.Mutex
		warned   []string
		failures int
	)
	p := NewPoller(g, inst, Options{Lifecycle: true, Interval: 2 * time.Millisecond, FailingAfter: time.Millisecond,
		Warn: func(problem string) { mu.Lock(); warned = append(warned, problem); mu.Unlock() },
		Observe: func(_ string, err error) {
			if err != nil {
				mu.Lock()
				failures++
				mu.Unlock()
			}
		}})
	ns := collect(t, p, 300*time.Millisecond)
	if err := p.Healthy(); err != nil {
		t.Errorf("not healthy: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if failures != 0 || len(warned) != 1 || warned[0] != problemLifecycleStateUnknown {
		t.Errorf("%d failed polls, warnings %v; want none failed and one %s", failures, warned, problemLifecycleStateUnknown)
	}
	if len(ns) != 1 || ns[0].Kind != notice.ASGTermination || ns[0].StartTime.IsZero() {
		t.Errorf("notices %+v, want the termination with its first-seen start", ns)
	}
}

// A scheduled event with an unreadable start cordons (a notice with CordonOnly) and gets no
// made-up deadline from the drain budget.
func TestUnreadableScheduledStartGetsNoDeadline(t *testing.T) {
	g := &fakeGetter{calls: map[string]int{}, answer: func(path string, call int) ([]byte, bool, error) {
		return []byte(`[{"EventId":"e1","State":"active","Code":"instance-stop","NotBefore":"soon"}]`), true, nil
	}}
	ns := collect(t, NewPoller(g, inst, Options{Scheduled: true, Interval: time.Millisecond, DrainBudget: time.Minute}), 100*time.Millisecond)
	if len(ns) != 1 || ns[0].CordonOnly == "" || !ns[0].Deadline.IsZero() {
		t.Errorf("notices %+v", ns)
	}
}

// A poll whose reading panics fails like a poll that met an error (observed as one, and
// backed off from), counted under site imds_poll and logged with the stack; the next polls
// run, and the notice they find is emitted. The other path's polls are not disturbed.
func TestPanickingPollIsThatPolls(t *testing.T) {
	g := &fakeGetter{calls: map[string]int{}, answer: func(path string, call int) ([]byte, bool, error) {
		if path == PathRebalance {
			return nil, false, nil
		}
		if call <= 2 {
			var answers map[string][]byte
			answers[path] = nil // a bug met on this answer
		}
		return fmt.Appendf(nil, `{"action":"terminate","time":"%s"}`, time.Now().Add(2*time.Minute).Format(time.RFC3339)), true, nil
	}}
	count := &panicstest.Counter{}
	var observed []string
	var mu sync.Mutex
	var logs bytes.Buffer
	p := NewPoller(g, inst, Options{Spot: true, Rebalance: true, Interval: 2 * time.Millisecond, Panics: count,
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Observe: func(path string, err error) {
			mu.Lock()
			defer mu.Unlock()
			observed = append(observed, fmt.Sprintf("%s %v", path, err != nil))
		}})
	ns := collect(t, p, 300*time.Millisecond)
	if len(ns) != 1 || ns[0].Kind != notice.SpotInterruption {
		t.Fatalf("notices %+v, want the spot notice of the polls after the panics", ns)
	}
	if n := count.Get("imds_poll"); n != 2 {
		t.Errorf("%d panics counted under imds_poll, want 2", n)
	}
	mu.Lock()
	defer mu.Unlock()
	var spot []string
	rebalanceFailed := false
	for _, o := range observed {
		if strings.HasPrefix(o, PathSpot) {
			spot = append(spot, o)
		} else if strings.HasSuffix(o, "true") {
			rebalanceFailed = true
		}
	}
	if len(spot) < 3 || spot[0] != PathSpot+" true" || spot[1] != PathSpot+" true" || spot[2] != PathSpot+" false" {
		t.Errorf("spot polls observed %v, want two failures, then successes", spot)
	}
	if rebalanceFailed {
		t.Errorf("a rebalance poll failed: %v", observed)
	}
	for _, want := range []string{"level=ERROR", "site=imds_poll", "path=" + PathSpot, "assignment to entry in nil map", "source_test.go"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}
}
