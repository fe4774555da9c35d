// SPDX-License-Identifier: Apache-2.0

package drain

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
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
	synctest.Test(t, func(t *testing.T) {
		d := NewDeadline(time.Now().Add(time.Hour))
		ctx, cancel := d.bound(context.Background())
		defer cancel()
		tightened := time.Now().Add(200 * time.Millisecond)
		d.Tighten(tightened)
		<-ctx.Done()
		if !time.Now().Equal(tightened) {
			t.Errorf("context ended %v after the tightened deadline, want at it", time.Since(tightened))
		}
		if !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
			t.Errorf("cause %v, want the deadline", context.Cause(ctx))
		}
	})
}

// Bound ends margin before the deadline, and sooner when the deadline moves earlier.
func TestBoundFollowsTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := NewDeadline(time.Now().Add(time.Hour))
		ctx, cancel := d.Bound(context.Background(), 200*time.Millisecond)
		defer cancel()
		synctest.Wait()
		if ctx.Err() != nil {
			t.Fatal("ended an hour early")
		}
		moved := time.Now()
		d.Tighten(moved.Add(500 * time.Millisecond))
		<-ctx.Done()
		if took := time.Since(moved); took != 300*time.Millisecond {
			t.Errorf("ended %v after the move; want 300ms (the new deadline minus the margin)", took)
		}
		if !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
			t.Errorf("cause %v, want the deadline", context.Cause(ctx))
		}
	})
}

// OnTighten runs its function at each move earlier and not after stop; a Bound context
// stops following the deadline once it ends, leaving nothing registered behind.
func TestOnTightenFollowsUntilStopped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := NewDeadline(time.Now().Add(time.Hour))
		ran := 0
		var mu sync.Mutex
		stop := d.OnTighten(func() { mu.Lock(); defer mu.Unlock(); ran++ })
		d.Tighten(time.Now().Add(time.Minute))
		d.Tighten(time.Now().Add(time.Hour)) // later: no move, no call
		synctest.Wait()
		mu.Lock()
		if ran != 1 {
			t.Fatalf("run %d times after one move earlier, want once", ran)
		}
		mu.Unlock()
		stop()
		d.Tighten(time.Now().Add(30 * time.Second))
		synctest.Wait()
		mu.Lock()
		if ran != 1 {
			t.Fatal("run after stop")
		}
		mu.Unlock()

		ctx, cancel := d.Bound(context.Background(), time.Second)
		if n := following(d); n != 1 {
			t.Fatalf("a Bound context follows the deadline with %d functions, want 1", n)
		}
		cancel()
		<-ctx.Done()
		synctest.Wait()
		if n := following(d); n != 0 {
			t.Fatalf("an ended Bound context still follows the deadline with %d functions", n)
		}
	})
}

// following is how many functions follow the deadline.
func following(d *Deadline) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.onTighten)
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
