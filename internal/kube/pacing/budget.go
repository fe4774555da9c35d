// Package pacing is the request budget Lifeboat's Kubernetes clients share. It hands requests
// out in lanes (cordons before anything else, the rest soonest deadline first) at a rate it
// sizes from the API server's answers: up while requests wait and answers come back fast,
// down on a 429 or when answers slow well past what the server showed before.
//
// It replaces client-go's token bucket (rest.Config.RateLimiter), which serves waiters in no
// order and, when a waiting request is cancelled, keeps the tokens it reserved: a drain that
// reaches its deadline with thousands of evictions queued leaves every later request waiting
// behind a debt that no request used.
package pacing

import (
	"container/heap"
	"context"
	"sync"
	"time"

	"k8s.io/client-go/util/flowcontrol"
)

// Lane orders requests waiting for the budget: a lower lane goes first.
type Lane int

const (
	// Urgent requests (cordons) go before any other: in a burst every node is cordoned before
	// the drains of the first take the budget.
	Urgent Lane = iota
	// Ordinary requests go soonest deadline first: their context's, or for a request without
	// one (a record write, an informer's list), the moment it arrived, so it is not starved.
	Ordinary
	// Background requests (Kubernetes Events) go when no other request waits.
	Background
)

// Lanes lists every lane, first to last.
var Lanes = []Lane{Urgent, Ordinary, Background}

func (l Lane) String() string {
	switch l {
	case Urgent:
		return "urgent"
	case Ordinary:
		return "ordinary"
	}
	return "background"
}

// Reasons the rate changed, as reported to the Observer.
const (
	ReasonThrottled = "throttled" // the API server answered 429 (or 503): halve
	ReasonSlow      = "slow"      // answers took over four times an idle server's, plus 1 s: ease off
	ReasonDemand    = "demand"    // requests waited and answers were fast: raise
)

// Defaults for Options left zero.
const (
	DefaultStart    = 100.0
	DefaultCeiling  = 1000.0
	DefaultFloor    = 5.0
	DefaultBurst    = 200
	DefaultInterval = 500 * time.Millisecond
)

// Options size the budget. Rates are requests per second.
type Options struct {
	// Start is the rate at start (capped by Ceiling), Ceiling the most it rises to, Floor the
	// least it falls to.
	Start, Ceiling, Floor float64
	// Burst is how many requests may go at once after a quiet spell.
	Burst int
	// Fixed keeps the rate at Start: no adjustment from the server's answers.
	Fixed bool
	// Interval is how often the rate is reconsidered.
	Interval time.Duration
	// Observer is told of rate changes; nil: nobody.
	Observer Observer
}

// Observer is told when the rate changes (metrics).
type Observer interface {
	BudgetChanged(rate float64, reason string)
}

func (o Options) withDefaults() Options {
	if o.Ceiling <= 0 {
		o.Ceiling = DefaultCeiling
	}
	if o.Start <= 0 {
		o.Start = DefaultStart
	}
	o.Start = min(o.Start, o.Ceiling)
	if o.Floor <= 0 {
		o.Floor = DefaultFloor
	}
	o.Floor = min(o.Floor, o.Start)
	if o.Burst <= 0 {
		o.Burst = DefaultBurst
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	return o
}

// Budget is a rate shared by every client given one of its lanes. It needs no goroutine of
// its own: a timer wakes it while requests wait.
type Budget struct {
	opts Options

	mu      sync.Mutex
	rate    float64
	tokens  float64   // may fall below 0: urgent requests sent on their reserve are owed
	reserve float64   // the urgent lane's own tokens, refilled at Options.Start
	refill  time.Time // when tokens were last brought up to date
	queue   waitQueue
	arrived uint64
	timer   *time.Timer // set while a grant is scheduled

	// What the answers said since the rate was last reconsidered, and when that was.
	considered time.Time
	throttled  bool
	waited     bool
	pushed     bool // the server has pushed back at least once: rise gently from now on
	latency    map[string]*latency
}

// New returns a budget, full: Burst requests may go at once.
func New(opts Options) *Budget {
	opts = opts.withDefaults()
	now := time.Now()
	return &Budget{
		opts:       opts,
		rate:       opts.Start,
		tokens:     float64(opts.Burst),
		reserve:    float64(opts.Burst),
		refill:     now,
		considered: now,
		latency:    map[string]*latency{},
	}
}

// Lane returns a rate limiter for a client (rest.Config.RateLimiter) whose requests wait in
// the given lane.
func (b *Budget) Lane(l Lane) flowcontrol.RateLimiter { return laneLimiter{b: b, lane: l} }

// Rate is the current rate in requests per second.
func (b *Budget) Rate() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.rate
}

