// SPDX-License-Identifier: Apache-2.0

package episode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/events"
	"lifeboat.dev/lifeboat/internal/instancegate"
	"lifeboat.dev/lifeboat/internal/lifecycle"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/record"
)

// A termination hook whose drain cannot finish before its lifecycle action expires is
// completed with CONTINUE by default, and the instance goes with whatever is still on it.
// With ABANDON_LIFECYCLE_ACTION_ON_INCOMPLETE_DRAIN, and when the group's instance lifecycle
// policy retains abandoned instances, it is completed with ABANDON instead: Auto Scaling then
// keeps the instance (out of the group's capacity) until someone terminates it. Lifeboat goes
// on draining it with no AWS deadline (pods keep their grace periods, nothing is forced, pods
// marked not to disrupt leave when their protection ends), and terminates it itself once the
// node is empty and the hand-back safe, once, recorded on the Node. RETAINED_DRAIN_TIMEOUT
// bounds the wait: then Lifeboat reports and stops, never terminating with pods on the node.
// A reclaim (Spot, capacity reservation, scheduled event) joining the episode makes all this
// moot: the instance goes at the reclaim's deadline, and the drain follows it.

// Retainer makes the AWS calls of a retained instance, each after the instance gate's check
// (a refusal is returned as an *instancegate.Refusal).
type Retainer interface {
	// Retains reports whether the group's instance lifecycle policy retains an instance whose
	// termination hook is abandoned. An error counts as no: the hook is completed as usual.
	Retains(ctx context.Context, group string) (bool, error)
	// Abandon completes the notice's lifecycle action with ABANDON (an error wrapping
	// lifecycle.ErrActionOver when it is over already).
	Abandon(ctx context.Context, nodeName string, n notice.Notice) error
	// Terminate terminates the retained instance of the node, in group, without lowering the
	// group's desired capacity.
	Terminate(ctx context.Context, nodeName, instanceID, group string) error
}

// retentions decide and carry out what ABANDON_LIFECYCLE_ACTION_ON_INCOMPLETE_DRAIN asks of
// an episode: whether its drain may abandon its hooks, abandoning them, and the retained
// instance's end.
type retentions struct {
	retainer Retainer
	cfg      *config.Config
	writer   *nodes.Writer
	events   *events.Recorder
	metrics  *metrics.Metrics
	drains   *drains
}

// Retention timing. A drain that may abandon its hook ends abandonMargin before the
// action's expiry, so that the ABANDON lands while the action is open; it is abandoned once
// that moment is closer than abandonSlack. A retained node is drained in rounds of
// retainedRound (pods still leaving at a round's end are waited for by the next) and looked
// at again every retainedPoll while pods marked not to disrupt keep it.
var (
	abandonMargin = 10 * time.Second
	abandonSlack  = 2 * time.Second
	retainedRound = 5 * time.Minute
	retainedPoll  = 30 * time.Second
)

// retention is what a reconcile does about retention for the node's pending notices.
type retention struct {
	state retentionState
	// hooks are the termination-hook notices a drain may abandon (stateMayAbandon), or
	// those abandoned (stateRetained, stateMoot).
	hooks []notice.Notice
	group string
	// at is when a drain that may abandon gives up: abandonMargin before the earliest
	// action's expiry.
	at  time.Time
	rec *record.Retention
}

type retentionState int

const (
	stateNone       retentionState = iota // as without the setting: drain by the deadline, complete with CONTINUE
	stateMayAbandon                       // drain by at; abandon the hooks if the node is not empty by then
	stateRetained                         // abandoned and retained: drain with no deadline, terminate once empty
	stateMoot                             // abandoned, but a reclaim joined: its deadline rules; nothing to terminate
	stateStopped                          // retained, and Lifeboat stopped waiting (reported)
	stateTerminated                       // retained, and the instance's termination is claimed: finish the notices
)

// reclaimed reports whether a notice other than a termination hook takes the instance away
// at its deadline: with one, retention is moot.
func reclaimed(pending []notice.Notice) bool {
	return slices.ContainsFunc(pending, func(n notice.Notice) bool { return n.Kind.ReclaimedOutright() })
}

// unabandoned is pending without the notices whose actions were abandoned: their deadlines
// are past and no longer bind the drain.
func unabandoned(r record.Record, pending []notice.Notice) []notice.Notice {
	if r.Retained == nil {
		return pending
	}
	return slices.DeleteFunc(slices.Clone(pending), func(n notice.Notice) bool { return r.Abandoned(n.ID) })
}

