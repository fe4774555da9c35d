// SPDX-License-Identifier: Apache-2.0

package drain

import (
	"context"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"lifeboat.dev/lifeboat/internal/panics"
)

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
	own := len(candidates)
	if i := slices.IndexFunc(candidates, func(c Candidate) bool { return c.Tier == TierOwnPod }); i >= 0 {
		own = i
	}
	candidates, ownPods, ownOut := candidates[:own], candidates[own:], out[own:]
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
	d.evictOwnPodLast(ctx, ownPods, ownOut, deadline, tr)
	var uids []types.UID
	for i := range out {
		if !out[i].EvictedAt.IsZero() {
			uids = append(uids, out[i].UID)
		}
	}
	tr.waitAll(ctx, uids)
}

// evictOwnPodLast evicts Lifeboat's own pod (Policy.OwnPodLast) once every other pod's
// eviction has ended its attempts: its eviction ends this process's work (the kubelet stops
// it, and a leader releases its Lease), so the drain hands over once, at its end. The next
// leader finds the node's other pods leaving or gone.
func (d *Drainer) evictOwnPodLast(ctx context.Context, own []Candidate, out []PodOutcome, deadline *Deadline, tr *tracker) {
	for i, c := range own {
		if ctx.Err() != nil {
			out[i].Error = "the drain stopped before Lifeboat's own pod's turn"
			continue
		}
		d.opts.Logger.Info("evicting Lifeboat's own pod, last on its node: the next leader takes over", "pod", out[i].Pod.String())
		d.evictSafely(&out[i], func() { d.evictOne(ctx, c.Pod, &out[i], deadline, tr, nil, nil) })
	}
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
