// SPDX-License-Identifier: Apache-2.0

package drain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"lifeboat.dev/lifeboat/internal/panics"
)

// Options configure a Drainer.
type Options struct {
	Policy
	// Lister supplies the node's pods; default: the API server's watch cache. Each drain
	// then watches its node's pods itself.
	Lister PodLister
	// Pods, when set, supplies and follows every drain's pods from one shared informer
	// instead (see NodePods); Lister is not used.
	Pods *NodePods
	// PodGracePeriod overrides pods' own grace period when >= 0 (POD_TERMINATION_GRACE_PERIOD);
	// -1 keeps each pod's own. Either way it is capped so pods end before the deadline.
	PodGracePeriod int
	// ForceBeforeDeadline, when > 0, deletes pods that a PodDisruptionBudget still protects
	// once the deadline is this close, with a grace period clamped to what is left (at least
	// 1 s). Off by default: it overrides the application owner's budget.
	ForceBeforeDeadline time.Duration
	// Concurrency bounds one drain's evictions in flight (default 32); the client's request
	// budget still applies.
	Concurrency int
	// Slots bounds the evictions waiting for the request budget or in flight across every
	// drain of the Drainer (default 256, twice the budget's ceiling), soonest deadline first.
	Slots int
	// RetryMin and RetryMax bound the jittered backoff after a refused eviction
	// (defaults 250 ms and 5 s).
	RetryMin, RetryMax time.Duration
	// DryRun selects pods and reports what would be evicted, but evicts nothing.
	DryRun bool
	// Observer, when set, hears of pods whose eviction a PodDisruptionBudget refuses.
	Observer Observer
	Logger   *slog.Logger
	// Panics, when set, counts the panics recovered in a drain's goroutines: a pod's eviction
	// (site eviction: that pod fails), the drain's pod watch (pod_watch: the drain fails) and
	// its cuts of grace periods (grace_cut).
	Panics panics.Counter
}

// Observer hears which pods hold a drain, so that an operator does not have to guess. A
// drain calls Blocked once per pod, at its first eviction refused by a disruption budget,
// and Unblocked once for that pod when its eviction ends either way. Calls come from the
// drain's workers, concurrently.
type Observer interface {
	Blocked(pod *Pod, by Blocker)
	Unblocked(pod *Pod, by Blocker, evicted bool)
}

// MarkObserver is an Observer that also hears of pods whose do-not-disrupt annotation cannot
// be read: they are taken as marked "true", and their owners should know. A drain tells it
// once per pod, from the drain's goroutine.
type MarkObserver interface {
	UnreadableMark(pod *Pod, why string)
}

// MoveObserver is an Observer that also hears of each pod a drain moves: its eviction
// accepted, or (forced) its deletion past a budget near the deadline, with the grace period it
// was given. Calls come from the drain's workers, concurrently, and must not block.
type MoveObserver interface {
	Moved(pod *Pod, forced bool, graceSeconds int64)
}

// Drainer empties nodes.
type Drainer struct {
	client kubernetes.Interface
	opts   Options
	slots  *evictionSlots // shared by the copies WithNodePods makes
}

// Observer is the observer the drainer reports to (Options.Observer).
func (d *Drainer) Observer() Observer { return d.opts.Observer }

// WithNodePods returns a copy of d whose drains list and follow their pods from p.
func (d *Drainer) WithNodePods(p *NodePods) *Drainer {
	c := *d
	c.opts.Pods = p
	return &c
}

// WithOwnPodLast returns a copy of d that evicts Lifeboat's own pod too, last on its node
// (Policy.OwnPodLast): a controller's, whose standby takes over when it stops.
func (d *Drainer) WithOwnPodLast() *Drainer {
	c := *d
	c.opts.OwnPodLast = true
	return &c
}

