// SPDX-License-Identifier: Apache-2.0

package ownership

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/panics"
)

var errNoEC2 = errors.New("no EC2 client to describe instances with")

// Defaults for the zero InstancesOptions fields.
const (
	DefaultCacheTTL    = time.Minute
	DefaultBatchWindow = 50 * time.Millisecond
)

// lookupTimeout bounds one batched DescribeInstances. The call is shared by every caller in
// the batch, so it runs under its own context rather than any single caller's.
const lookupTimeout = 30 * time.Second

// maxPrefetch bounds how many instances one lookup asks about in all.
const maxPrefetch = 1000

// InstancesOptions tune Instances.
type InstancesOptions struct {
	CacheTTL    time.Duration // how long EC2 answers are reused (0: DefaultCacheTTL)
	BatchWindow time.Duration // lookups arriving within it share one call (0: DefaultBatchWindow)
	// Logger and Panics report a batched DescribeInstances that panicked (site
	// instance_lookup): it fails its lookups as an error does. Logger defaults to slog.Default().
	Logger *slog.Logger
	Panics panics.Counter
}

// Instances is EC2's description of instances, asked for in batches and cached by instance:
// the ownership checks at intake and the instance gate before every AWS call share it, so a
// burst of notices and their completions costs a handful of DescribeInstances calls. It is
// safe for concurrent use.
type Instances struct {
	ec2  cloud.EC2
	opts InstancesOptions
	now  func() time.Time // replaced in tests

	mu       sync.Mutex
	prefetch func() []string    // more ids worth asking about in the same call
	answers  map[string]answer  // EC2 answers by instance id
	inflight map[string]*lookup // ids queued or being asked for
	open     *batch             // the batch still taking ids, if any
	pruned   time.Time
}

// answer is a cached EC2 answer: found is false for an instance EC2 does not know.
type answer struct {
	inst  cloud.Instance
	found bool
	at    time.Time
}

// lookup is one instance id waiting for its batch; done is closed once inst, found and err
// are set.
type lookup struct {
	done  chan struct{}
	inst  cloud.Instance
	found bool
	err   error
}

type batch struct {
	ids   []string
	timer *time.Timer
}

// NewInstances builds the cache over ec2. Zero or negative options take their defaults.
func NewInstances(ec2 cloud.EC2, opts InstancesOptions) *Instances {
	if opts.CacheTTL <= 0 {
		opts.CacheTTL = DefaultCacheTTL
	}
	if opts.BatchWindow <= 0 {
		opts.BatchWindow = DefaultBatchWindow
	}
	return &Instances{ec2: ec2, opts: opts, now: time.Now, answers: map[string]answer{}, inflight: map[string]*lookup{}}
}

// PrefetchFrom makes every call also ask about the instances ids names that are not cached
// (this cluster's nodes' instances): notices come in bursts (a Spot capacity reclaim, a
// scale-in), and one call then serves the burst.
func (c *Instances) PrefetchFrom(ids func() []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.prefetch = ids
}

// Describe returns EC2's description of one instance (found is false when EC2 does not know
// it), from the cache or from the batch being formed. An error means it is not known yet.
func (c *Instances) Describe(ctx context.Context, id string) (inst cloud.Instance, found bool, err error) {
	if c.ec2 == nil {
		return cloud.Instance{}, false, errNoEC2
	}
	c.mu.Lock()
	if a, ok := c.answers[id]; ok && c.now().Sub(a.at) < c.opts.CacheTTL {
		c.mu.Unlock()
		return a.inst, a.found, nil
	}
	l, ok := c.inflight[id]
	if !ok {
		l = &lookup{done: make(chan struct{})}
		c.inflight[id] = l
		c.enqueueLocked(id)
	}
	c.mu.Unlock()

	select {
	case <-l.done:
		return l.inst, l.found, l.err
	case <-ctx.Done():
		return cloud.Instance{}, false, fmt.Errorf("waiting for EC2 DescribeInstances: %w", ctx.Err())
	}
}

// Known takes EC2's answer about instances the caller has just read (the instances of a
// capacity reservation): for CacheTTL they are described from it, without asking EC2 again.
// An instance whose lookup is in flight keeps that lookup's answer.
func (c *Instances) Known(instances []cloud.Instance) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	for _, in := range instances {
		if _, busy := c.inflight[in.ID]; in.ID == "" || busy {
			continue
		}
		c.answers[in.ID] = answer{inst: in, found: true, at: now}
	}
}

// enqueueLocked adds id to the open batch, opening one (sent when BatchWindow ends) if
// needed. A batch that reaches EC2's filter limit is sent at once.
func (c *Instances) enqueueLocked(id string) {
	if c.open == nil {
		b := &batch{}
		b.timer = time.AfterFunc(c.opts.BatchWindow, func() { c.flush(b) })
		c.open = b
	}
	b := c.open
	b.ids = append(b.ids, id)
	if len(b.ids) >= cloud.MaxFilterValues {
		b.timer.Stop()
		c.open = nil
		go c.fetch(b.ids)
	}
}

// flush sends b when its window ends, unless it was sent already for being full.
func (c *Instances) flush(b *batch) {
	c.mu.Lock()
	if c.open != b {
		c.mu.Unlock()
		return
	}
	c.open = nil
	ids := c.withPrefetchLocked(b.ids)
	c.mu.Unlock()
	c.fetch(ids)
}

// withPrefetchLocked adds up to maxPrefetch prefetch ids that are neither cached nor being
// fetched, registering them as in flight so concurrent lookups wait for this call.
func (c *Instances) withPrefetchLocked(ids []string) []string {
	if c.prefetch == nil {
		return ids
	}
	now := c.now()
	for _, id := range c.prefetch() {
		if len(ids) >= maxPrefetch {
			break
		}
		if a, ok := c.answers[id]; ok && now.Sub(a.at) < c.opts.CacheTTL {
			continue
		}
		if _, ok := c.inflight[id]; ok {
			continue
		}
		c.inflight[id] = &lookup{done: make(chan struct{})}
		ids = append(ids, id)
	}
	return ids
}

// describe asks EC2 about ids, on a goroutine of the batch's own. A panic (a bug met on the
// answer) fails the batch as an error does: every lookup waiting on it is told, rather than
// waiting for ever, and is asked again.
func describe(ctx context.Context, ec2 cloud.EC2, ids []string, o InstancesOptions) (found map[string]cloud.Instance, err error) {
	defer panics.Recover(panics.InstanceLookup, o.Logger, o.Panics, &err, "instances", len(ids))
	return ec2.DescribeInstances(ctx, ids)
}

// fetch asks EC2 about ids and hands the answer to everyone waiting. Errors are not cached.
func (c *Instances) fetch(ids []string) {
	ctx, cancel := context.WithTimeout(context.Background(), lookupTimeout)
	found, err := describe(ctx, c.ec2, ids, c.opts)
	cancel()

	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	for _, id := range ids {
		l := c.inflight[id]
		delete(c.inflight, id)
		if err != nil {
			l.err = err
		} else {
			l.inst, l.found = found[id]
			c.answers[id] = answer{inst: l.inst, found: l.found, at: now}
		}
		close(l.done)
	}
	if now.Sub(c.pruned) >= c.opts.CacheTTL {
		for id, a := range c.answers {
			if now.Sub(a.at) >= c.opts.CacheTTL {
				delete(c.answers, id)
			}
		}
		c.pruned = now
	}
}
