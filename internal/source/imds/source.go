// SPDX-License-Identifier: Apache-2.0

// Package imds turns EC2 instance metadata into notices for agent mode: it polls the spot,
// scheduled-maintenance, rebalance and Auto Scaling lifecycle paths over IMDSv2.
//
// A failing metadata service never stops the agent: each path backs off on its own, errors
// are logged and counted, Healthy reports a sustained failure, and polling recovers by itself.
package imds

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	sdkimds "github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/panics"
)

// Getter reads one metadata path; found is false when the path does not exist (404), which
// for event paths means "no event".
type Getter interface {
	Get(ctx context.Context, path string) (body []byte, found bool, err error)
}

// Client reads instance metadata with the AWS SDK's IMDS client, which fetches and refreshes
// the IMDSv2 session token and retries on 401 and server errors.
type Client struct {
	sdk     *sdkimds.Client
	timeout time.Duration
}

// NewClient talks to endpoint (INSTANCE_METADATA_URL). tries is METADATA_TRIES; allowV1
// permits falling back to IMDSv1 when no token can be had.
func NewClient(endpoint string, tries int, allowV1 bool) *Client {
	fallback := aws.FalseTernary
	if allowV1 {
		fallback = aws.TrueTernary
	}
	return &Client{
		sdk: sdkimds.New(sdkimds.Options{
			Endpoint: endpoint,
			// Explicitly on: AWS_EC2_METADATA_DISABLED is about the SDK's credential chain,
			// and reading notices is this client's whole job.
			ClientEnableState: sdkimds.ClientEnabled,
			EnableFallback:    fallback,
			// Short backoff: the poll interval already paces retries, and the last error
			// (say, a 500) must surface rather than a timeout.
			Retryer: retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = max(tries, 1)
				o.MaxBackoff = 250 * time.Millisecond
			}),
		}),
		// Each attempt gets about a second; METADATA_TRIES attempts share one deadline.
		timeout: time.Duration(max(tries, 1))*time.Second + 500*time.Millisecond,
	}
}

