package drain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

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

// Blocker is what refuses a pod's eviction.
type Blocker struct {
	// Budget is the PodDisruptionBudget's name (in the pod's namespace); empty when the API
	// server did not name it (several budgets select the pod).
	Budget string
	// Detail is the API server's words: how many healthy pods the budget needs and has.
	Detail string
}

func (b Blocker) String() string {
	if b.Budget == "" {
		return b.Detail
	}
	return "PodDisruptionBudget " + b.Budget + " (" + b.Detail + ")"
}

// Drainer empties nodes.
type Drainer struct {
	client kubernetes.Interface
	opts   Options
	slots  *evictionSlots // shared by the copies WithNodePods makes
}

// WithNodePods returns a copy of d whose drains list and follow their pods from p.
func (d *Drainer) WithNodePods(p *NodePods) *Drainer {
	c := *d
	c.opts.Pods = p
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

// PodOutcome is what happened to one selected pod.
type PodOutcome struct {
	Pod       types.NamespacedName
	UID       types.UID
	Tier      Tier
	Unmanaged bool
	Attempts  int       // eviction requests sent
	EvictedAt time.Time // the eviction (or forced deletion) was accepted
	GoneAt    time.Time // its deletion was observed
	Forced    bool      // deleted past a PodDisruptionBudget near the deadline
	Error     string    // why it is still on the node, if it is
	// BlockedBy is what last refused its eviction, if a disruption budget did.
	BlockedBy *Blocker
	// BudgetRefusals counts the requests a disruption budget refused (the eviction API's 429
	// naming one, or its 500 when several select the pod); the other refused requests were
	// throttled or met a transient error.
	BudgetRefusals int
	// IP is the pod's own IP as it was listed (empty for host-network pods, which share the
	// node's); load balancers with IP targets hold it until they deregister it.
	IP string
	// Claims are the PersistentVolumeClaims its volumes use ("namespace/name").
	Claims []string
}

// outcomeOf starts a selected pod's outcome from what the list showed of it.
func outcomeOf(c Candidate) PodOutcome {
	out := PodOutcome{Pod: types.NamespacedName{Namespace: c.Pod.Namespace, Name: c.Pod.Name}, UID: c.Pod.UID, Tier: c.Tier, Unmanaged: c.Unmanaged}
	if !c.Pod.Spec.HostNetwork {
		out.IP = c.Pod.Status.PodIP
	}
	for _, v := range c.Pod.Spec.Volumes {
		switch {
		case v.ClaimName != "":
			out.Claims = append(out.Claims, c.Pod.Namespace+"/"+v.ClaimName)
		case v.Ephemeral: // a generic ephemeral volume's claim is named after the pod
			out.Claims = append(out.Claims, c.Pod.Namespace+"/"+c.Pod.Name+"-"+v.Name)
		}
	}
	return out
}

// Result reports a drain: every selected pod's outcome, every skipped pod with its reason,
// and timings.
type Result struct {
	Node     string
	DryRun   bool
	Started  time.Time
	Listed   time.Time
	Finished time.Time
	Pods     []PodOutcome
	Skipped  []Skipped
}

// Held lists the pods left on the node that their owners marked not to disrupt, under a
// notice that is no reclaim: they keep serving, and end with the instance unless a reclaim's
// drain evicts them.
func (r *Result) Held() []Skipped {
	var out []Skipped
	for _, s := range r.Skipped {
		if s.Reason == ReasonDoNotEvict {
			out = append(out, s)
		}
	}
	return out
}

// Remaining lists selected pods that are not gone.
func (r *Result) Remaining() []PodOutcome {
	var out []PodOutcome
	for _, p := range r.Pods {
		if p.GoneAt.IsZero() {
			out = append(out, p)
		}
	}
	return out
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

// evictInTiers evicts candidates (ordered by tier) tier by tier; out holds their outcomes. A
// tier starts once every pod of the one before is gone, or no longer holds it back: a
// disruption budget refused its eviction (its retries go on meanwhile, until the deadline),
// or the eviction failed. It starts in any case at its latest moment, the one that still
// leaves its own pods their grace period before the deadline: a budget or a slow pod of an
// ordinary tier never keeps the critical pods on the node until the instance ends. The pods
// marked not to disrupt (the last tier) are not held back by the others: each leaves at its
// own time (evictAtLast). It returns when every pod is gone or has ended its attempts.
func (d *Drainer) evictInTiers(ctx context.Context, candidates []Candidate, out []PodOutcome, deadline *Deadline, tr *tracker) {
	var wg sync.WaitGroup
	tiered := len(candidates)
	if last := slices.IndexFunc(candidates, func(c Candidate) bool { return c.Tier == TierDoNotDisrupt }); last >= 0 {
		for i := last; i < len(candidates); i++ {
			c, outcome := candidates[i], &out[i]
			wg.Go(func() {
				d.evictSafely(outcome, func() { d.evictAtLast(ctx, c, outcome, deadline, tr) })
			})
		}
		tiered = last
	}
	for start := 0; start < tiered; {
		end := tierEnd(candidates[:tiered], start)
		tier, tierOut := candidates[start:end], out[start:end]
		wg.Go(func() { d.evictTier(ctx, tier, tierOut, deadline, tr, &wg) }) // recovers its own panics
		if end < tiered {
			d.awaitTurn(ctx, tier, candidates[end:tierEnd(candidates[:tiered], end)], deadline, tr)
		}
		start = end
	}
	wg.Wait()
	var uids []types.UID
	for i := range out {
		if !out[i].EvictedAt.IsZero() {
			uids = append(uids, out[i].UID)
		}
	}
	tr.waitAll(ctx, uids)
}

// tierEnd is the end of the tier that starts at candidates[start].
func tierEnd(candidates []Candidate, start int) int {
	end := start
	for end < len(candidates) && candidates[end].Tier == candidates[start].Tier {
		end++
	}
	return end
}

// awaitTurn returns when the next tier may start: every pod of tier is gone or released, or
// the deadline is so close that next's pods need the rest for their grace period.
func (d *Drainer) awaitTurn(ctx context.Context, tier, next []Candidate, dl *Deadline, tr *tracker) {
	longest := int64(0)
	for _, c := range next {
		longest = max(longest, d.ownGrace(c.Pod))
	}
	// A deadline brought forward brings the latest moment forward too.
	turnCtx, cancel := dl.Bound(ctx, time.Duration(longest)*time.Second+lastMargin)
	defer cancel()
	uids := make([]types.UID, len(tier))
	for i, c := range tier {
		uids[i] = c.Pod.UID
	}
	if !tr.waitSettled(turnCtx, uids) && ctx.Err() == nil {
		d.opts.Logger.Info("the next tier starts while pods of this one are still leaving: later, its pods would not have their grace period before the deadline",
			"node", tier[0].Pod.Spec.NodeName, "tier", tier[0].Tier.String(), "next", next[0].Tier.String())
	}
}

// ownGrace is the grace period a pod would be given without a deadline to cut it.
func (d *Drainer) ownGrace(pod *Pod) int64 {
	if d.opts.PodGracePeriod >= 0 {
		return int64(d.opts.PodGracePeriod)
	}
	return podGrace(pod)
}

// evictAtLast evicts a pod marked not to disrupt at the latest moment that still gives it
// its whole grace period before the deadline (at once when that has passed), or when its
// protection ends if that is sooner, then waits for it to be gone. A deadline brought
// forward brings the moment forward too.
func (d *Drainer) evictAtLast(ctx context.Context, c Candidate, out *PodOutcome, dl *Deadline, tr *tracker) {
	pod, grace := c.Pod, d.ownGrace(c.Pod)
	leaveBy := func() time.Time {
		at := dl.Time().Add(-time.Duration(grace)*time.Second - lastMargin)
		if !c.ProtectedUntil.IsZero() && c.ProtectedUntil.Before(at) {
			return c.ProtectedUntil
		}
		return at
	}
	if wait := time.Until(leaveBy()); wait > 0 {
		d.opts.Logger.Info("a pod marked not to disrupt leaves last, at the deadline minus its grace period or when its protection ends", "pod", out.Pod.String(), "in", wait.Round(time.Second))
	}
	for {
		changed := dl.Changed() // before the time is read, so that no tightening is missed
		wait := time.Until(leaveBy())
		if wait <= 0 {
			break
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			out.Error = "marked not to disrupt: its turn (the deadline minus its grace period) had not come"
			return
		case <-changed: // the deadline moved earlier: so does its turn
			timer.Stop()
		case <-timer.C:
		}
	}
	d.evictOne(ctx, pod, out, dl, tr, nil, nil)
	if !out.EvictedAt.IsZero() {
		tr.waitAll(ctx, []types.UID{out.UID})
	}
}

// lastMargin is left between a pod-marked-not-to-disrupt's grace period and the deadline, for
// the eviction request and the kubelet to act.
const lastMargin = 2 * time.Second

// evictTier evicts one tier's pods with at most Concurrency in flight, starting each pod's
// worker in wg. A pod's worker starts only once it has one of the process's eviction slots,
// so the drain waits for them in one goroutine rather than one per pod. A pod a disruption
// budget refuses no longer counts against Concurrency while it retries, and, like a pod
// whose eviction failed, is released so as not to hold its tier back.
func (d *Drainer) evictTier(ctx context.Context, tier []Candidate, out []PodOutcome, deadline *Deadline, tr *tracker, wg *sync.WaitGroup) {
	inFlight := make(chan struct{}, d.opts.Concurrency) // workers always end, so no send blocks forever
	started := 0
	// A panic here fails the tier's pods not started yet, and lets the next tier go.
	defer panics.Recover(panics.Eviction, d.opts.Logger, d.opts.Panics, nil, "node", tier[0].Pod.Spec.NodeName, "tier", tier[0].Tier.String())
	defer failUnstarted(&started, tier, out, tr)
	for ; started < len(tier); started++ {
		i := started
		inFlight <- struct{}{}
		turn, err := d.slots.acquire(ctx, deadline.Time())
		if err != nil {
			<-inFlight
			for j := i; j < len(tier); j++ {
				out[j].Error = "deadline reached before its eviction's turn came"
			}
			started = len(tier)
			return
		}
		uid := tier[i].Pod.UID
		var once sync.Once
		free := func() { once.Do(func() { <-inFlight }) }
		wg.Go(func() {
			defer free()
			d.evictSafely(&out[i], func() {
				d.evictOne(ctx, tier[i].Pod, &out[i], deadline, tr, turn, func() {
					free()
					tr.release(uid)
				})
			})
			if out[i].EvictedAt.IsZero() { // failed, or the deadline came: it is not leaving
				tr.release(uid)
			}
		})
	}
}

// failUnstarted marks the pods of a tier from *started on, whose eviction never started
// because the tier's worker panicked, as failed, and releases them so that the next tier
// starts. It does nothing once every pod has started.
func failUnstarted(started *int, tier []Candidate, out []PodOutcome, tr *tracker) {
	for j := *started; j < len(tier); j++ {
		out[j].Error = "its eviction never started: the drain's eviction worker panicked (see the log)"
		tr.release(tier[j].Pod.UID)
	}
}

// evictSafely runs one pod's eviction; a panic fails that pod only (its outcome says so,
// unless its eviction was already accepted) and the drain's other pods go on.
func (d *Drainer) evictSafely(out *PodOutcome, evict func()) {
	err := panics.Do(panics.Eviction, d.opts.Logger, d.opts.Panics, evict, "pod", out.Pod.String())
	if err != nil && out.EvictedAt.IsZero() {
		out.Error = "eviction failed: " + err.Error()
	}
}

// evictOne sends evictions until one is accepted, the pod is gone, or the deadline passes.
// A tightened deadline takes effect at the next attempt, and wakes a backoff that would
// otherwise sleep past the moment to force.
//
// Each attempt holds an eviction slot only while it waits for its turn and its answer: turn
// is one already taken for the first attempt, or nil. refused, when set, is called at each
// refusal by a disruption budget.
func (d *Drainer) evictOne(ctx context.Context, pod *Pod, out *PodOutcome, dl *Deadline, tr *tracker, turn, refused func()) {
	e := &podEviction{d: d, pod: pod, out: out, dl: dl, tr: tr, refused: refused,
		log: d.opts.Logger.With("pod", out.Pod.String(), "node", pod.Spec.NodeName), backoff: d.opts.RetryMin}
	defer e.unblock()
	defer func() {
		if turn != nil {
			turn() // a panic must not keep one of the process's eviction slots
		}
	}()
	for {
		if turn == nil {
			var ok bool
			if turn, ok = e.takeTurn(ctx); !ok {
				return
			}
		}
		out.Attempts++
		a := attempt{tightened: dl.Changed(), deadline: dl.Time()}
		a.eviction = &policyv1.Eviction{
			ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace},
			// The UID precondition keeps a same-named replacement pod from being evicted.
			DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pod.UID}, GracePeriodSeconds: d.gracePeriod(pod, a.deadline, dl.Patient())},
		}
		a.err = d.evict(ctx, a.eviction)
		turn()
		turn = nil
		if !e.answered(ctx, a) {
			return
		}
	}
}

