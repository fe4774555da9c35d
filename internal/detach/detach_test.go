// SPDX-License-Identifier: Apache-2.0

package detach_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"lifeboat.dev/lifeboat/internal/detach"
	"lifeboat.dev/lifeboat/internal/panics/panicstest"
)

// heldFor is a wait that holds something for a while, then lets go.
type heldFor struct {
	name  string
	until time.Time
	err   error // returned instead, when set
	calls atomic.Int32
	freed atomic.Int64 // when it first answered that nothing is held (Unix nanoseconds)
}

func (w *heldFor) Name() string            { return w.name }
func (w *heldFor) Interval() time.Duration { return 20 * time.Millisecond }
func (w *heldFor) Held(ctx context.Context, s detach.Subject) ([]string, error) {
	w.calls.Add(1)
	if w.err != nil {
		return nil, w.err
	}
	now := time.Now()
	if now.Before(w.until) {
		return []string{s.Node + "/held"}, nil
	}
	w.freed.CompareAndSwap(0, now.UnixNano())
	return nil, nil
}

func TestRun(t *testing.T) {
	s := detach.Subject{Node: "n1"}
	soon := &heldFor{name: "soon", until: time.Now().Add(150 * time.Millisecond)}
	never := &heldFor{name: "never", until: time.Now().Add(time.Hour)}
	denied := &heldFor{name: "denied", err: fmt.Errorf("%w: no permission", detach.ErrSkip)}
	flaky := &heldFor{name: "flaky", err: errors.New("throttled")}
	start := time.Now()
	results := detach.Run(context.Background(), time.Now().Add(600*time.Millisecond), s, soon, never, denied, flaky)
	took := time.Since(start)

	want := []struct {
		outcome detach.Outcome
		held    bool
	}{{detach.Released, false}, {detach.Cut, true}, {detach.Skipped, false}, {detach.Cut, false}}
	for i, r := range results {
		if r.Outcome != want[i].outcome || (len(r.Held) > 0) != want[i].held {
			t.Errorf("%s: %s held %v (err %v), want %s (held %v)", r.Wait, r.Outcome, r.Held, r.Err, want[i].outcome, want[i].held)
		}
	}
	// Took counts from Run's start, a moment after soon's clock started: bounded above only.
	if r := results[0]; r.Took > 500*time.Millisecond {
		t.Errorf("the wait released at 150 ms took %s", r.Took)
	}
	if soon.freed.Load() == 0 {
		t.Errorf("the wait counted released without once answering that nothing is held")
	}
	if took < 600*time.Millisecond || took > 2*time.Second {
		t.Errorf("Run took %s, want the deadline (600 ms)", took)
	}
	if n := denied.calls.Load(); n != 1 {
		t.Errorf("a skipped wait was asked %d times, want 1", n)
	}
	if n := flaky.calls.Load(); n < 5 {
		t.Errorf("a failing wait was asked %d times in 600 ms, want it retried every 20 ms", n)
	}
	if r := results[3]; r.Err == nil || r.Err.Error() != "throttled" {
		t.Errorf("cut after errors: err %v, want the last one", r.Err)
	}
}

func TestRunEndsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	results := detach.Run(ctx, time.Now().Add(time.Hour), detach.Subject{Node: "n1"}, &heldFor{name: "never", until: time.Now().Add(time.Hour)})
	if results[0].Outcome != detach.Cut {
		t.Errorf("outcome %s, want cut when the context ends", results[0].Outcome)
	}
}

// panicking is a wait whose Held panics.
type panicking struct{ heldFor }

func (w *panicking) Held(context.Context, detach.Subject) ([]string, error) {
	w.calls.Add(1)
	var targets map[string]*detach.Subject
	return []string{targets["gone"].Node}, nil // a bug met on a poll's answer
}

// A guarded wait whose Held panics is skipped at once, as one that cannot be checked, with the
// panic as its error, counted under site handback_wait and logged; the other wait is not
// disturbed and is released in its time.
func TestGuardedPanicSkipsThatWait(t *testing.T) {
	var logs bytes.Buffer
	count := &panicstest.Counter{}
	log := slog.New(slog.NewTextHandler(&logs, nil))
	bad := &panicking{heldFor{name: "targets"}}
	soon := &heldFor{name: "volumes", until: time.Now().Add(50 * time.Millisecond)}
	results := detach.Run(context.Background(), time.Now().Add(5*time.Second), detach.Subject{Node: "n1"},
		detach.Guarded(bad, log, count), detach.Guarded(soon, log, count))
	if r := results[0]; r.Outcome != detach.Skipped || !errors.Is(r.Err, detach.ErrSkip) || !strings.Contains(fmt.Sprint(r.Err), "panic in handback_wait") {
		t.Errorf("the panicking wait: %s (err %v), want skipped with the panic", r.Outcome, r.Err)
	}
	if n := bad.calls.Load(); n != 1 {
		t.Errorf("the panicking wait was asked %d times, want once", n)
	}
	if r := results[1]; r.Outcome != detach.Released {
		t.Errorf("the other wait: %s (err %v), want released", r.Outcome, r.Err)
	}
	if got := count.Get("handback_wait"); got != 1 {
		t.Errorf("panics counted %d, want one under handback_wait", got)
	}
	for _, want := range []string{"level=ERROR", "site=handback_wait", "wait=targets", "node=n1", "detach_test.go"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}
}
