// SPDX-License-Identifier: Apache-2.0

package drain

import (
	"context"
	"sync"
	"time"
)

// Deadline is when a drain must be over. It only ever moves earlier: a notice that joins a
// running drain with a more urgent deadline (a Spot interruption during a rebalance or
// lifecycle-hook drain) tightens it, and the drain then caps grace periods, forces past
// budgets and gives up by the new time.
type Deadline struct {
	mu      sync.Mutex
	at      time.Time
	changed chan struct{} // closed, and replaced, whenever at moves earlier
	// onTighten are the functions OnTighten registered, each run whenever at moves earlier.
	onTighten map[*func()]struct{}
	// patient is set for a time by which the drain stops trying, not one at which the
	// instance goes (see NewPatientDeadline).
	patient bool
	// margin is kept before the time an instance now goes (see EndBefore).
	margin time.Duration
}

// NewDeadline is a deadline at t.
func NewDeadline(t time.Time) *Deadline {
	return &Deadline{at: t, changed: make(chan struct{})}
}

// NewPatientDeadline is a time t by which the drain stops trying, with no instance going at
// it (an instance kept for the drain): grace periods are not cut to end before it, and no pod
// is forced past its budget as it nears. Pods still leaving at t are waited for by the next
// drain.
func NewPatientDeadline(t time.Time) *Deadline {
	d := NewDeadline(t)
	d.patient = true
	return d
}

// Patient reports whether the deadline is one of NewPatientDeadline.
func (d *Deadline) Patient() bool { return d.patient }

// Time is the deadline now.
func (d *Deadline) Time() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.at
}

// Tighten moves the deadline to t if t is earlier, and reports whether it did.
func (d *Deadline) Tighten(t time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !t.Before(d.at) {
		return false
	}
	d.at = t
	close(d.changed)
	d.changed = make(chan struct{})
	for f := range d.onTighten {
		go (*f)()
	}
	return true
}

// EndBefore makes the drain end margin before any time InstanceGoesAt is given: a drain that
// must hand its instance back while its lifecycle action is still open.
func (d *Deadline) EndBefore(margin time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.margin = margin
}

// InstanceGoesAt brings the drain forward for an instance that now goes at t (a more urgent
// notice, or a lifecycle action that can no longer be kept alive): to t, less the margin of
// EndBefore. A patient deadline's round ends at once, so that the next round drains under the
// new terms. It reports whether the deadline moved.
func (d *Deadline) InstanceGoesAt(t time.Time) bool {
	d.mu.Lock()
	margin := d.margin
	d.mu.Unlock()
	if d.patient {
		t = time.Now()
	}
	return d.Tighten(t.Add(-margin))
}

// OnTighten runs f in a goroutine of its own each time the deadline moves earlier, until
// stop is called. A drain follows its deadline this way rather than with a goroutine parked
// on Changed: an Availability Zone reclaimed at once runs a thousand drains.
func (d *Deadline) OnTighten(f func()) (stop func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.onTighten == nil {
		d.onTighten = map[*func()]struct{}{}
	}
	d.onTighten[&f] = struct{}{}
	return func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		delete(d.onTighten, &f)
	}
}

// Changed is closed when the deadline next moves earlier.
func (d *Deadline) Changed() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.changed
}

// bound returns a context that ends when ctx does or when the deadline, as it is at that
// moment, passes.
func (d *Deadline) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return d.Bound(ctx, 0)
}

// Bound returns a context that ends when ctx does, or margin before the deadline as it is at
// that moment: a deadline brought forward ends it sooner. Its cause is then
// context.DeadlineExceeded.
func (d *Deadline) Bound(ctx context.Context, margin time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	// The timer is set while mu is held, after the tightenings are followed: one that comes
	// meanwhile waits for the timer, and then sets it from the time as it is by then.
	var mu sync.Mutex
	var timer *time.Timer
	mu.Lock()
	stopFollowing := d.OnTighten(func() {
		mu.Lock()
		defer mu.Unlock()
		if ctx.Err() == nil {
			timer.Reset(time.Until(d.Time().Add(-margin)))
		}
	})
	timer = time.AfterFunc(time.Until(d.Time().Add(-margin)), func() { cancel(context.DeadlineExceeded) })
	mu.Unlock()
	context.AfterFunc(ctx, func() {
		stopFollowing()
		mu.Lock()
		defer mu.Unlock()
		timer.Stop()
	})
	return ctx, func() { cancel(context.Canceled) }
}