// podEviction is one pod's eviction across its attempts.
type podEviction struct {
	d       *Drainer
	pod     *Pod
	out     *PodOutcome
	dl      *Deadline
	tr      *tracker
	refused func()
	log     *slog.Logger
	backoff time.Duration
	// reported is what the observer was told blocks the pod, so that it is told the same
	// when the pod is no longer blocked.
	reported *Blocker
}

// attempt is one eviction request, with the deadline it was made under and its answer.
type attempt struct {
	tightened <-chan struct{} // closes when the deadline moves earlier than deadline
	deadline  time.Time
	eviction  *policyv1.Eviction
	err       error
}

// unblock tells the observer the pod no longer waits on the budget it was told of.
func (e *podEviction) unblock() {
	if e.reported != nil {
		e.d.opts.Observer.Unblocked(e.pod, *e.reported, !e.out.EvictedAt.IsZero())
	}
}

// takeTurn waits for one of the process's eviction slots; without one by the deadline the
// pod's outcome says so and ok is false.
func (e *podEviction) takeTurn(ctx context.Context) (turn func(), ok bool) {
	turn, err := e.d.slots.acquire(ctx, e.dl.Time())
	if err == nil {
		return turn, true
	}
	e.out.Error = fmt.Sprintf("deadline reached before the eviction's turn came (after %d attempts)", e.out.Attempts)
	if e.out.BlockedBy != nil {
		e.out.Error = fmt.Sprintf("held by %s: deadline reached after %d eviction attempts", e.out.BlockedBy, e.out.Attempts)
	}
	return nil, false
}