// New returns a Drainer; zero options get their defaults.
func New(client kubernetes.Interface, opts Options) *Drainer {
	if opts.Lister == nil {
		opts.Lister = APILister{Client: client}
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = 32
	}
	if opts.Slots <= 0 {
		opts.Slots = 256
	}
	if opts.RetryMin <= 0 {
		opts.RetryMin = 250 * time.Millisecond
	}
	if opts.RetryMax < opts.RetryMin {
		opts.RetryMax = max(opts.RetryMin, 5*time.Second)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Drainer{client: client, opts: opts, slots: newEvictionSlots(opts.Slots)}
}

// Outstanding is what a drain of a node would find to do now.
type Outstanding struct {
	Evict       int // pods it would evict
	Terminating int // pods already terminating that it would wait for
}

// Outstanding tells what a drain of the node under terms would find, from the shared pod
// informer (Options.Pods) and without a request. ok is false without one, or before its
// first list.
func (d *Drainer) Outstanding(node string, terms Terms) (out Outstanding, ok bool) {
	if d.opts.Pods == nil {
		return out, false
	}
	pods, ok := d.opts.Pods.cachedOn(node)
	if !ok {
		return out, false
	}
	candidates, skipped := Select(pods, d.opts.Policy, terms)
	out.Evict = len(candidates)
	for _, s := range skipped {
		if s.Reason == ReasonTerminating {
			out.Terminating++
		}
	}
	return out, true
}

// Drain evicts the node's pods and waits until they are gone or the deadline passes. The
// error is nil only when every selected pod is gone (or, in dry-run, after selection).
// Pods marked not to disrupt stay: the terms of a Drain are those of no reclaim.
func (d *Drainer) Drain(ctx context.Context, node string, deadline time.Time) (*Result, error) {
	return d.DrainUntil(ctx, node, NewDeadline(deadline), Terms{})
}

// DrainUntil is Drain with a deadline that may be tightened while the drain runs, under the
// notices' terms.
func (d *Drainer) DrainUntil(ctx context.Context, node string, deadline *Deadline, terms Terms) (*Result, error) {
	res := &Result{Node: node, DryRun: d.opts.DryRun, Started: time.Now()}
	defer func() { res.Finished = time.Now() }()
	parent := ctx
	ctx, cancel := deadline.bound(ctx)
	defer cancel()
	// Read before any goroutine starts, so that no tightening from here on is missed.
	tightened := deadline.Changed()

	r := &drainRun{d: d, node: node, deadline: deadline, terms: terms, res: res, tr: newTracker(nil), told: map[types.UID]bool{}}
	pods, rv, stopFollowing, err := r.list(ctx)
	defer stopFollowing()
	if err != nil {
		return res, r.listFailed(ctx, parent, err)
	}
	res.Listed = time.Now()
	candidates, terminating := r.selectListed(pods)
	if d.opts.DryRun || len(candidates)+len(terminating) == 0 {
		return res, nil
	}
	if terms.Dead != "" {
		return res, r.deleteDead(ctx, pods, candidates, terminating)
	}

	r.track(pods, candidates, terminating)
	ctx, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	if d.opts.Pods == nil {
		go d.watchSafely(watchCtx, node, rv, r.tr, fail)
	}
	d.shortenOnTighten(watchCtx, deadline, tightened, r.tr)

	d.evictInTiers(ctx, candidates, res.Pods, deadline, r.tr)
	r.tr.waitAll(ctx, terminating)
	r.drainLate(ctx)
	r.noteGone()
	if err, panicked := errors.AsType[*panics.Error](context.Cause(ctx)); panicked {
		return res, fmt.Errorf("drain %s: %w", node, err)
	}
	return res, r.incomplete(terminating)
}

// watchSafely runs the drain's pod watch; a panic fails the drain (fail ends it with the
// panic as its cause), which is retried, rather than leave it blind until its deadline.
func (d *Drainer) watchSafely(ctx context.Context, node, rv string, tr *tracker, fail context.CancelCauseFunc) {
	if err := panics.Do(panics.PodWatch, d.opts.Logger, d.opts.Panics, func() { d.watchDeletions(ctx, node, rv, tr) }, "node", node); err != nil {
		fail(err)
	}
}

// drainRun is one drain's state, shared by its steps.
type drainRun struct {
	d        *Drainer
	node     string
	deadline *Deadline
	terms    Terms
	res      *Result
	tr       *tracker
	told     map[types.UID]bool // pods whose unreadable mark was reported
}

// list reads the node's pods. With a shared informer the tracker follows the node from
// before the list, so that nothing between the list and the selection is missed; stop ends
// that (it does nothing otherwise). rv is the list's resource version, to watch from.
func (r *drainRun) list(ctx context.Context) (pods []*Pod, rv string, stop func(), err error) {
	if p := r.d.opts.Pods; p != nil {
		stop = p.follow(r.node, r.tr)
		pods, err = p.podsOn(ctx, r.node)
		return pods, "", stop, err
	}
	pods, rv, err = r.d.opts.Lister.PodsOnNode(ctx, r.node)
	return pods, rv, func() {}, err
}

// listFailed is the drain's error for a failed list.
func (r *drainRun) listFailed(ctx, parent context.Context, err error) error {
	if ctx.Err() != nil && parent.Err() == nil {
		// Our deadline, not the caller, ended the list: say so, rather than let the
		// context's cancellation read as a shutdown.
		return fmt.Errorf("drain %s: the deadline passed while listing its pods: %w", r.node, context.DeadlineExceeded)
	}
	return fmt.Errorf("drain %s: %w", r.node, err)
}

// selectListed decides which listed pods to evict, and records the decision in the result.
// Pods already terminating are not evicted again, but the node is not empty until they are
// gone too: they are returned to be waited for on the same watch.
func (r *drainRun) selectListed(pods []*Pod) (candidates []Candidate, terminating []types.UID) {
	candidates, skipped := Select(pods, r.d.opts.Policy, r.terms)
	r.d.reportMarks(r.node, pods, candidates, skipped, r.told)
	r.res.Skipped = skipped
	r.res.Pods = make([]PodOutcome, len(candidates))
	for i, c := range candidates {
		r.res.Pods[i] = outcomeOf(c)
	}
	for _, s := range skipped {
		if s.Reason == ReasonTerminating {
			terminating = append(terminating, s.UID)
		}
	}
	return candidates, terminating
}

// track has the tracker follow the pods the drain waits for.
func (r *drainRun) track(pods []*Pod, candidates []Candidate, terminating []types.UID) {
	r.tr.track(terminating...)
	for _, c := range candidates {
		r.tr.track(c.Pod.UID)
	}
	for _, p := range pods {
		if p.DeletionTimestamp != nil && slices.Contains(terminating, p.UID) {
			r.tr.leavingBy(p, p.DeletionTimestamp.Time) // the API server's end of its grace period
		}
	}
}

// drainLate drains the pods that reached the node after the list (bound by a scheduler that
// decided before the cordon), in a few more rounds at most.
func (r *drainRun) drainLate(ctx context.Context) {
	for round := 0; round < maxLateRounds && ctx.Err() == nil; round++ {
		latePods := r.tr.takeLate()
		late, lateSkipped := Select(latePods, r.d.opts.Policy, r.terms)
		r.d.reportMarks(r.node, latePods, late, lateSkipped, r.told)
		// The watch also reports pods the list already skipped whenever they change (a
		// DaemonSet pod's status, say): they are decided again, but reported once.
		r.res.Skipped = reviseSkipped(r.res.Skipped, lateSkipped, late)
		if len(late) == 0 {
			break
		}
		first := len(r.res.Pods)
		for _, c := range late {
			r.tr.track(c.Pod.UID)
			r.res.Pods = append(r.res.Pods, outcomeOf(c))
		}
		r.d.opts.Logger.Info("pods arrived on the node after the drain listed it; draining them too", "node", r.node, "pods", len(late))
		r.d.evictInTiers(ctx, late, r.res.Pods[first:], r.deadline, r.tr)
	}
}

// noteGone records when each selected pod was seen gone, or why it is still there.
func (r *drainRun) noteGone() {
	for i := range r.res.Pods {
		if at, ok := r.tr.goneAt(r.res.Pods[i].UID); ok {
			r.res.Pods[i].GoneAt = at
		} else if r.res.Pods[i].Error == "" {
			r.res.Pods[i].Error = "eviction accepted but the pod was still terminating at the deadline"
		}
	}
}

// incomplete is the drain's error when pods remain: selected ones (a few named), or ones that
// were already terminating.
func (r *drainRun) incomplete(terminating []types.UID) error {
	if left := r.res.Remaining(); len(left) > 0 {
		names := make([]string, 0, min(len(left), 5))
		for _, p := range left[:min(len(left), 5)] {
			names = append(names, p.Pod.String()+": "+p.Error)
		}
		return fmt.Errorf("drain %s incomplete: %d of %d pods remain (%s)", r.node, len(left), len(r.res.Pods), strings.Join(names, "; "))
	}
	stillTerminating := 0
	for _, u := range terminating {
		if _, ok := r.tr.goneAt(u); !ok {
			stillTerminating++
		}
	}
	if stillTerminating > 0 {
		return fmt.Errorf("drain %s incomplete: %d pods that were already terminating are still on the node", r.node, stillTerminating)
	}
	return nil
}

// reportMarks logs each selected or skipped pod whose do-not-disrupt annotation could not be
// read, and tells the observer, once per pod of the drain (told).
func (d *Drainer) reportMarks(node string, pods []*Pod, candidates []Candidate, skipped []Skipped, told map[types.UID]bool) {
	report := func(uid types.UID, why string) {
		if why == "" || told[uid] {
			return
		}
		told[uid] = true
		i := slices.IndexFunc(pods, func(p *Pod) bool { return p.UID == uid })
		if i < 0 {
			return
		}
		d.opts.Logger.Warn("a pod's do-not-disrupt annotation cannot be read; it is protected as if it said \"true\"",
			"pod", pods[i].Namespace+"/"+pods[i].Name, "node", node, "why", why)
		if o, ok := d.opts.Observer.(MarkObserver); ok && !d.opts.DryRun {
			o.UnreadableMark(pods[i], why)
		}
	}
	for _, c := range candidates {
		report(c.Pod.UID, c.MarkError)
	}
	for _, s := range skipped {
		report(s.UID, s.MarkError)
	}
}

// maxLateRounds bounds the extra rounds for pods that arrive during the drain.
const maxLateRounds = 3

// reviseSkipped folds a later selection into the pods skipped so far: a pod skipped again
// keeps one entry with its newest reason, and a pod now evicted leaves the list.
func reviseSkipped(skipped, again []Skipped, nowEvicted []Candidate) []Skipped {
	at := make(map[types.UID]int, len(skipped))
	for i, s := range skipped {
		at[s.UID] = i
	}
	for _, s := range again {
		if i, ok := at[s.UID]; ok {
			skipped[i] = s
			continue
		}
		at[s.UID] = len(skipped)
		skipped = append(skipped, s)
	}
	if len(nowEvicted) == 0 {
		return skipped
	}
	evicted := make(map[types.UID]bool, len(nowEvicted))
	for _, c := range nowEvicted {
		evicted[c.Pod.UID] = true
	}
	return slices.DeleteFunc(skipped, func(s Skipped) bool { return evicted[s.UID] })
}
