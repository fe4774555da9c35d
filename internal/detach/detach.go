// SPDX-License-Identifier: Apache-2.0

// Package detach decides when a drained node's instance is safe to hand back: its lifecycle
// action completed, its termination allowed. An empty node is not yet a safe one. The volumes
// of the pods that left may still be attached to the instance, so their replacements wait on
// Multi-Attach errors; and load balancers keep sending traffic to the instance, and to the
// pods' IPs, for the target group's deregistration delay. Each such condition is a Wait; Run
// waits for all of them together, never past the episode's deadline.
package detach

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"lifeboat.dev/lifeboat/internal/panics"
)

// Subject is a drained node about to be handed back, and what its drain moved away.
type Subject struct {
	Node       string
	InstanceID string
	// Claims are the PersistentVolumeClaims ("namespace/name") of the pods the drain evicted.
	// Volumes of pods left on the node (DaemonSet pods, mirror pods) are not waited for: they
	// stay attached until the instance goes.
	Claims []string
	// PodIPs are the IPs the evicted pods had, read before they were evicted: a load balancer
	// with IP targets holds these, not the instance.
	PodIPs []string
}

// Wait is one condition the instance must meet before it is handed back.
type Wait interface {
	// Name names the wait in logs, Events and metrics.
	Name() string
	// Held lists what of s is still held (empty: the wait is over); an item about the instance
	// itself starts with its id and a space. It is called again every
	// Interval until then, so it answers from a cache or a poll shared by every node waiting.
	// An error wrapping ErrSkip ends the wait at once (it cannot be checked, and never will
	// be in this process); any other error is tried again.
	Held(ctx context.Context, s Subject) ([]string, error)
	Interval() time.Duration
}

// ErrSkip marks an error after which a wait is given up rather than retried (a missing
// permission).
var ErrSkip = errors.New("wait skipped")

// Guarded is w with a panic of its Held recovered (site handback_wait), counted in c and logged
// to log: the wait is skipped, as one that cannot be checked, and the other waits (and the
// hand-back) go on.
func Guarded(w Wait, log *slog.Logger, c panics.Counter) Wait {
	return guarded{Wait: w, log: log, count: c}
}

type guarded struct {
	Wait
	log   *slog.Logger
	count panics.Counter
}

func (g guarded) Held(ctx context.Context, s Subject) (held []string, err error) {
	defer func() {
		if _, panicked := errors.AsType[*panics.Error](err); panicked {
			err = fmt.Errorf("%w: %w", ErrSkip, err)
		}
	}()
	defer panics.Recover(panics.DetachWait, g.log, g.count, &err, "wait", g.Name(), "node", s.Node)
	return g.Wait.Held(ctx, s)
}

// Outcome is how a wait ended.
type Outcome string

const (
	Released Outcome = "released" // nothing held any more
	Cut      Outcome = "cut"      // the deadline came first
	Skipped  Outcome = "skipped"  // it could not be checked
)

// Result is one wait's end.
type Result struct {
	Wait    string
	Outcome Outcome
	Took    time.Duration
	// Held is what was still held when the deadline cut the wait.
	Held []string
	// Err is the last error seen (why it was skipped, or why it could not tell when cut).
	Err error
}

// Run waits, concurrently, for every wait to be over for s, and at the latest until deadline
// (or until ctx ends, which also counts as cut). Results are in the order of waits.
func Run(ctx context.Context, deadline time.Time, s Subject, waits ...Wait) []Result {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	results := make([]Result, len(waits))
	var wg sync.WaitGroup
	for i, w := range waits {
		wg.Go(func() { results[i] = waitFor(ctx, w, s) })
	}
	wg.Wait()
	return results
}

func waitFor(ctx context.Context, w Wait, s Subject) Result {
	start := time.Now()
	res := Result{Wait: w.Name()}
	for {
		held, err := w.Held(ctx, s)
		res.Took = time.Since(start)
		switch {
		case errors.Is(err, ErrSkip):
			res.Outcome, res.Err = Skipped, err
			return res
		case err == nil && len(held) == 0:
			res.Outcome, res.Held, res.Err = Released, nil, nil
			return res
		case err == nil:
			res.Held, res.Err = held, nil
		default:
			res.Err = err
		}
		select {
		case <-ctx.Done():
			res.Outcome, res.Took = Cut, time.Since(start)
			return res
		case <-time.After(w.Interval()):
		}
	}
}