// answered acts on the API server's answer to an attempt; it reports whether to try again.
func (e *podEviction) answered(ctx context.Context, a attempt) (again bool) {
	switch err := a.err; {
	case err == nil:
		e.accepted(ctx, a)
		return false
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		// Gone already, or replaced by a pod with another UID: nothing of ours is left.
		// Mark it gone here, since its deletion may predate the watch.
		e.out.EvictedAt = time.Now()
		e.tr.markGone(e.pod.UID, e.out.EvictedAt)
		return false
	case blockedByBudget(err), retriable(err):
		return e.refusedAttempt(ctx, a)
	case ctx.Err() != nil:
		// The deadline (or shutdown) came while the request waited for its turn in the
		// request budget or for an answer: the pod is left by the deadline, not by a
		// failure, and says so.
		e.out.Error = fmt.Sprintf("deadline reached before the eviction was answered (attempt %d)", e.out.Attempts)
		return false
	default:
		e.out.Error = fmt.Sprintf("eviction failed: %v", err)
		e.log.Warn("eviction failed", "err", err)
		return false
	}
}

// accepted notes an accepted eviction and when the pod should be gone by.
func (e *podEviction) accepted(ctx context.Context, a attempt) {
	e.out.EvictedAt = time.Now()
	grace := podGrace(e.pod)
	if g := a.eviction.DeleteOptions.GracePeriodSeconds; g != nil {
		grace = *g
	}
	e.tr.leavingBy(e.pod, e.out.EvictedAt.Add(time.Duration(grace)*time.Second))
	e.d.catchUp(ctx, a.tightened, e.dl, e.tr)
}