// of decides the retention of the node's episode. Only the decision whether a drain
// may abandon asks Auto Scaling (DescribeAutoScalingGroups, cached per group).
func (t *retentions) of(ctx context.Context, rec record.Record, pending []notice.Notice, log *slog.Logger) retention {
	if ret := rec.Retained; ret != nil {
		out := retention{rec: ret, group: ret.Group}
		for _, n := range pending {
			if rec.Abandoned(n.ID) {
				out.hooks = append(out.hooks, n)
			}
		}
		if len(out.hooks) == 0 || t.retainer == nil {
			// This process's notices are not the abandoned ones (an agent beside the
			// controller that abandoned them): it drains for its own, by their deadlines.
			return retention{}
		}
		switch {
		case reclaimed(pending):
			out.state = stateMoot
		case !ret.Terminated.IsZero():
			out.state = stateTerminated
		case !ret.Stopped.IsZero():
			out.state = stateStopped
		default:
			out.state = stateRetained
		}
		return out
	}
	if t.retainer == nil || !t.cfg.AbandonOnIncompleteDrain || t.cfg.DryRun || reclaimed(pending) {
		return retention{}
	}
	out := retention{state: stateMayAbandon}
	var expiry time.Time
	for _, n := range pending {
		if n.Kind.Hook() != notice.HookTermination || n.Lifecycle == nil || n.Deadline.IsZero() {
			continue
		}
		if out.group != "" && n.Lifecycle.Group != out.group {
			continue // one instance is in one group; another group's notice is a forgery the gate refuses anyway
		}
		out.group = n.Lifecycle.Group
		out.hooks = append(out.hooks, n)
		if expiry.IsZero() || n.Deadline.Before(expiry) {
			expiry = n.Deadline
		}
	}
	// An action about to expire cannot be abandoned in time: it ends as the hook's default
	// result says, as without the setting.
	if len(out.hooks) == 0 || time.Until(expiry) <= abandonSlack {
		return retention{}
	}
	retains, err := t.retainer.Retains(ctx, out.group)
	if err != nil || !retains {
		return retention{}
	}
	out.at = expiry.Add(-abandonMargin)
	if !out.at.After(time.Now()) {
		out.at = time.Now().Add(abandonSlack / 2)
	}
	return out
}

// deadline is the drain's deadline under the retention: the action's expiry less the margin
// when it may abandon, a patient round when retained, else the earliest deadline of the
// notices whose actions are still open.
func (r retention) deadline(rec record.Record, pending []notice.Notice) *drain.Deadline {
	switch r.state {
	case stateMayAbandon:
		return drain.NewDeadline(r.at)
	case stateRetained:
		return drain.NewPatientDeadline(minTime(r.rec.Until, time.Now().Add(retainedRound)))
	}
	return drain.NewDeadline(drainDeadline(unabandoned(rec, pending)...))
}

