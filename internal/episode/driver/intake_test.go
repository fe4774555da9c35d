// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

var errNotOurs = errors.New("node does not belong to the notice's instance")

func TestJudge(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	policy := IntakePolicy{NotOurs: errNotOurs, Budget: 2 * time.Minute}
	live, ended := context.Background(), canceled()
	transient := errors.New("etcdserver: request timed out")
	for _, tc := range []struct {
		name     string
		ctx      context.Context
		err      error
		deadline time.Time
		firstTry time.Time
		want     Verdict
	}{
		{"transient, deadline ahead", live, transient, now.Add(time.Minute), now, Retry},
		{"transient, deadline just past", live, transient, now.Add(-59 * time.Second), now, Retry},
		{"transient, deadline over a minute past", live, transient, now.Add(-61 * time.Second), now, TooLate},
		{"no deadline, within the budget", live, transient, time.Time{}, now.Add(-2 * time.Minute), Retry},
		{"no deadline, budget and a minute spent", live, transient, time.Time{}, now.Add(-3*time.Minute - time.Second), TooLate},
		{"another instance's node", live, fmt.Errorf("notice n: %w", errNotOurs), now.Add(time.Hour), now, NotOurs},
		{"stopping wins over the rest", ended, fmt.Errorf("notice n: %w", errNotOurs), now.Add(-time.Hour), now, Stopping},
		{"stopping, the error says so", ended, context.Canceled, now.Add(time.Hour), now, Stopping},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := policy.Judge(tc.ctx, tc.err, tc.deadline, tc.firstTry, now); got != tc.want {
				t.Errorf("Judge = %s, want %s", got, tc.want)
			}
		})
	}
	if got := (IntakePolicy{}).Judge(live, errNotOurs, now.Add(time.Hour), now, now); got != Retry {
		t.Errorf("without NotOurs set, Judge = %s, want retry", got)
	}
}

func canceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

func TestIntakeBackoff(t *testing.T) {
	b := IntakePolicy{MaxPause: 10 * time.Second}.Backoff()
	for i, base := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second} {
		if got := b.Step(); got < base || got > base+base/5 {
			t.Errorf("pause %d = %s, want within [%s, %s]", i+1, got, base, base+base/5)
		}
	}
	if got := (IntakePolicy{}).Backoff().Cap; got != 30*time.Second {
		t.Errorf("default longest pause %s, want 30s", got)
	}
}

// Record tries until the notice is recorded, pausing between tries.
func TestRecordRetriesUntilRecorded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := &sandboxtest.LogBuffer{}
		var tries atomic.Int32
		start := time.Now()
		ok := IntakePolicy{NotOurs: errNotOurs, Budget: time.Minute}.Record(context.Background(), time.Time{}, func(context.Context) error {
			if tries.Add(1) < 3 {
				return errors.New("connection refused")
			}
			return nil
		}, slog.New(slog.NewTextHandler(logs, nil)))
		if !ok || tries.Load() != 3 {
			t.Fatalf("Record = %v after %d tries, want recorded on the third", ok, tries.Load())
		}
		if took := time.Since(start); took < 3*time.Second || took > 3600*time.Millisecond {
			t.Errorf("three tries took %s, want the pauses of 1 s and 2 s between them, each lengthened by at most a fifth", took)
		}
		if n := strings.Count(logs.String(), "notice not recorded yet; retrying"); n != 2 {
			t.Errorf("%d retries logged, want 2:\n%s", n, logs)
		}
	})
}

// Record gives up at once on a notice no retry can help, and when ctx ends.
func TestRecordGivesUp(t *testing.T) {
	policy := IntakePolicy{NotOurs: errNotOurs, Budget: time.Minute}
	for _, tc := range []struct {
		name     string
		ctx      context.Context
		deadline time.Time
		err      error
		logged   string
	}{
		{"another instance's node", context.Background(), time.Now().Add(time.Hour), fmt.Errorf("wrapped: %w", errNotOurs), "reason=\"not ours\""},
		{"deadline long past", context.Background(), time.Now().Add(-time.Hour), errors.New("conflict"), "reason=\"too late\""},
		{"stopping", canceled(), time.Now().Add(time.Hour), context.Canceled, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := &sandboxtest.LogBuffer{}
			var tries atomic.Int32
			ok := policy.Record(tc.ctx, tc.deadline, func(context.Context) error { tries.Add(1); return tc.err }, slog.New(slog.NewTextHandler(logs, nil)))
			if ok || tries.Load() != 1 {
				t.Errorf("Record = %v after %d tries, want given up after one", ok, tries.Load())
			}
			out := logs.String()
			if tc.logged == "" {
				if out != "" {
					t.Errorf("stopping logged %q, want nothing", out)
				}
				return
			}
			if !strings.Contains(out, "giving up on notice") || !strings.Contains(out, tc.logged) {
				t.Errorf("log %q lacks the give-up and %s", out, tc.logged)
			}
		})
	}
}

// Record stops waiting for its next try when ctx ends.
func TestRecordStopsDuringPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan bool)
		var tries atomic.Int32
		go func() {
			done <- IntakePolicy{Budget: time.Hour}.Record(ctx, time.Time{}, func(context.Context) error { tries.Add(1); return errors.New("down") }, slog.New(slog.DiscardHandler))
		}()
		synctest.Wait() // in the first pause of a second
		if n := tries.Load(); n != 1 {
			t.Fatalf("%d tries before the first pause ended, want 1", n)
		}
		cancel()
		select {
		case ok := <-done:
			if ok {
				t.Error("Record reported a notice recorded that never was")
			}
		case <-time.After(5 * time.Second): // Record, not stopped, would try again after a second and after two
			t.Errorf("Record kept waiting after ctx ended (%d tries)", tries.Load())
		}
	})
}
