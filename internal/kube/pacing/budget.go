// SPDX-License-Identifier: Apache-2.0

// Package pacing is the request budget Lifeboat's Kubernetes clients share. It bounds how
// many of their requests are in flight at the API server at once, hands turns out in lanes
// (cordons first, the rest soonest deadline first, Events last), and sizes the bound from the
// server's answers: up while requests wait and hardly any queue at the server, down on a 429
// or when answers show a queue at the server longer than a small share of the bound.
//
// Why requests in flight rather than a rate: what a server gets through is what it has in
// hand divided by how long each takes, and that time differs by kind (an eviction takes far
// longer than a node patch) and grows with the server's load. A bound on requests in flight
// keeps the server's own queue short whatever the mix, and throughput follows the server's
// pace by itself; a rate must be guessed, and a rate a little too high piles requests up at
// the server until API Priority and Fairness rejects them. The measurements behind this
// package's constants are in docs/design/pacing.md.
//
// The budget is enforced in the clients' transport (Transport), where a request's end is seen;
// client-go's own rate limiter is switched off for these clients. KUBE_API_QPS, when set,
// still caps the rate on top (Options.Rate). Watches are long-running and pass outside it.
package pacing

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	"lifeboat.dev/lifeboat/internal/waitqueue"
)

// Lane orders requests waiting for the budget: a lower lane goes first.
type Lane int

const (
	// Urgent requests (cordons) go before any other, within a bound of their own, and while
	// any is in flight or waiting the other lanes keep to a small share of the bound: in a
	// burst every node is cordoned before the drains of the first take the server.
	Urgent Lane = iota
	// Ordinary requests go soonest deadline first: their context's, or for a request without
	// one (a record write, an informer's list), the moment it arrived, so it is not starved.
	Ordinary
	// Background requests (Kubernetes Events) go when no ordinary request waits.
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

// Reasons the bound changed, as reported to the Observer.
const (
	ReasonThrottled = "throttled" // the API server answered 429 (or 503): halve
	ReasonQueueing  = "queueing"  // answers show more requests queued at the server than the bound allows for: lower
	ReasonDemand    = "demand"    // requests waited for the bound and hardly any queued at the server: raise
)

// Defaults for Options left zero. The start is the concurrency at which the AZ benchmark's
// calibration found the API server at its best for evictions; the ceiling is about what the
// chart's priority level may hold with borrowing: more of Lifeboat's requests at once only
// queue at the server (docs/design/pacing.md).
const (
	DefaultStart    = 64
	DefaultCeiling  = 128
	DefaultFloor    = 1
	DefaultUrgent   = 16
	DefaultBurst    = 200
	DefaultInterval = 500 * time.Millisecond
)

// urgentShare: while cordons are in flight or waiting, the ordinary and background lanes keep
// to this fraction of the bound: a node patch slows several times over behind many
// evictions, so cordons alone did not keep ahead.
const urgentShare = 8

// Options size the budget.
type Options struct {
	// Start is the bound on ordinary and background requests in flight at start, Ceiling the
	// most it rises to, Floor the least it falls to.
	Start, Ceiling, Floor int
	// Urgent bounds urgent requests in flight, on top of the others.
	Urgent int
	// Rate, when above 0, also caps requests per second across every lane (KUBE_API_QPS),
	// with Burst requests at once after a quiet spell.
	Rate  float64
	Burst int
	// Fixed keeps the bound at Start: no adjustment from the server's answers.
	Fixed bool
	// Interval is how often the bound is reconsidered.
	Interval time.Duration
	// Observer is told of changes of the bound; nil: nobody.
	Observer Observer
}

// Observer is told when the bound changes (metrics).
type Observer interface {
	BudgetChanged(limit float64, reason string)
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
	if o.Urgent <= 0 {
		o.Urgent = DefaultUrgent
	}
	if o.Burst <= 0 {
		o.Burst = DefaultBurst
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	return o
}

// Budget is the bound shared by every client given one of its lanes. It needs no goroutine of
// its own: turns are handed out as requests arrive and end (and, under a rate cap, by a timer
// while requests wait for a token).
type Budget struct {
	opts Options

	mu       sync.Mutex
	limit    float64 // ordinary and background requests in flight at most
	inFlight [3]int  // by lane
	queues   [3]waitqueue.Queue

	// The rate cap's tokens, when Options.Rate is set.
	tokens float64
	refill time.Time
	timer  *time.Timer // set while a token is awaited

	// What the answers said since the bound was last reconsidered, and when that was.
	considered time.Time
	waited     bool
	// busy is the ordinary and background requests in flight, summed over time since the
	// bound was last reconsidered (request-seconds), up to busySince.
	busy      time.Duration
	busySince time.Time
	pushed    bool // the server has pushed back at least once: rise gently from now on
	// lastThrottled is when a 429 last halved the bound: no raise for a while after it.
	lastThrottled time.Time
	kinds         map[string]*kind
	// The answers since the bound was last reconsidered, of kinds with a baseline: how many,
	// and their time beyond their kind's baseline, summed (negative when faster).
	answers int
	excess  time.Duration
	// windowStart is when the current baseline window began (see kind.settle).
	windowStart time.Time
}

// New returns a budget at its starting bound.
func New(opts Options) *Budget {
	opts = opts.withDefaults()
	now := time.Now()
	return &Budget{
		opts:        opts,
		limit:       float64(opts.Start),
		tokens:      float64(opts.Burst),
		refill:      now,
		considered:  now,
		busySince:   now,
		windowStart: now,
		kinds:       map[string]*kind{},
	}
}

// Limit is the current bound on ordinary and background requests in flight.
func (b *Budget) Limit() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.limit
}

// Waiting is how many requests wait in a lane now.
func (b *Budget) Waiting(l Lane) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.queues[l].Len()
}