// refusedAttempt handles a refusal, by a disruption budget or a transient one: it forces the
// deletion when the deadline is near enough and a budget refused, or else backs off; it
// reports whether to try again.
func (e *podEviction) refusedAttempt(ctx context.Context, a attempt) (again bool) {
	byBudget := blockedByBudget(a.err)
	if byBudget {
		e.blocked(a.err)
	}
	force := e.d.opts.ForceBeforeDeadline
	if e.dl.Patient() {
		force = 0 // no instance goes at this deadline: nothing to force for
	}
	if force > 0 && time.Until(a.deadline) <= force && byBudget {
		e.d.forceDelete(ctx, e.pod, e.out, a.deadline, e.log, e.tr)
		e.d.catchUp(ctx, a.tightened, e.dl, e.tr)
		return false
	}
	wait := e.backoffWait(a, force)
	e.log.Debug("eviction refused, retrying", "attempt", e.out.Attempts, "after", wait, "err", a.err)
	select {
	case <-ctx.Done():
		e.out.Error = fmt.Sprintf("deadline reached after %d eviction attempts: %v", e.out.Attempts, a.err)
		if e.out.BlockedBy != nil {
			e.out.Error = fmt.Sprintf("held by %s: deadline reached after %d eviction attempts", e.out.BlockedBy, e.out.Attempts)
		}
		return false
	case <-time.After(wait):
		e.backoff = min(e.backoff*2, e.d.opts.RetryMax)
	case <-a.tightened: // decide again at once, with the same backoff
	}
	return true
}

