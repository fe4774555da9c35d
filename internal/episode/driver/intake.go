// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// IntakePolicy is how both modes retry a notice that could not be recorded on its Node yet:
// a brief API server outage must not lose it, yet a notice no retry can help is given up.
type IntakePolicy struct {
	// NotOurs is the error intake returns when the Node is not the notice's instance's: no
	// retry changes that.
	NotOurs error
	// Budget bounds the tries of a notice without a deadline (a cordon-only notice), from its
	// first try.
	Budget time.Duration
	// MaxPause is the longest pause between two tries (default 30 s).
	MaxPause time.Duration
}

// Verdict is what to do with a notice whose intake failed.
type Verdict int

const (
	Retry    Verdict = iota // try again after the backoff's pause
	Stopping                // the process is stopping: the source keeps the notice
	NotOurs                 // the Node is not the notice's instance's
	TooLate                 // the notice's deadline is well past: the instance is gone or going
)

func (v Verdict) String() string {
	switch v {
	case Retry:
		return "retry"
	case Stopping:
		return "stopping"
	case NotOurs:
		return "not ours"
	case TooLate:
		return "too late"
	}
	return "unknown"
}

// lateBy is how long after its deadline a notice is still tried: a source's deadline is its
// estimate, and the instance often runs a little past it.
const lateBy = time.Minute

// Judge decides about a notice whose intake failed with err at now; firstTry is when its
// intake was first tried.
func (p IntakePolicy) Judge(ctx context.Context, err error, deadline, firstTry, now time.Time) Verdict {
	switch {
	case ctx.Err() != nil:
		return Stopping
	case p.NotOurs != nil && errors.Is(err, p.NotOurs):
		return NotOurs
	}
	if deadline.IsZero() {
		deadline = firstTry.Add(p.Budget)
	}
	if now.After(deadline.Add(lateBy)) {
		return TooLate
	}
	return Retry
}

// Backoff is the pauses between a notice's tries: from a second, doubling up to MaxPause,
// each up to a fifth longer at random so that many nodes' notices are not retried in step
// after an outage.
func (p IntakePolicy) Backoff() wait.Backoff {
	return wait.Backoff{Duration: time.Second, Factor: 2, Jitter: jitter, Steps: math.MaxInt32, Cap: cmpOr(p.MaxPause, 30*time.Second)}
}

// Record tries record until it succeeds or Judge gives the notice up (log says why), and
// reports whether the notice was recorded.
func (p IntakePolicy) Record(ctx context.Context, deadline time.Time, record func(context.Context) error, log *slog.Logger) bool {
	backoff, firstTry := p.Backoff(), time.Now()
	for {
		err := record(ctx)
		if err == nil {
			return true
		}
		switch v := p.Judge(ctx, err, deadline, firstTry, time.Now()); v {
		case Stopping:
			return false
		case Retry:
		default:
			log.Error("giving up on notice", "reason", v.String(), "err", err)
			return false
		}
		pause := backoff.Step()
		log.Warn("notice not recorded yet; retrying", "retryIn", pause, "err", err)
		select {
		case <-ctx.Done():
			return false
		case <-time.After(pause):
		}
	}
}