// InFlight is how many requests of a lane are at the server now.
func (b *Budget) InFlight(l Lane) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.inFlight[l]
}

// Acquire waits for a request's turn in lane and returns the function that ends it (safe to
// call more than once), or ctx's error if ctx ends first: then the request leaves the queue,
// or, if its turn came at the same moment, gives the turn back, so a cancelled request costs
// the others nothing.
func (b *Budget) Acquire(ctx context.Context, lane Lane) (done func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	now := time.Now()
	b.mu.Lock()
	change := b.reconsiderLocked(now)
	due := now // ordinary requests by their context's deadline, the others as they come
	if d, ok := ctx.Deadline(); ok && lane == Ordinary {
		due = d
	}
	w := b.queues[lane].Add(due)
	b.grantLocked(now)
	b.mu.Unlock()
	b.report(change)

	select {
	case <-w.Ready():
		return b.ender(lane), nil
	case <-ctx.Done():
		b.mu.Lock()
		if w.Queued() {
			b.queues[lane].Remove(w)
		} else { // its turn came as ctx ended: the request will not be sent
			b.countBusyLocked(time.Now())
			b.inFlight[lane]--
			if b.opts.Rate > 0 {
				b.tokens = min(b.tokens+1, float64(b.opts.Burst))
			}
		}
		b.grantLocked(time.Now())
		b.mu.Unlock()
		return nil, ctx.Err()
	}
}

// ender returns the function that ends one granted request of lane.
func (b *Budget) ender(lane Lane) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			now := time.Now()
			b.mu.Lock()
			b.countBusyLocked(now)
			b.inFlight[lane]--
			change := b.reconsiderLocked(now)
			b.grantLocked(now)
			b.mu.Unlock()
			b.report(change)
		})
	}
}

// grantLocked hands turns to waiting requests while the bounds allow: urgent ones within
// their own bound; ordinary ones, soonest due first, within the shared bound (a small share
// of it while urgent requests are about); background ones when no ordinary request waits.
// Under a rate cap each turn also takes a token, and a timer is set for the next one.
func (b *Budget) grantLocked(now time.Time) {
	b.refillLocked(now)
	for q := &b.queues[Urgent]; q.Len() > 0 && b.inFlight[Urgent] < b.opts.Urgent && b.tokenLocked(); {
		b.inFlight[Urgent]++
		q.Serve()
	}
	bound := int(b.limit)
	if b.inFlight[Urgent] > 0 || b.queues[Urgent].Len() > 0 {
		bound = max(1, bound/urgentShare)
	}
	b.countBusyLocked(now)
	for _, lane := range []Lane{Ordinary, Background} {
		q := &b.queues[lane]
		if lane == Background && b.queues[Ordinary].Len() > 0 {
			break
		}
		for q.Len() > 0 && b.inFlight[Ordinary]+b.inFlight[Background] < bound && b.tokenLocked() {
			b.inFlight[lane]++
			q.Serve()
		}
	}
	b.waited = b.waited || b.boundHoldsLocked()
	b.scheduleLocked()
}

