// SPDX-License-Identifier: Apache-2.0

// Package targets waits until a drained node has left every load-balancer target group:
// the instance (instance targets) and its evicted pods' IPs (IP targets, as the AWS Load
// Balancer Controller registers pods) are absent or "unused", no longer "draining". A load
// balancer keeps sending requests to a target for its group's deregistration delay (300 s by
// default); an instance terminated before that ends them mid-flight.
//
// Every waiting node reads one shared poll: each poll lists the target groups (at most once a
// minute) and asks each group for its targets once, however many nodes wait, so a burst of a
// thousand nodes costs what one node costs.
package targets

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/detach"
)

// Options tune the wait; zero values get the defaults.
type Options struct {
	// Interval between polls (default 5 s).
	Interval time.Duration
	// GroupsTTL is how long a list of target groups is reused (default 1 min).
	GroupsTTL time.Duration
	// Observe, when set, is told of every ELBv2 call ("DescribeTargetGroups",
	// "DescribeTargetHealth") and its error.
	Observe func(operation string, err error)
	Logger  *slog.Logger
	// Clock ages the polls and the list of groups; default: the real clock.
	Clock clock.PassiveClock
}

// Wait is the load-balancer target wait.
type Wait struct {
	api  cloud.LoadBalancing
	opts Options

	mu       sync.Mutex
	latest   *poll         // the last poll that finished
	running  chan struct{} // closed when the poll in flight ends; nil when none is
	groups   []cloud.TargetGroup
	groupsAt time.Time
	denied   error // set once ELBv2 refused for lack of permission: the wait is skipped from then on
}

// poll is what one round of calls saw: for each target id, the groups that still hold it.
type poll struct {
	at   time.Time
	held map[string][]string // target id → "group (state)"
	err  error
}

// New returns the wait, reading ELBv2 through api.
func New(api cloud.LoadBalancing, opts Options) *Wait {
	if opts.Interval <= 0 {
		opts.Interval = 5 * time.Second
	}
	if opts.GroupsTTL <= 0 {
		opts.GroupsTTL = time.Minute
	}
	if opts.Observe == nil {
		opts.Observe = func(string, error) {}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Wait{api: api, opts: opts}
}

func (w *Wait) Name() string            { return "targets" }
func (w *Wait) Interval() time.Duration { return w.opts.Interval }

// Check reads the target groups once, at start: an error wrapping cloud.ErrAccessDenied says
// the wait will be skipped (the caller warns once); other errors are only reported.
func (w *Wait) Check(ctx context.Context) error {
	_, err := w.targetGroups(ctx)
	return err
}

// Held lists the target groups still holding the subject's instance or its pods' IPs.
func (w *Wait) Held(ctx context.Context, s detach.Subject) ([]string, error) {
	p, err := w.fresh(ctx)
	if err != nil {
		return nil, err
	}
	var held []string
	for _, id := range append([]string{s.InstanceID}, s.PodIPs...) {
		for _, g := range p.held[id] {
			held = append(held, id+" in "+g)
		}
	}
	slices.Sort(held)
	return held, nil
}

// fresh returns a poll younger than the interval: the last one, the one in flight, or a
// new one made by this caller.
func (w *Wait) fresh(ctx context.Context) (*poll, error) {
	for {
		w.mu.Lock()
		if w.denied != nil {
			w.mu.Unlock()
			return nil, w.denied
		}
		if p := w.latest; p != nil && w.opts.Clock.Since(p.at) < w.opts.Interval {
			w.mu.Unlock()
			return p, p.err
		}
		if running := w.running; running != nil {
			w.mu.Unlock()
			select {
			case <-running:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		running := make(chan struct{})
		w.running = running
		w.mu.Unlock()

		// The poll serves every waiter: it is not cut short by this caller's deadline.
		pollCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		p := w.poll(pollCtx)
		cancel()
		w.mu.Lock()
		w.latest, w.running = p, nil
		if errors.Is(p.err, cloud.ErrAccessDenied) {
			w.denied = fmt.Errorf("%w: %v", detach.ErrSkip, p.err)
			w.opts.Logger.Warn("load-balancer target wait skipped: no permission to read target groups (elasticloadbalancing:DescribeTargetGroups, DescribeTargetHealth)", "err", p.err)
		}
		w.mu.Unlock()
		close(running)
	}
}

// poll asks every target group for its targets.
func (w *Wait) poll(ctx context.Context) *poll {
	p := &poll{held: map[string][]string{}}
	defer func() { p.at = w.opts.Clock.Now() }()
	groups, err := w.targetGroups(ctx)
	if err != nil {
		p.err = err
		return p
	}
	for _, g := range groups {
		if g.TargetType != "instance" && g.TargetType != "ip" {
			continue
		}
		targets, err := w.api.TargetHealth(ctx, g.ARN)
		w.opts.Observe("DescribeTargetHealth", err)
		if err != nil && !errors.Is(err, cloud.ErrAccessDenied) && !isNotFound(err) {
			// Once more at once: a poll that stops at one group's hiccup leaves every waiting
			// node without an answer for another interval.
			targets, err = w.api.TargetHealth(ctx, g.ARN)
			w.opts.Observe("DescribeTargetHealth", err)
		}
		if err != nil {
			if isNotFound(err) { // deleted since it was listed
				continue
			}
			p.err = fmt.Errorf("target group %s: %w", g.Name, err)
			return p
		}
		for _, t := range targets {
			if t.State == "unused" || t.ID == "" {
				continue
			}
			p.held[t.ID] = append(p.held[t.ID], fmt.Sprintf("%s (%s)", g.Name, t.State))
		}
	}
	return p
}

// targetGroups lists the groups, reusing a list younger than GroupsTTL.
func (w *Wait) targetGroups(ctx context.Context) ([]cloud.TargetGroup, error) {
	w.mu.Lock()
	if w.groups != nil && w.opts.Clock.Since(w.groupsAt) < w.opts.GroupsTTL {
		groups := w.groups
		w.mu.Unlock()
		return groups, nil
	}
	w.mu.Unlock()
	groups, err := w.api.TargetGroups(ctx)
	w.opts.Observe("DescribeTargetGroups", err)
	if err != nil {
		return nil, fmt.Errorf("list target groups: %w", err)
	}
	if groups == nil {
		groups = []cloud.TargetGroup{}
	}
	w.mu.Lock()
	w.groups, w.groupsAt = groups, w.opts.Clock.Now()
	w.mu.Unlock()
	return groups, nil
}

func isNotFound(err error) bool {
	var coded interface{ ErrorCode() string }
	return errors.As(err, &coded) && coded.ErrorCode() == "TargetGroupNotFound"
}

// Compile-time check.
var _ detach.Wait = (*Wait)(nil)
