// SPDX-License-Identifier: Apache-2.0

package demo

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// check lists every way the result differs from what Lifeboat promises for these cases.
func check(r *Result, procs []*process) []string {
	var problems []string
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	expected := r.Foreign.CompleteCalls
	for _, c := range r.Cases {
		expected += c.Completions
	}
	if r.CompleteCalls != expected {
		fail("%d CompleteLifecycleAction calls in all, %d of them for no lifecycle action of the scenario", r.CompleteCalls, r.CompleteCalls-expected)
	}
	for _, c := range r.Cases {
		name := "node " + c.Name
		if c.Cordoned < 0 {
			fail("%s was never cordoned", name)
		}
		if c.Recorded < 0 {
			fail("%s was never recorded as drained", name)
		}
		if len(c.Evicted) == 0 {
			fail("%s: no pod was evicted", name)
		}
		lastOther, firstCritical := time.Duration(-1), time.Duration(-1)
		lastBeforeOwn, own := time.Duration(-1), time.Duration(-1)
		for _, p := range c.Evicted {
			if p.Gone < 0 {
				fail("%s: evicted pod %s is still there", name, p.Pod)
			}
			if p.Pod == ownPod {
				own = p.Evicted
				continue
			}
			lastBeforeOwn = max(lastBeforeOwn, p.Evicted)
			switch p.Tier {
			case TierCritical:
				if firstCritical < 0 || p.Evicted < firstCritical {
					firstCritical = p.Evicted
				}
			case TierDaemonSet, TierMirror:
				fail("%s: %s pod %s was evicted", name, p.Tier, p.Pod)
			default:
				// A pod a disruption budget refused no longer keeps the critical tier
				// waiting: only the others must have left first.
				if p.Refused == 0 {
					lastOther = max(lastOther, p.Evicted)
				}
			}
		}
		// The controller drains its own node: its own pod is evicted last there, so that the
		// drain hands over once, at its end.
		if own >= 0 && own < lastBeforeOwn {
			fail("%s: Lifeboat's own pod %s was evicted at %s, before the node's other pods (the last at %s)", name, ownPod, secs(own), secs(lastBeforeOwn))
		}
		if firstCritical < 0 {
			fail("%s: its critical pod was not evicted", name)
		} else if firstCritical < lastOther {
			fail("%s: a critical pod was evicted at %s, before the last other pod a budget did not hold (%s)", name, secs(firstCritical), secs(lastOther))
		}
		var daemonSetSkipped bool
		for _, s := range c.Skipped {
			switch {
			case s.Reason == "":
				fail("%s: %s (%s) was neither evicted nor reported as left by the drain", name, s.Pod, s.Tier)
			case s.Tier == TierDaemonSet && strings.Contains(s.Reason, "DaemonSet"):
				daemonSetSkipped = true
			case s.Tier == TierWorkload || s.Tier == TierCritical:
				fail("%s: %s left on the node: %s", name, s.Pod, s.Reason)
			}
		}
		if len(c.Left) > 0 {
			fail("%s: pods still on the node after its drain: %v", name, c.Left)
		}
		if !daemonSetSkipped {
			fail("%s: its DaemonSet pod was not reported as skipped", name)
		}
		switch {
		case c.HasHook && c.Completions != 1:
			fail("%s: %d CompleteLifecycleAction calls for its lifecycle action, want exactly 1", name, c.Completions)
		case c.HasHook && c.LifecycleResult != "CONTINUE":
			fail("%s: lifecycle action result %q, want CONTINUE", name, c.LifecycleResult)
		case c.HasHook && len(c.OnNodeAtCompletion) > 0:
			fail("%s: lifecycle action completed at %s while %s were still on the node", name, secs(c.Completed), strings.Join(c.OnNodeAtCompletion, ", "))
		case !c.HasHook && c.Completions != 0:
			fail("%s: %d CompleteLifecycleAction calls though it has no lifecycle hook", name, c.Completions)
		}
		if c.Detach != nil {
			problems = append(problems, checkDetach(name, c)...)
		}
		problems = append(problems, checkEvents(name, c)...)
	}
	problems = append(problems, checkBudgets(r)...)
	f := r.Foreign
	if f.Refused < 0 || f.Reason == "" {
		fail("the foreign instance %s: the controller did not log refusing its notice", f.InstanceID)
	}
	if f.CompleteCalls != 0 || f.ActionCompleted {
		fail("the foreign instance %s: %d CompleteLifecycleAction calls (completed: %v), want none", f.InstanceID, f.CompleteCalls, f.ActionCompleted)
	}
	// With DELETE_SQS_MSG_IF_NODE_NOT_FOUND=false the foreign message is kept for the cluster
	// it belongs to: held back, not deleted. Node B's message is deleted once handled.
	if f.RetryAfter <= 0 || f.InFlight != 1 {
		fail("the foreign message: retry delay %s, %d message(s) in flight on the queue; want it held back (one in flight, node B's deleted)", f.RetryAfter, f.InFlight)
	}
	if r.Quiet.Touched != "" || len(r.Quiet.Evicted) > 0 {
		fail("node C had no notice but was changed (%s) or had pods evicted (%v)", r.Quiet.Touched, r.Quiet.Evicted)
	}
	for _, p := range procs {
		if done, err := p.exited(); done {
			fail("%s exited during the demo (%v); see %s", p.name, err, p.logPath)
		}
	}
	return problems
}