// blocked records the budget that refused the eviction, and tells the observer of the first.
func (e *podEviction) blocked(err error) {
	e.out.BudgetRefusals++
	by := blockerOf(err)
	if e.reported == nil && e.d.opts.Observer != nil {
		e.reported = &by
		e.d.opts.Observer.Blocked(e.pod, by)
	}
	e.out.BlockedBy = &by
	if e.refused != nil {
		e.refused()
	}
}

// backoffWait is how long to wait before the next attempt: the jittered backoff, or the
// server's own advice (10 s for a budget it is still processing) within our bounds, and never
// past the moment to force.
func (e *podEviction) backoffWait(a attempt, force time.Duration) time.Duration {
	wait := e.backoff/2 + rand.N(e.backoff)
	if delay, ok := apierrors.SuggestsClientDelay(a.err); ok {
		wait = max(wait, min(time.Duration(delay)*time.Second, e.d.opts.RetryMax))
	}
	if untilForce := time.Until(a.deadline) - force; force > 0 && untilForce > 0 {
		wait = min(wait, untilForce)
	}
	return wait
}

// evict posts one eviction and returns the API server's answer as it is. The typed client
// would retry a refusal that carries Retry-After (a budget still being processed answers
// 429 with 10 s) up to ten times inside the one call, hiding it from evictOne, which must
// see each refusal to force on time and to notice a tightened deadline.
func (d *Drainer) evict(ctx context.Context, e *policyv1.Eviction) error {
	rc, ok := d.client.PolicyV1().RESTClient().(*rest.RESTClient)
	if !ok || rc == nil { // a fake clientset has no REST client
		return d.client.PolicyV1().Evictions(e.Namespace).Evict(ctx, e)
	}
	return rc.Post().AbsPath("/api/v1").Namespace(e.Namespace).Resource("pods").Name(e.Name).SubResource("eviction").
		Body(e).MaxRetries(0).Do(ctx).Error()
}

