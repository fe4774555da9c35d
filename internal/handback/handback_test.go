package handback_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"lifeboat.dev/lifeboat/internal/handback"
)

// heldFor is a wait that holds something for a while, then lets go.
type heldFor struct {
	name  string
	until time.Time
	err   error // returned instead, when set
	calls atomic.Int32
}

func (w *heldFor) Name() string            { return w.name }
func (w *heldFor) Interval() time.Duration { return 20 * time.Millisecond }
func (w *heldFor) Held(ctx context.Context, s handback.Subject) ([]string, error) {
	w.calls.Add(1)
	if w.err != nil {
		return nil, w.err
	}
	if time.Now().Before(w.until) {
		return []string{s.Node + "/held"}, nil
	}
	return nil, nil
}

func TestRun(t *testing.T) {
	s := handback.Subject{Node: "n1"}
	soon := &heldFor{name: "soon", until: time.Now().Add(150 * time.Millisecond)}
	never := &heldFor{name: "never", until: time.Now().Add(time.Hour)}
	denied := &heldFor{name: "denied", err: fmt.Errorf("%w: no permission", handback.ErrSkip)}
	flaky := &heldFor{name: "flaky", err: errors.New("throttled")}
	start := time.Now()
	results := handback.Run(context.Background(), time.Now().Add(600*time.Millisecond), s, soon, never, denied, flaky)
	took := time.Since(start)

	want := []struct {
		outcome handback.Outcome
		held    bool
	}{{handback.Released, false}, {handback.Cut, true}, {handback.Skipped, false}, {handback.Cut, false}}
	for i, r := range results {
		if r.Outcome != want[i].outcome || (len(r.Held) > 0) != want[i].held {
			t.Errorf("%s: %s held %v (err %v), want %s (held %v)", r.Wait, r.Outcome, r.Held, r.Err, want[i].outcome, want[i].held)
		}
	}
	if r := results[0]; r.Took < 150*time.Millisecond || r.Took > 500*time.Millisecond {
		t.Errorf("the wait released at 150 ms took %s", r.Took)
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
	results := handback.Run(ctx, time.Now().Add(time.Hour), handback.Subject{Node: "n1"}, &heldFor{name: "never", until: time.Now().Add(time.Hour)})
	if results[0].Outcome != handback.Cut {
		t.Errorf("outcome %s, want cut when the context ends", results[0].Outcome)
	}
}
