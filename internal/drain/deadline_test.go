// SPDX-License-Identifier: Apache-2.0

package drain

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestDeadlineOnlyMovesEarlier(t *testing.T) {
	start := time.Now().Add(time.Hour)
	d := NewDeadline(start)
	changed := d.Changed()
	if d.Tighten(start.Add(time.Minute)) || d.Tighten(start) {
		t.Fatal("a later or equal time tightened the deadline")
	}
	select {
	case <-changed:
		t.Fatal("Changed closed without a change")
	default:
	}
	earlier := start.Add(-30 * time.Minute)
	if !d.Tighten(earlier) || !d.Time().Equal(earlier) {
		t.Fatalf("Tighten to an earlier time: deadline %v, want %v", d.Time(), earlier)
	}
	select {
	case <-changed:
	default:
		t.Fatal("Changed not closed after the deadline moved")
	}
	if d.Changed() == changed {
		t.Fatal("the next change has no channel of its own")
	}
}

func TestDeadlineBoundEndsAtTheTightenedTime(t *testing.T) {
	d := NewDeadline(time.Now().Add(time.Hour))
	ctx, cancel := d.bound(context.Background())
	defer cancel()
	time.Sleep(50 * time.Millisecond)
	tightened := time.Now().Add(200 * time.Millisecond)
	d.Tighten(tightened)
	select {
	case <-ctx.Done():
		if late := time.Since(tightened); late < 0 || late > 2*time.Second {
			t.Errorf("context ended %v after the tightened deadline", late)
		}
		if !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
			t.Errorf("cause %v, want the deadline", context.Cause(ctx))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("context still open 10 s after the tightened deadline")
	}
}

// Bound ends margin before the deadline, and sooner when the deadline moves earlier.
func TestBoundFollowsTheDeadline(t *testing.T) {
	d := NewDeadline(time.Now().Add(time.Hour))
	ctx, cancel := d.Bound(context.Background(), 200*time.Millisecond)
	defer cancel()
	select {
	case <-ctx.Done():
		t.Fatal("ended an hour early")
	case <-time.After(100 * time.Millisecond):
	}
	moved := time.Now()
	d.Tighten(moved.Add(500 * time.Millisecond))
	select {
	case <-ctx.Done():
		if took := time.Since(moved); took < 250*time.Millisecond {
			t.Errorf("ended %v after the move; want about 300 ms (the new deadline minus the margin)", took)
		}
		if !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
			t.Errorf("cause %v, want the deadline", context.Cause(ctx))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("did not end after the deadline moved earlier")
	}
}

// OnTighten runs its function at each move earlier and not after stop; a Bound context
// stops following the deadline once it ends, leaving nothing registered behind.
func TestOnTightenFollowsUntilStopped(t *testing.T) {
	d := NewDeadline(time.Now().Add(time.Hour))
	ran := make(chan struct{}, 4)
	stop := d.OnTighten(func() { ran <- struct{}{} })
	d.Tighten(time.Now().Add(time.Minute))
	d.Tighten(time.Now().Add(time.Hour)) // later: no move, no call
	select {
	case <-ran:
	case <-time.After(5 * time.Second):
		t.Fatal("not run after the deadline moved earlier")
	}
	stop()
	d.Tighten(time.Now().Add(30 * time.Second))
	select {
	case <-ran:
		t.Fatal("run after stop, or run for a move that was no move")
	case <-time.After(100 * time.Millisecond):
	}

	ctx, cancel := d.Bound(context.Background(), time.Second)
	d.mu.Lock()
	following := len(d.onTighten)
	d.mu.Unlock()
	if following != 1 {
		t.Fatalf("a Bound context follows the deadline with %d functions, want 1", following)
	}
	cancel()
	<-ctx.Done()
	deadline := time.Now().Add(5 * time.Second)
	for {
		d.mu.Lock()
		following = len(d.onTighten)
		d.mu.Unlock()
		if following == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("an ended Bound context still follows the deadline")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// An instance that now goes earlier brings the drain forward, less the margin a drain that
// must end before its action expires keeps; a patient round ends at once.
func TestInstanceGoesAt(t *testing.T) {
	now := time.Now()
	d := NewDeadline(now.Add(time.Hour))
	d.EndBefore(10 * time.Second)
	if !d.InstanceGoesAt(now.Add(time.Minute)) || !d.Time().Equal(now.Add(50*time.Second)) {
		t.Errorf("deadline %v, want the new time less the margin %v", d.Time(), now.Add(50*time.Second))
	}
	if d.InstanceGoesAt(now.Add(2 * time.Minute)) {
		t.Error("a later time moved the deadline")
	}
	patient := NewPatientDeadline(now.Add(time.Hour))
	if !patient.InstanceGoesAt(now.Add(30*time.Minute)) || patient.Time().After(time.Now()) {
		t.Errorf("a patient round ends at %v, want now", patient.Time())
	}
}