// terms are the drain's terms: a termination hook that may be abandoned, or was, takes the
// instance at no deadline, so pods marked not to disrupt stay until their protection ends.
func (r retention) terms(node *corev1.Node, pending []notice.Notice) drain.Terms {
	terms := TermsOf(node, pending)
	if r.state == stateMayAbandon || r.state == stateRetained {
		terms.Reclaim = false
	}
	return terms
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// afterDrain decides, for a drain under the retention that has ended (err is the drain's,
// safe says whether the hand-back's waits all ended with nothing held), whether the episode
// goes on to finish its notices (finish), or what Reconcile returns instead.
func (t *retentions) afterDrain(ctx context.Context, node *corev1.Node, r retention, deadline *drain.Deadline, done drainOutcome, err error, safe bool, log *slog.Logger) (wait time.Duration, finish bool, _ error) {
	complete := err == nil && len(done.held) == 0 && safe
	switch r.state {
	case stateMayAbandon:
		if complete {
			return 0, true, nil
		}
		// The drain's deadline may have moved earlier (heartbeats refused: the action's
		// real expiry; another notice's budget): it is then the time to abandon.
		at := minTime(r.at, deadline.Time())
		if time.Until(at) > abandonSlack {
			if err != nil {
				return 0, false, err // failed early: tried again, as without the setting
			}
			// Pods marked not to disrupt stay for now: look again before the action expires.
			return max(min(retainedPoll, time.Until(at)-abandonSlack), time.Second), false, nil
		}
		return t.abandon(ctx, node, r, why(err, done, safe), log)
	case stateRetained:
		if !complete {
			log.Debug("the retained node is not empty yet; draining it again", "held", done.held, "err", err)
			return min(retainedPoll, max(time.Until(r.rec.Until), time.Second)), false, nil
		}
		return t.terminate(ctx, node, r, log)
	}
	if err != nil {
		return 0, false, err
	}
	return 0, true, nil
}

// why says what kept the drain from finishing, for the log and the Event.
func why(err error, done drainOutcome, safe bool) string {
	var parts []string
	if err != nil {
		parts = append(parts, err.Error())
	}
	if len(done.held) > 0 {
		parts = append(parts, "pods marked not to disrupt: "+strings.Join(done.held, ", "))
	}
	if !safe {
		parts = append(parts, "the hand-back's waits were cut")
	}
	return strings.Join(parts, "; ")
}

// abandon completes the hooks' lifecycle actions with ABANDON and records the retention. An
// action already over (the hook's own timeout came first) leaves the episode as it would be
// without the setting; so does a refusal by the instance gate, which is reported.
func (t *retentions) abandon(ctx context.Context, node *corev1.Node, r retention, why string, log *slog.Logger) (time.Duration, bool, error) {
	var ids []string
	for _, n := range r.hooks {
		err := t.retainer.Abandon(ctx, node.Name, n)
		for try := 1; err != nil && !isFinal(err) && try < 3 && time.Until(n.Deadline) > time.Second; try++ {
			select {
			case <-ctx.Done():
				return 0, false, ctx.Err()
			case <-time.After(500 * time.Millisecond):
			}
			err = t.retainer.Abandon(ctx, node.Name, n)
		}
		if refused, ok := instancegate.IsRefusal(err); ok {
			log.Error("lifecycle action not abandoned: the node's record names an instance or group that is not the node's own", "notice", n.ID, "why", refused.Reason)
			t.events.InstanceCallRefused(events.NodeOf(node), refused.Error())
			continue
		}
		if err != nil {
			log.Warn("could not complete the lifecycle action with ABANDON; the hook's own timeout decides", "notice", n.ID, "err", err)
			continue
		}
		ids = append(ids, n.ID)
		t.events.LifecycleCompleted(events.NodeOf(node), n.Lifecycle.Hook, n.InstanceID, "ABANDON")
	}
	if len(ids) == 0 {
		return 0, false, fmt.Errorf("node %s: the drain could not finish before the lifecycle action expired (%s), and it was not abandoned", node.Name, why)
	}
	now := time.Now().UTC().Truncate(time.Second)
	ret := &record.Retention{Group: r.group, Notices: ids, Since: now, Until: now.Add(t.cfg.RetainedDrainTimeout)}
	edit := record.Edit(func(rec *record.Record) {
		if rec.Retained == nil {
			rec.Retained = ret
		}
	})
	if _, err := t.writer.Apply(ctx, node.Name, nil, "record the retained instance", edit); err != nil {
		// The actions are abandoned; the next reconcile finds no retention recorded, and the
		// drain goes on by the actions' (past) deadlines as without the setting.
		return 0, false, fmt.Errorf("node %s: lifecycle actions abandoned but not recorded: %w", node.Name, err)
	}
	t.metrics.Retained(metrics.RetainedAbandoned)
	log.Warn("the drain could not finish before the lifecycle action expired: completed it with ABANDON; the group retains the instance, and Lifeboat goes on draining it and terminates it once empty",
		"group", r.group, "notices", ids, "why", why, "until", ret.Until)
	t.events.InstanceRetained(events.NodeOf(node), r.hooks[0].Lifecycle.Hook, r.group, why, ret.Until)
	return time.Second, false, nil
}

// isFinal reports errors a retry cannot change: a refusal, or an action that is over.
func isFinal(err error) bool {
	_, refused := instancegate.IsRefusal(err)
	return refused || errors.Is(err, lifecycle.ErrActionOver)
}

// terminate terminates the drained, retained instance: the termination is claimed on
// the Node first, so that at most one call is made for the episode (a transient failure gives
// the claim back, to be tried again), then the notices are finished.
func (t *retentions) terminate(ctx context.Context, node *corev1.Node, r retention, log *slog.Logger) (time.Duration, bool, error) {
	instance := instanceOf(node, r.hooks)
	var claimed bool
	claim := record.Edit(func(rec *record.Record) {
		claimed = rec.Retained != nil && rec.Retained.Terminated.IsZero() && rec.Retained.Stopped.IsZero()
		if claimed {
			rec.Retained.Terminated = time.Now().UTC().Truncate(time.Second)
		}
	})
	if _, err := t.writer.Apply(ctx, node.Name, nil, "claim the retained instance's termination", claim); err != nil {
		return 0, false, err
	}
	if !claimed {
		return 0, true, nil // claimed already (by an earlier attempt), or stopped
	}
	err := t.retainer.Terminate(ctx, node.Name, instance, r.group)
	if refused, ok := instancegate.IsRefusal(err); ok {
		log.Error("retained instance not terminated: the node's record names an instance or group that is not the node's own; it stays retained",
			"instance", refused.InstanceID, "nodeInstance", refused.NodeInstance, "group", refused.Group, "why", refused.Reason)
		t.events.InstanceCallRefused(events.NodeOf(node), refused.Error())
		t.metrics.Retained(metrics.RetainedRefused)
		stop := record.Edit(func(rec *record.Record) {
			if rec.Retained != nil {
				rec.Retained.Terminated, rec.Retained.Stopped, rec.Retained.Why = time.Time{}, time.Now().UTC().Truncate(time.Second), "termination refused: "+refused.Reason
			}
		})
		_, werr := t.writer.Apply(ctx, node.Name, nil, "record the refused termination", stop)
		return 0, false, werr
	}
	if err != nil {
		release := record.Edit(func(rec *record.Record) {
			if rec.Retained != nil {
				rec.Retained.Terminated = time.Time{}
			}
		})
		if _, werr := t.writer.Apply(ctx, node.Name, nil, "give back the claim on the retained instance's termination", release); werr != nil {
			log.Error("the termination failed and its claim could not be given back: the instance stays retained", "err", err, "writeErr", werr)
		}
		return 0, false, fmt.Errorf("terminate retained instance %s: %w", instance, err)
	}
	t.metrics.Retained(metrics.RetainedTerminated)
	log.Info("the retained node is drained: terminated its instance", "instance", instance, "group", r.group, "retainedFor", time.Since(r.rec.Since).Round(time.Second))
	t.events.RetainedTerminated(events.NodeOf(node), instance, r.group, time.Since(r.rec.Since))
	return 0, true, nil
}

// stop reports that RETAINED_DRAIN_TIMEOUT passed with the node not empty, and
// records that Lifeboat stopped: the instance stays retained, with its pods.
func (t *retentions) stop(ctx context.Context, node *corev1.Node, r retention, log *slog.Logger) error {
	left := "pods still on it"
	if l, ok := t.drains.drainer.Load().Outstanding(node.Name, r.terms(node, nil)); ok {
		left = fmt.Sprintf("%d pods to evict, %d terminating", l.Evict, l.Terminating)
	}
	var stopped bool
	edit := record.Edit(func(rec *record.Record) {
		if stopped = rec.Retained != nil && rec.Retained.Stopped.IsZero() && rec.Retained.Terminated.IsZero(); stopped {
			rec.Retained.Stopped, rec.Retained.Why = time.Now().UTC().Truncate(time.Second), "RETAINED_DRAIN_TIMEOUT passed: "+left
		}
	})
	if _, err := t.writer.Apply(ctx, node.Name, nil, "record that the retained drain stopped", edit); err != nil || !stopped {
		return err
	}
	instance := instanceOf(node, r.hooks)
	t.metrics.Retained(metrics.RetainedExpired)
	log.Error("RETAINED_DRAIN_TIMEOUT passed and the retained node is not empty: Lifeboat stops; the instance stays retained until it is terminated by hand or the node is uncordoned",
		"instance", instance, "group", r.group, "since", r.rec.Since, "left", left)
	t.events.RetentionExpired(events.NodeOf(node), instance, r.group, left)
	return nil
}

// retentionStopped reports whether the episode's retained drain was stopped (reported) and no
// reclaim has joined since: nothing is left to do, and nothing is read.
func retentionStopped(r record.Record, pending []notice.Notice) bool {
	return r.Retained != nil && !r.Retained.Stopped.IsZero() && !reclaimed(pending)
}