// checkDetach lists every way the hand-back of a node with a target and a volume broke
// Lifeboat's promise: its lifecycle action is completed only once the instance has left the
// target group and the evicted pod's volume is detached, each wait logged, none cut.
func checkDetach(name string, c Case) []string {
	var problems []string
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	h := c.Detach
	if h.Deregistered < 0 {
		fail("%s: its instance %s never left target group %s (the demo's Auto Scaling stand-in did not deregister it)", name, h.Target, h.TargetGroup)
	} else if h.TargetGone < 0 {
		fail("%s: its instance %s never stopped draining in target group %s", name, h.Target, h.TargetGroup)
	}
	if h.Detached < 0 {
		fail("%s: volume %s was never detached (its VolumeAttachment %s was not seen deleted)", name, h.Volume, h.Attachment)
	}
	if c.Completions > 0 && len(h.DrainingAtCompletion) > 0 {
		fail("%s: lifecycle action completed at %s while the load balancer still held %s", name, secs(c.Completed), strings.Join(h.DrainingAtCompletion, ", "))
	}
	if c.Completions > 0 && len(h.AttachedAtCompletion) > 0 {
		fail("%s: lifecycle action completed at %s while %s was still attached", name, secs(c.Completed), strings.Join(h.AttachedAtCompletion, ", "))
	}
	for _, wait := range []string{"targets", "volumes"} {
		hw, logged := h.wait(wait)
		switch {
		case !logged:
			fail("%s: the %s did not log the end of its wait for %s", name, c.Handler, waitPurpose[wait])
		case hw.Outcome == WaitCut:
			fail("%s: the wait for %s was cut by the deadline after %s (still held: %s)", name, waitPurpose[wait], secs(hw.Took), orDash(hw.Held))
		case hw.Outcome == WaitSkipped:
			fail("%s: the wait for %s was skipped", name, waitPurpose[wait])
		}
	}
	return problems
}

// checkBudgets: a budget must have held at least one pod, named in the handler's report,
// and let every pod it held go once its owner relaxed it; `lifeboat status`, run at the first
// pod held, must have worked, listed a node of the scenario, and shown a pod the handler
// reported blocked as held by that same budget. (Checkout's budget allows no disruption until
// its owner relaxes it, and the owner waits for the status: so every run has a pod held, and
// status sees it held. Whether web's budget also refuses one depends on timing.)
func checkBudgets(r *Result) []string {
	var problems []string
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	named, shown := 0, false
	for _, c := range r.Cases {
		if blocked, released := len(c.Blocked), releasedCount(c.Blocked); released < blocked {
			fail("node %s: %d pods blocked by a PodDisruptionBudget, only %d released", c.Name, blocked, released)
		}
		for _, h := range c.Blocked {
			if h.Budget != "" {
				named++
				shown = shown || r.MidDrain.Held[h.Pod] == h.Budget
			}
		}
	}
	if named == 0 {
		fail("no pod was reported blocked by a named PodDisruptionBudget (%s's allows no disruption until its owner relaxes it)", checkoutBudget.workload.name)
	}
	if r.Relaxed == nil {
		fail("the owner of PodDisruptionBudget %s never relaxed it", checkoutBudget.workload.name)
	}
	switch s := r.MidDrain; {
	case !s.Ran:
		fail("lifeboat status was not run mid-drain")
	case s.Err != "":
		fail("lifeboat status mid-drain failed: %s", s.Err)
	case !s.Listed:
		fail("lifeboat status mid-drain listed no node of the scenario")
	case named > 0 && !shown:
		fail("lifeboat status mid-drain showed no pod reported blocked as held by its PodDisruptionBudget (it showed held: %v)", s.Held)
	}
	return problems
}

func secs(d time.Duration) string {
	if d < 0 {
		return "-"
	}
	return fmt.Sprintf("%.1fs", d.Seconds())
}

// errNotHandled is returned by the command when the summary lists problems.
var errNotHandled = errors.New("not every case was handled as expected")

// Check returns an error naming every problem of the result, or nil.
func (r *Result) Check() error {
	if len(r.Problems) == 0 {
		return nil
	}
	err := errNotHandled
	for _, p := range r.Problems {
		err = fmt.Errorf("%w\n  - %s", err, p)
	}
	return err
}