// Waiting is how many requests wait in a lane now.
func (b *Budget) Waiting(l Lane) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, w := range b.queue {
		if w.lane == l {
			n++
		}
	}
	return n
}

// wait blocks until the request's turn, or until ctx ends: then the request is taken out of
// the queue (or, if its turn came at the same moment, its slot is given back), so a cancelled
// request costs the others nothing.
func (b *Budget) wait(ctx context.Context, lane Lane) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	change := b.reconsiderLocked(time.Now())
	b.refillLocked(time.Now())
	if b.takeLocked(lane) {
		b.mu.Unlock()
		b.report(change)
		return nil
	}
	b.waited = true
	b.arrived++
	w := &waiter{lane: lane, due: time.Now(), order: b.arrived, ready: make(chan struct{})}
	if d, ok := ctx.Deadline(); ok {
		w.due = d
	}
	heap.Push(&b.queue, w)
	b.scheduleLocked(time.Now())
	b.mu.Unlock()
	b.report(change)

	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		b.mu.Lock()
		defer b.mu.Unlock()
		if w.index >= 0 {
			heap.Remove(&b.queue, w.index)
		} else { // its turn came as ctx ended: the request will not be sent, so the slot is free
			b.tokens = min(b.tokens+1, float64(b.opts.Burst))
			if lane == Urgent {
				b.reserve = min(b.reserve+1, float64(b.opts.Burst))
			}
			b.scheduleLocked(time.Now())
		}
		return ctx.Err()
	}
}

func (b *Budget) tryAccept() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refillLocked(time.Now())
	return b.takeLocked(Ordinary)
}

// takeLocked gives a request arriving in lane its turn now if nobody it must follow waits
// and a token is free.
func (b *Budget) takeLocked(lane Lane) bool {
	if b.queue.Len() > 0 && (lane != Urgent || b.queue[0].lane == Urgent) {
		return false // it queues behind them
	}
	return b.chargeLocked(lane)
}

// chargeLocked takes a token for one request of lane, if there is one: a shared token, or
// for an urgent request one of the urgent lane's reserve. Cordons thus keep at least
// Options.Start per second while a 429 has cut the shared rate (as they had with a client of
// their own), and what they take from the reserve the other lanes owe.
func (b *Budget) chargeLocked(lane Lane) bool {
	switch {
	case b.tokens >= 1:
		b.tokens--
		if lane == Urgent {
			b.reserve = max(b.reserve-1, 0)
		}
		return true
	case lane == Urgent && b.reserve >= 1:
		b.reserve--
		b.tokens--
		return true
	}
	return false
}

// scheduleLocked lets waiting requests go while there are tokens, and sets the timer for
// the next token when some still wait.
func (b *Budget) scheduleLocked(now time.Time) {
	b.refillLocked(now)
	for b.queue.Len() > 0 && b.chargeLocked(b.queue[0].lane) {
		close(heap.Pop(&b.queue).(*waiter).ready)
	}
	if b.queue.Len() == 0 || b.timer != nil {
		return
	}
	next := time.Duration((1 - b.tokens) / b.rate * float64(time.Second))
	if b.queue[0].lane == Urgent {
		next = min(next, time.Duration((1-b.reserve)/b.opts.Start*float64(time.Second)))
	}
	b.timer = time.AfterFunc(max(next, time.Millisecond), b.tick)
}

// tick is the timer: the next token is due.
func (b *Budget) tick() {
	b.mu.Lock()
	b.timer = nil
	change := b.reconsiderLocked(time.Now())
	b.scheduleLocked(time.Now())
	b.mu.Unlock()
	b.report(change)
}

func (b *Budget) refillLocked(now time.Time) {
	if elapsed := now.Sub(b.refill).Seconds(); elapsed > 0 {
		b.tokens = min(b.tokens+elapsed*b.rate, float64(b.opts.Burst))
		b.reserve = min(b.reserve+elapsed*b.opts.Start, float64(b.opts.Burst))
		b.refill = now
	}
}

// KubeRequest takes in one answer (it fits kube.RequestObserver): 429s and 503s are the API
// server asking for less; every other non-watch answer's latency is compared with what that
// kind of request (verb and resource) takes on an idle server.
func (b *Budget) KubeRequest(_, verb, resource, code string, took time.Duration) {
	if verb == "watch" || b.opts.Fixed {
		return
	}
	b.mu.Lock()
	defer func() {
		change := b.reconsiderLocked(time.Now())
		b.mu.Unlock()
		b.report(change)
	}()
	switch code {
	case "429", "503":
		b.throttled = true
		return
	case "error": // no answer: says nothing about the server's pace
		return
	}
	key := verb + " " + resource
	l := b.latency[key]
	if l == nil {
		l = &latency{}
		b.latency[key] = l
	}
	l.sum += took
	l.count++
}

