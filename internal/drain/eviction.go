// SPDX-License-Identifier: Apache-2.0

package drain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"lifeboat.dev/lifeboat/internal/panics"
)

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
	e.d.moved(e.pod, false, grace)
	e.d.catchUp(ctx, a.tightened, e.dl, e.tr)
}

// moved tells the observer, if it hears of them, of a pod the drain moved.
func (d *Drainer) moved(pod *Pod, forced bool, grace int64) {
	if o, ok := d.opts.Observer.(MoveObserver); ok {
		o.Moved(pod, forced, grace)
	}
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
	d.moved(pod, true, grace)
	tr.leavingBy(pod, out.EvictedAt.Add(time.Duration(grace)*time.Second))
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