// forceDelete deletes a pod a budget still protects, leaving it what time is left to stop.
func (d *Drainer) forceDelete(ctx context.Context, pod *Pod, out *PodOutcome, deadline time.Time, log *slog.Logger, tr *tracker) {
	grace := max(int64(time.Until(deadline).Seconds())-1, 1)
	if own := podGrace(pod); own < grace {
		grace = own
	}
	grace = max(grace, 1) // 0 would mean "at once, without any grace"
	err := d.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &pod.UID}, GracePeriodSeconds: &grace,
	})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		out.EvictedAt = time.Now()
		tr.markGone(pod.UID, out.EvictedAt)
		return
	}
	if err != nil {
		out.Error = fmt.Sprintf("forced deletion failed: %v", err)
		return
	}
	log.Warn("deleted a pod its PodDisruptionBudget still protected: the deadline is near", "gracePeriodSeconds", grace)
	out.EvictedAt, out.Forced = time.Now(), true
	tr.leavingBy(pod, out.EvictedAt.Add(time.Duration(grace)*time.Second))
}

// shortenOnTighten cuts, each time the deadline moves earlier, the grace period of pods
// already leaving the node that would still be stopping after it. Otherwise the instance
// ends under them, and their objects stay Terminating (holding back a StatefulSet's
// replacement) until the node object is removed. A shorter grace period is the one change
// the API server accepts on a pod already being deleted. Cuts that fail are tried again
// every second. changed is dl.Changed() from before the drain's first eviction. It follows
// the deadline until ctx ends, without a goroutine of its own meanwhile.
func (d *Drainer) shortenOnTighten(ctx context.Context, dl *Deadline, changed <-chan struct{}, tr *tracker) {
	s := &sweeps{sweep: func() (failed int) {
		// A panic ends this sweep only, as one with nothing to try again.
		defer panics.Recover(panics.GraceCut, d.opts.Logger, d.opts.Panics, nil)
		return d.shortenLeaving(ctx, dl, tr)
	}}
	stopFollowing := dl.OnTighten(s.run)
	context.AfterFunc(ctx, func() {
		stopFollowing()
		s.stop()
	})
	select {
	case <-changed: // moved before the drain followed it
		go s.run()
	default:
	}
}

// sweeps runs a drain's sweeps one at a time: a sweep asked for while one runs follows it,
// and one whose cuts failed runs again a second later.
type sweeps struct {
	sweep func() (failed int)

	mu      sync.Mutex
	running bool
	again   bool        // asked for while one ran
	retry   *time.Timer // a failed sweep's next try
	stopped bool
}

// run sweeps now, or after the sweep under way.
func (s *sweeps) run() {
	s.mu.Lock()
	if s.running || s.stopped {
		s.again = s.running
		s.mu.Unlock()
		return
	}
	s.running = true
	s.mu.Unlock()
	for {
		failed := s.sweep()
		s.mu.Lock()
		if s.again && !s.stopped {
			s.again = false
			s.mu.Unlock()
			continue
		}
		s.running, s.again = false, false
		if failed > 0 && !s.stopped {
			s.retry = time.AfterFunc(time.Second, s.run)
		}
		s.mu.Unlock()
		return
	}
}

// stop ends the retries; a sweep under way ends with the drain's context.
func (s *sweeps) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	if s.retry != nil {
		s.retry.Stop()
	}
}

// catchUp sweeps once more if the deadline moved while this worker's deletion was in flight:
// the pod was not yet among the leaving pods when the sweep for that change ran.
func (d *Drainer) catchUp(ctx context.Context, tightened <-chan struct{}, dl *Deadline, tr *tracker) {
	select {
	case <-tightened:
		d.shortenLeaving(ctx, dl, tr)
	default:
	}
}