// change is a rate change to report once the lock is released.
type change struct {
	rate   float64
	reason string
}

func (b *Budget) report(c *change) {
	if c != nil && b.opts.Observer != nil {
		b.opts.Observer.BudgetChanged(c.rate, c.reason)
	}
}

// reconsiderLocked moves the rate, at most once per interval, on what the answers said since
// the last time: halve on a 429, ease off when answers are slow, raise when requests waited.
func (b *Budget) reconsiderLocked(now time.Time) *change {
	if now.Sub(b.considered) < b.opts.Interval {
		return nil
	}
	b.considered = now
	b.waited = b.waited || b.queue.Len() > 0
	defer func() { b.throttled, b.waited = false, false }()
	if b.opts.Fixed {
		return nil
	}
	slow := false
	for _, l := range b.latency {
		slow = l.settle() || slow
	}
	b.refillLocked(now) // tokens so far accrue at the old rate
	switch {
	case b.throttled:
		b.rate, b.pushed = max(b.rate/2, b.opts.Floor), true
		return &change{b.rate, ReasonThrottled}
	case slow:
		b.rate, b.pushed = max(b.rate*0.8, b.opts.Floor), true
		return &change{b.rate, ReasonSlow}
	case b.waited && b.rate < b.opts.Ceiling:
		step := b.rate / 2 // until the server first pushes back, rise fast
		if b.pushed {
			step = max(b.rate/10, b.opts.Floor)
		}
		b.rate = min(b.rate+step, b.opts.Ceiling)
		return &change{b.rate, ReasonDemand}
	}
	return nil
}

// latency tracks one kind of request: its mean over the current interval against the lowest
// interval mean seen, which drifts up slowly so that a lasting change becomes the new normal.
type latency struct {
	sum      time.Duration
	count    int
	baseline time.Duration
}

// Answers are slow when an interval's mean is over slowFactor times the baseline plus
// slowSlack, over at least minSamples answers. The baseline is what an idle server answers.
// Latency is a weak signal here: most of it in a burst is the queueing Lifeboat's own
// requests cause, and API Priority and Fairness answers 429 when Lifeboat's share is full.
// Measured on the sandbox, evictions take 100 ms alone and 280 ms at 64 in flight with the
// server's throughput still at its peak, and node patches from 3 ms to over 300 ms when a
// burst's first cordons go out at once; a rule at two or three times the baseline cut the
// rate to 16/s in the first seconds of a burst. So only a server that takes a second more
// than several times its idle answer is taken for one falling behind.
const (
	slowFactor = 4
	slowSlack  = time.Second
	minSamples = 10
)

// settle closes the interval and says whether it was slow.
func (l *latency) settle() bool {
	if l.count < minSamples {
		return false // too few to judge; keep them for the next interval
	}
	mean := l.sum / time.Duration(l.count)
	l.sum, l.count = 0, 0
	switch {
	case l.baseline == 0 || mean < l.baseline:
		l.baseline = mean
		return false
	case mean > slowFactor*l.baseline+slowSlack:
		return true
	default:
		l.baseline += (mean - l.baseline) / 50
		return false
	}
}

// laneLimiter is a budget's lane as client-go's rate limiter.
type laneLimiter struct {
	b    *Budget
	lane Lane
}

func (l laneLimiter) Wait(ctx context.Context) error { return l.b.wait(ctx, l.lane) }
func (l laneLimiter) TryAccept() bool                { return l.b.tryAccept() }
func (l laneLimiter) Accept()                        { _ = l.b.wait(context.Background(), l.lane) }
func (l laneLimiter) QPS() float32                   { return float32(l.b.Rate()) }

// Stop does nothing: the budget is shared and holds no goroutine.
func (l laneLimiter) Stop() {}

// waiter is one request waiting for its turn.
type waiter struct {
	lane  Lane
	due   time.Time // its context's deadline, else when it arrived
	order uint64
	ready chan struct{} // closed at its turn
	index int           // in the queue; -1 once out of it
}

type waitQueue []*waiter

func (q waitQueue) Len() int { return len(q) }

func (q waitQueue) Less(i, j int) bool {
	a, b := q[i], q[j]
	if a.lane != b.lane {
		return a.lane < b.lane
	}
	if !a.due.Equal(b.due) {
		return a.due.Before(b.due)
	}
	return a.order < b.order
}

func (q waitQueue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index, q[j].index = i, j
}

func (q *waitQueue) Push(x any) {
	w := x.(*waiter)
	w.index = len(*q)
	*q = append(*q, w)
}

func (q *waitQueue) Pop() any {
	old := *q
	w := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	w.index = -1
	return w
}