// Get reads a path under /latest/meta-data/.
func (c *Client) Get(ctx context.Context, path string) ([]byte, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	out, err := c.sdk.GetMetadata(ctx, &sdkimds.GetMetadataInput{Path: path})
	if err != nil {
		var re *smithyhttp.ResponseError
		if errors.As(err, &re) && re.HTTPStatusCode() == http.StatusNotFound {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("instance metadata %s: %w", path, err)
	}
	defer out.Content.Close()
	body, err := io.ReadAll(io.LimitReader(out.Content, 1<<20))
	if err != nil {
		return nil, false, fmt.Errorf("instance metadata %s: %w", path, err)
	}
	return body, true, nil
}

// InstanceID reads the instance's id.
func InstanceID(ctx context.Context, g Getter) (string, error) {
	body, found, err := g.Get(ctx, "instance-id")
	if err != nil {
		return "", err
	}
	id := strings.TrimSpace(string(body))
	if !found || !strings.HasPrefix(id, "i-") {
		return "", fmt.Errorf("instance metadata instance-id: unexpected answer %q", clip(body))
	}
	return id, nil
}

// Options choose the monitors and their pace.
type Options struct {
	Spot, Scheduled, Rebalance, Lifecycle bool
	// Interval is the spot path's poll interval. The others are polled less often, as they
	// give more warning: lifecycle every 2, rebalance every 4, scheduled every 10 intervals
	// (what that asks of instance metadata: IMDS_POLL_INTERVAL in docs/configuration.md).
	Interval time.Duration
	// DrainBudget is the deadline, from when a notice was first seen, for notices that carry
	// none (rebalance, lifecycle state).
	DrainBudget time.Duration
	// FailingAfter is how long a path must fail without a success before Healthy reports it.
	FailingAfter time.Duration
	Logger       *slog.Logger
	// Observe, when set, is told about every poll: the path and its error (nil on success).
	Observe func(path string, err error)
	// Warn, when set, is told once about each distinct part of an answer that could not be
	// read while the rest was used (the problem, as in Warning); it is also logged once.
	Warn func(problem string)
	// Panics, when set, counts the polls whose reading panicked (site imds_poll): such a poll
	// fails like one that met an error, and polling goes on.
	Panics panics.Counter
}

type monitor struct {
	path  string
	every int // multiple of Interval
	parse func(body []byte, instanceID string) ([]notice.Notice, []Warning, error)

	mu           sync.Mutex
	failingSince time.Time
	failures     int
	lastErr      error
}

// Poller polls the enabled paths and emits each notice once.
type Poller struct {
	get        Getter
	instanceID string
	opts       Options
	monitors   []*monitor

	mu        sync.Mutex
	emitted   map[string]bool
	firstSeen map[string]time.Time
	warned    map[string]bool // warnings already logged, by detail
}

// NewPoller polls g for instanceID.
func NewPoller(g Getter, instanceID string, opts Options) *Poller {
	if opts.Interval <= 0 {
		opts.Interval = 500 * time.Millisecond
	}
	if opts.FailingAfter <= 0 {
		opts.FailingAfter = 30 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	p := &Poller{get: g, instanceID: instanceID, opts: opts, emitted: map[string]bool{}, firstSeen: map[string]time.Time{}, warned: map[string]bool{}}
	one := func(f func([]byte, string) (notice.Notice, error)) func([]byte, string) ([]notice.Notice, []Warning, error) {
		return func(b []byte, id string) ([]notice.Notice, []Warning, error) {
			n, err := f(b, id)
			if err != nil {
				return nil, nil, err
			}
			return []notice.Notice{n}, nil, nil
		}
	}
	if opts.Spot {
		p.monitors = append(p.monitors, &monitor{path: PathSpot, every: 1, parse: one(parseSpot)})
	}
	if opts.Lifecycle {
		p.monitors = append(p.monitors, &monitor{path: PathLifecycleState, every: 2, parse: func(b []byte, id string) ([]notice.Notice, []Warning, error) {
			n, unknown, err := parseLifecycleState(b, id)
			switch {
			case err != nil:
				return nil, nil, err
			case unknown != "":
				return nil, []Warning{{Problem: problemLifecycleStateUnknown,
					Detail: fmt.Sprintf("%s: state %q is not one Lifeboat knows: ignored", PathLifecycleState, unknown)}}, nil
			case n == nil:
				return nil, nil, nil
			}
			return []notice.Notice{*n}, nil, nil
		}})
	}
	if opts.Rebalance {
		p.monitors = append(p.monitors, &monitor{path: PathRebalance, every: 4, parse: one(parseRebalance)})
	}
	if opts.Scheduled {
		p.monitors = append(p.monitors, &monitor{path: PathScheduled, every: 10, parse: parseScheduled})
	}
	return p
}

// Run polls until ctx ends, sending new notices to out.
func (p *Poller) Run(ctx context.Context, out chan<- notice.Notice) {
	var wg sync.WaitGroup
	for _, m := range p.monitors {
		wg.Go(func() { p.runMonitor(ctx, m, out) })
	}
	wg.Wait()
}

func (p *Poller) runMonitor(ctx context.Context, m *monitor, out chan<- notice.Notice) {
	interval := p.opts.Interval * time.Duration(m.every)
	for {
		wait := interval
		notices, err := p.poll(ctx, m)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			// Back off while failing, but keep retrying: the service usually comes back.
			wait = min(interval<<min(m.failures, 6), max(5*time.Second, interval))
		}
		for _, n := range notices {
			if p.firstEmit(n.ID, n.Released) {
				select {
				case out <- n:
				case <-ctx.Done():
					return
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// poll reads one path once and records the outcome.
func (p *Poller) poll(ctx context.Context, m *monitor) ([]notice.Notice, error) {
	began := time.Now()
	notices, warnings, err := p.read(ctx, m)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	p.record(m, err, began)
	if p.opts.Observe != nil {
		p.opts.Observe(m.path, err)
	}
	p.warnOnce(warnings)
	now := time.Now()
	for i := range notices {
		n := &notices[i]
		if n.Announced.IsZero() {
			n.Announced = p.seen(n.ID, now) // instance metadata states no announcement time
		}
		if n.Deadline.IsZero() && n.CordonOnly == "" {
			// No time of its own (rebalance, lifecycle state): the budget runs from when this
			// process first saw it, which also stands in for when the action began.
			first := p.seen(n.ID, now)
			n.Deadline = first.Add(p.opts.DrainBudget)
			if n.StartTime.IsZero() {
				n.StartTime = first
			}
		}
	}
	return notices, err
}

// read gets the path's answer and parses it. A panic (a bug met on an answer) is this poll's
// failure, recorded and backed off from like an error: the next poll runs all the same.
func (p *Poller) read(ctx context.Context, m *monitor) (notices []notice.Notice, warnings []Warning, err error) {
	defer panics.Recover(panics.IMDSPoll, p.opts.Logger, p.opts.Panics, &err, "path", m.path)
	body, found, err := p.get.Get(ctx, m.path)
	if err != nil || !found {
		return nil, nil, err
	}
	return m.parse(body, p.instanceID)
}

// warnOnce logs and counts each distinct warning the first time it is seen: metadata repeats
// the same answer on every poll.
func (p *Poller) warnOnce(warnings []Warning) {
	for _, w := range warnings {
		p.mu.Lock()
		seen := p.warned[w.Detail]
		p.warned[w.Detail] = true
		p.mu.Unlock()
		if seen {
			continue
		}
		p.opts.Logger.Warn("part of an instance metadata answer could not be read; the rest is used", "problem", w.Problem, "detail", w.Detail)
		if p.opts.Warn != nil {
			p.opts.Warn(w.Problem)
		}
	}
}

// record notes a poll's outcome. A failure counts from when its poll began: one that hung
// until the client's deadline has been failing all that time.
func (p *Poller) record(m *monitor, err error, began time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	log := p.opts.Logger.With("path", m.path)
	switch {
	case err == nil && m.failures > 0:
		log.Info("instance metadata answers again", "failedPolls", m.failures)
		m.failures, m.failingSince, m.lastErr = 0, time.Time{}, nil
	case err != nil:
		if m.failures == 0 {
			m.failingSince = began
		}
		m.failures++
		m.lastErr = err
		if m.failures == 1 || m.failures%20 == 0 {
			log.Warn("instance metadata poll failed", "failedPolls", m.failures, "err", err)
		}
	}
}

// seen returns when a notice id was first seen, so notices without a time of their own keep
// one deadline across polls.
func (p *Poller) seen(id string, now time.Time) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	if t, ok := p.firstSeen[id]; ok {
		return t
	}
	p.firstSeen[id] = now
	return now
}

// firstEmit is true the first time a notice (or its release) is seen by this process.
func (p *Poller) firstEmit(id string, released bool) bool {
	key := id
	if released {
		key += "/released"
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.emitted[key] {
		return false
	}
	p.emitted[key] = true
	return true
}

// Healthy is nil unless some path has failed for FailingAfter without a success.
func (p *Poller) Healthy() error {
	var errs []error
	for _, m := range p.monitors {
		m.mu.Lock()
		if m.failures > 0 && time.Since(m.failingSince) >= p.opts.FailingAfter {
			errs = append(errs, fmt.Errorf("%s failing for %s (%d polls): %w", m.path, time.Since(m.failingSince).Round(time.Second), m.failures, m.lastErr))
		}
		m.mu.Unlock()
	}
	return errors.Join(errs...)
}