// shortenLeaving gives every leaving pod that would end after the deadline a grace period
// that ends before it, and returns how many cuts failed and are worth trying again.
func (d *Drainer) shortenLeaving(ctx context.Context, dl *Deadline, tr *tracker) (failed int) {
	deadline := dl.Time()
	grace := max(int64(time.Until(deadline).Seconds())-1, 1)
	by := time.Now().Add(time.Duration(grace) * time.Second)
	for _, pod := range tr.endingAfter(deadline) {
		if ctx.Err() != nil {
			return failed
		}
		log := d.opts.Logger.With("pod", pod.Namespace+"/"+pod.Name, "node", pod.Spec.NodeName)
		err := d.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &pod.UID}, GracePeriodSeconds: &grace,
		})
		switch {
		case err == nil:
			tr.leavingBy(pod, by)
			log.Info("the deadline moved earlier: cut the grace period of a pod already leaving", "gracePeriodSeconds", grace)
		case apierrors.IsNotFound(err), apierrors.IsConflict(err):
			tr.markGone(pod.UID, time.Now())
		case ctx.Err() != nil:
			return failed
		case apierrors.IsForbidden(err):
			// Not worth a retry every second: RBAC grants pods delete or it does not.
			log.Warn("could not cut the grace period of a pod already leaving: no permission to delete pods", "err", err)
		default:
			failed++
			log.Warn("could not cut the grace period of a pod already leaving; trying again", "err", err)
		}
	}
	return failed
}

// gracePeriod is the grace period to request: the override or the pod's own, cut to end
// before the deadline unless it is patient (see NewPatientDeadline). nil keeps the pod's own.
func (d *Drainer) gracePeriod(pod *Pod, deadline time.Time, patient bool) *int64 {
	g, explicit := podGrace(pod), false
	if d.opts.PodGracePeriod >= 0 {
		g, explicit = int64(d.opts.PodGracePeriod), true
	}
	if left := int64(time.Until(deadline).Seconds()) - 1; left < g && !patient {
		g, explicit = max(left, 1), true
	}
	if !explicit {
		return nil
	}
	return &g
}

func podGrace(pod *Pod) int64 {
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		return *pod.Spec.TerminationGracePeriodSeconds
	}
	return corev1.DefaultTerminationGracePeriodSeconds
}

// blockedByBudget: the eviction API's 429 naming a disruption budget, or the 500 it answers
// when several budgets select the pod (which may resolve once someone fixes the budgets).
// Only these may be forced past near the deadline.
func blockedByBudget(err error) bool {
	return (apierrors.IsTooManyRequests(err) && apierrors.HasStatusCause(err, policyv1.DisruptionBudgetCause)) ||
		(apierrors.IsInternalError(err) && strings.Contains(err.Error(), "more than one PodDisruptionBudget"))
}

// blockerOf names the budget that refused an eviction, from the cause the API server gives
// ("The disruption budget web needs 5 healthy pods and has 5 currently").
func blockerOf(err error) Blocker {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		if details := status.Status().Details; details != nil {
			for _, c := range details.Causes {
				if c.Type != policyv1.DisruptionBudgetCause {
					continue
				}
				rest, ok := strings.CutPrefix(c.Message, "The disruption budget ")
				if name, detail, found := strings.Cut(rest, " "); ok && found {
					return Blocker{Budget: name, Detail: detail}
				}
				return Blocker{Detail: c.Message}
			}
		}
	}
	if strings.Contains(err.Error(), "more than one PodDisruptionBudget") {
		return Blocker{Detail: "more than one PodDisruptionBudget selects the pod, which the eviction API refuses"}
	}
	return Blocker{Detail: err.Error()}
}

// retriable: the API server is briefly unable to answer, or is shedding load (a 429 that
// names no budget); the same request may succeed later.
func retriable(err error) bool {
	return apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsServiceUnavailable(err) ||
		apierrors.IsInternalError(err) || apierrors.IsTooManyRequests(err)
}

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