// countBusyLocked adds the ordinary and background requests in flight since the last count;
// call it before their number changes.
func (b *Budget) countBusyLocked(now time.Time) {
	if d := now.Sub(b.busySince); d > 0 {
		b.busy += time.Duration(b.inFlight[Ordinary]+b.inFlight[Background]) * d
		b.busySince = now
	}
}

// boundHoldsLocked reports whether the bound itself holds requests back: demand for more.
func (b *Budget) boundHoldsLocked() bool {
	return b.queues[Ordinary].Len()+b.queues[Background].Len() > 0 &&
		b.inFlight[Ordinary]+b.inFlight[Background] >= int(b.limit)
}

// tokenLocked takes one token of the rate cap, if there is a cap; false when none is left.
func (b *Budget) tokenLocked() bool {
	if b.opts.Rate <= 0 {
		return true
	}
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

func (b *Budget) refillLocked(now time.Time) {
	if b.opts.Rate <= 0 {
		return
	}
	if elapsed := now.Sub(b.refill).Seconds(); elapsed > 0 {
		b.tokens = min(b.tokens+elapsed*b.opts.Rate, float64(b.opts.Burst))
		b.refill = now
	}
}

// scheduleLocked sets the timer for the next token while requests wait for one.
func (b *Budget) scheduleLocked() {
	if b.opts.Rate <= 0 || b.timer != nil || b.tokens >= 1 {
		return
	}
	waiting := 0
	for _, q := range b.queues {
		waiting += q.Len()
	}
	if waiting == 0 {
		return
	}
	next := time.Duration((1 - b.tokens) / b.opts.Rate * float64(time.Second))
	b.timer = time.AfterFunc(max(next, time.Millisecond), b.tick)
}

// tick is the rate cap's timer: the next token is due.
func (b *Budget) tick() {
	now := time.Now()
	b.mu.Lock()
	b.timer = nil
	change := b.reconsiderLocked(now)
	b.grantLocked(now)
	b.mu.Unlock()
	b.report(change)
}

// KubeRequest takes in one answer (it fits kube.RequestObserver): a throttling 429 and a 503
// are the API server asking for less; every other answer's latency is compared with what its
// kind of request (verb and resource, with the same code) takes on an idle server. A
// disruption budget's refusal of an eviction is a 429 too, but says nothing of the server's
// load: it is an answer like the others. Watches and lists are left out: a watch is open for
// minutes, and a list takes as long as its result is large.
func (b *Budget) KubeRequest(_, verb, resource, code string, throttled bool, took time.Duration) {
	if verb == "watch" || verb == "list" || b.opts.Fixed {
		return
	}
	var halved *change
	b.mu.Lock()
	defer func() {
		change := b.reconsiderLocked(time.Now())
		b.mu.Unlock()
		b.report(halved)
		b.report(change)
	}()
	switch {
	case throttled || code == "503":
		// At once, not at the next interval: a refusal is answered in a millisecond, so
		// until the bound comes down each refused request's turn goes straight to another
		// that the server refuses too. Not more often than throttleSpacing: the requests
		// already at the server when it first refused are refused together.
		if now := time.Now(); now.Sub(b.lastThrottled) >= throttleSpacing {
			b.limit, b.pushed, b.lastThrottled = max(b.limit/2, float64(b.opts.Floor)), true, now
			halved = &change{b.limit, ReasonThrottled}
		}
		return
	case code == "error": // no answer: says nothing about the server's pace
		return
	}
	// The answer's code is part of its kind: an eviction refused (by a disruption budget) or
	// of a pod already gone is answered far sooner than one accepted, and taken as the
	// baseline would make every accepted one look queued.
	key := verb + " " + resource + " " + code
	k := b.kinds[key]
	if k == nil {
		k = &kind{}
		b.kinds[key] = k
	}
	k.sum += took
	k.count++
	if base := k.baseline(); base > 0 {
		b.answers++
		b.excess += took - base
	}
}

// change is a change of the bound to report once the lock is released.
type change struct {
	limit  float64
	reason string
}

func (b *Budget) report(c *change) {
	if c != nil && b.opts.Observer != nil {
		b.opts.Observer.BudgetChanged(c.limit, c.reason)
	}
}

// reconsiderLocked moves the bound, at most once per interval, on what the answers said since
// the last time (a 429 halves it at once: KubeRequest).
//
// The answers tell how many requests wait at the server, Lifeboat's own and others': by
// Little's law, the time answers took beyond an idle server's, summed over an interval and
// divided by its length, is the number of requests that were queued on average. A server
// that can work on N requests at once answers each as fast as when idle up to N in flight,
// and beyond that only queues them: in flight N + q, it answers no faster than at N, and each
// answer takes q/N longer. So the bound is kept where a few requests queue, enough that the
// server never waits for work: lowered by half the excess when the queue is over a quarter of
// the bound, raised while requests wait for it and the queue is under an eighth: a bound that
// stops only when answers become far slower sits at its ceiling with most of it queued at the
// server.
//
// A queue lowers the bound to its start at most; only 429s take it further. Answers are
// slower when others load the server too, and fewer requests of Lifeboat's do not make
// others' go faster: a bound that followed the queue all the way down starved the drains
// (docs/design/pacing.md). A baseline measured on a quieter server than today's makes every answer
// look queued until its window passes, too. API Priority and Fairness says when Lifeboat's
// share is full, with a 429.
func (b *Budget) reconsiderLocked(now time.Time) *change {
	elapsed := now.Sub(b.considered)
	if elapsed < b.opts.Interval {
		return nil
	}
	b.considered = now
	b.waited = b.waited || b.boundHoldsLocked()
	queued := b.excess.Seconds() / elapsed.Seconds()
	judged := b.answers >= minSamples
	b.countBusyLocked(now)
	used := b.busy.Seconds() / elapsed.Seconds() // requests in flight on average
	defer func() { b.waited, b.answers, b.excess, b.busy = false, 0, 0, 0 }()
	if b.opts.Fixed {
		return nil
	}
	rotate := now.Sub(b.windowStart) >= baselineWindow
	if rotate {
		b.windowStart = now
	}
	for _, k := range b.kinds {
		k.settle(rotate)
	}
	lo, hi := max(b.limit/8, 2), max(b.limit/4, 4)
	start, ceiling := float64(b.opts.Start), float64(b.opts.Ceiling)
	switch {
	case judged && queued > hi && b.limit > start:
		b.limit, b.pushed = max(b.limit-(queued-hi)/2, b.limit/2, start), true
		return &change{b.limit, ReasonQueueing}
	case judged && queued < lo && b.waited && used >= usedToRaise*b.limit && b.limit < ceiling && now.Sub(b.lastThrottled) >= quietAfterThrottle*b.opts.Interval:
		step := b.limit / 2 // until the server first pushes back (a 429, a queue), rise fast
		if b.pushed {
			step = max(b.limit/10, 1)
		}
		b.limit = min(b.limit+step, ceiling)
		b.grantLocked(now)
		return &change{b.limit, ReasonDemand}
	}
	return nil
}

// usedToRaise is the share of the bound that must have been in flight, on average over the
// interval, for its answers to justify a raise. Answers with fewer requests at the server say
// nothing of what the whole bound would do to it: while cordons keep the other lanes to a
// share of the bound, evictions wait and are answered fast, and a bound raised on that alone
// reached its ceiling before the last cordon, then sent so many evictions at once that the
// API server closed node watches as too slow.
const usedToRaise = 0.75

// quietAfterThrottle is how many intervals after a 429 the bound does not rise: API Priority
// and Fairness asks for a second's wait (Retry-After), and the requests it refused come back
// together after it; on a priority level that holds seats after answering (its estimate of the
// watch notifications a write causes), requests in flight undercount what it has in hand.
const quietAfterThrottle = 4

// throttleSpacing is the least time between two halvings: far longer than a refusal takes to
// come back (docs/benchmarks.md), about as long as an ordinary answer.
const throttleSpacing = 100 * time.Millisecond

// minSamples is the fewest answers an interval needs to be judged, and a kind's interval to
// count for its baseline: an interval with fewer says little, and while requests are in
// flight and few answers come back, the bound is not raised.
const minSamples = 10

// baselineWindow: a kind's baseline is its lowest interval mean over the last one or two
// windows that had any, so that a lasting change of the server's pace (a busier cluster, a
// larger control plane) becomes its new idle pace within minutes, while within a burst the
// baseline stays what the first quiet answers showed.
const baselineWindow = time.Minute

// kind tracks one kind of request (verb, resource and the answer's code): its answers of the current interval,
// and its lowest interval mean in the current and the previous baseline window (0: none).
type kind struct {
	sum       time.Duration
	count     int
	cur, prev time.Duration
}

// baseline is what this kind takes on an idle server, as far as seen: 0 until an interval
// had minSamples of it.
func (k *kind) baseline() time.Duration {
	if k.cur == 0 || (k.prev != 0 && k.prev < k.cur) {
		return k.prev
	}
	return k.cur
}

// settle closes the interval: its mean, over minSamples answers or more, may lower the
// current window's lowest; fewer stay for the next interval. On rotate a window that saw any
// interval becomes the previous one.
func (k *kind) settle(rotate bool) {
	if k.count >= minSamples {
		mean := k.sum / time.Duration(k.count)
		k.sum, k.count = 0, 0
		if k.cur == 0 || mean < k.cur {
			k.cur = mean
		}
	}
	if rotate && k.cur != 0 {
		k.prev, k.cur = k.cur, 0
	}
}

// Configure puts rc's requests in lane: the budget wraps its transport, and client-go's own
// rate limit is switched off. Wrap it after any instrumentation, so that what the
// instrumentation times (and tells the budget) is the server's answer, not the wait for a turn.
func (b *Budget) Configure(rc *rest.Config, lane Lane) {
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper { return b.Transport(lane, rt) })
	rc.RateLimiter = flowcontrol.NewFakeAlwaysRateLimiter()
}

// Transport returns next with the budget in front of it, every request but watches waiting
// for its turn in lane. A turn ends when the answer's body is read to its end or closed.
func (b *Budget) Transport(lane Lane, next http.RoundTripper) http.RoundTripper {
	return &pacedTransport{b: b, lane: lane, next: next}
}

type pacedTransport struct {
	b    *Budget
	lane Lane
	next http.RoundTripper
}

func (t *pacedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if isWatch(req) {
		return t.next.RoundTrip(req)
	}
	done, err := t.b.Acquire(req.Context(), t.lane)
	if err != nil {
		if req.Body != nil {
			req.Body.Close() // a RoundTripper closes the body, even when it sends nothing
		}
		return nil, err
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil || resp.Body == nil {
		done()
		return resp, err
	}
	resp.Body = &endingBody{ReadCloser: resp.Body, done: done}
	return resp, nil
}

// isWatch reports a watch request (?watch=true, or the legacy /watch/ path): a stream open for
// minutes, which the budget must not count as in flight.
func isWatch(req *http.Request) bool {
	switch req.URL.Query().Get("watch") {
	case "true", "1":
		return true
	}
	return strings.Contains(req.URL.Path, "/watch/")
}

// endingBody ends the request's turn when the answer has been read or closed.
type endingBody struct {
	io.ReadCloser
	done func()
}

func (e *endingBody) Read(p []byte) (int, error) {
	n, err := e.ReadCloser.Read(p)
	if err != nil {
		e.done()
	}
	return n, err
}

func (e *endingBody) Close() error {
	e.done()
	return e.ReadCloser.Close()
}
