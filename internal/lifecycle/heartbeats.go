// SPDX-License-Identifier: Apache-2.0

package lifecycle

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/events"
	"lifeboat.dev/lifeboat/internal/instancegate"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/panics"
	"lifeboat.dev/lifeboat/internal/record"
)

// Heartbeats keeps the termination hooks of a running drain alive (HEARTBEAT_INTERVAL), for at
// most HEARTBEAT_UNTIL from when each hook began. Each heartbeat sent is recorded on the Node,
// so a restarted or new leader resumes the schedule instead of starting over (the hook's own
// timeout keeps running across a restart). When heartbeats end before the drain, the drain's
// deadline is brought to the action's expiry.
type Heartbeats struct {
	AutoScaling cloud.AutoScaling
	// Hooks reads a hook's timeouts, from which an action's expiry counts.
	Hooks *cloud.HookTimeoutCache
	Gate  *instancegate.Gate
	// Nodes records each heartbeat on the node.
	Nodes   *nodes.Writer
	Metrics *metrics.Metrics
	Events  *events.Recorder
	Log     *slog.Logger
	// Policy is HEARTBEAT_INTERVAL and HEARTBEAT_UNTIL; a zero Interval sends none.
	Policy cloud.Heartbeats
}

// Start keeps the lifecycle actions of the drain's termination-hook notices alive while it
// runs (by deadline), and returns the function that stops them.
func (h *Heartbeats) Start(ctx context.Context, node *corev1.Node, notices []notice.Notice, deadline *drain.Deadline) (stop func()) {
	if h == nil || h.Policy.Interval <= 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, n := range notices {
		if n.Kind.Hook() != notice.HookTermination || n.Lifecycle == nil {
			continue
		}
		lc := *n.Lifecycle
		wg.Go(func() {
			h.keepAliveSafely(ctx, n, lc, node, deadline, h.Log.With("notice", n.ID, "group", lc.Group, "hook", lc.Hook))
		})
	}
	return func() { cancel(); wg.Wait() }
}

// sent is one action's heartbeats so far: when the action began, and the last heartbeat
// Auto Scaling accepted, from which its expiry counts.
type sent struct {
	began, last time.Time
}

// keepAliveSafely runs keepAlive as one unit of work. A panic stops this action's heartbeats
// only, and brings the drain's deadline to the action's expiry as when they end for good: the
// drain must not count on heartbeats that will not come. The other actions and the process go
// on.
func (h *Heartbeats) keepAliveSafely(ctx context.Context, n notice.Notice, lc notice.Lifecycle, node *corev1.Node, deadline *drain.Deadline, log *slog.Logger) {
	s := &sent{began: n.StartTime}
	if s.began.IsZero() {
		s.began = time.Now()
	}
	s.last = s.began
	err := panics.Do(panics.Heartbeat, log, h.Metrics, func() { h.keepAlive(ctx, n, lc, node, deadline, s, log) })
	if err != nil && ctx.Err() == nil {
		_ = panics.Do(panics.Heartbeat, log, h.Metrics, func() { h.ended(ctx, lc, s.began, s.last, false, deadline, log) })
	}
}

// keepAlive sends the heartbeats of one action until ctx ends, the window closes, or the
// action is over; s is kept up to date.
func (h *Heartbeats) keepAlive(ctx context.Context, n notice.Notice, lc notice.Lifecycle, node *corev1.Node, deadline *drain.Deadline, s *sent, log *slog.Logger) {
	interval := h.Policy.Interval
	until := s.began.Add(h.Policy.Until)
	// last schedules the next heartbeat (a failure brings it forward).
	last := s.began
	if rec, err := record.Read(node); err == nil && rec.Heartbeat != nil && rec.Heartbeat.Notice == n.ID {
		last = rec.Heartbeat.Last
		log.Info("resuming lifecycle heartbeats", "sent", rec.Heartbeat.Count, "last", last)
	}
	s.last = last
	ended := func(over bool) { h.ended(ctx, lc, s.began, s.last, over, deadline, log) }
	for {
		next := last.Add(interval)
		if next.After(until) {
			log.Info("lifecycle heartbeats stop at HEARTBEAT_UNTIL; the hook's own timeout now runs", "until", until)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(next)):
		}
		err := h.send(ctx, n, lc, node, log)
		switch {
		case err == nil:
			last = time.Now()
			s.last = last
			h.note(ctx, node.Name, n.ID, last, log)
		case errors.Is(err, errRefused):
			return
		case errors.Is(err, cloud.ErrNoActiveAction):
			log.Info("lifecycle action is over (completed or timed out); heartbeats stop", "err", err)
			ended(true)
			return
		case cloud.IsPermanent(err):
			log.Error("cannot send lifecycle heartbeats; the hook will time out", "err", err)
			ended(false)
			return
		default:
			if ctx.Err() != nil {
				return
			}
			// Try again soon rather than a whole interval later: the hook's timeout is running.
			log.Warn("lifecycle heartbeat failed; retrying", "err", err)
			last = time.Now().Add(min(5*time.Second, interval/4) - interval)
		}
	}
}

// errRefused is send's answer when the gate refused the call (already reported).
var errRefused = errors.New("refused by the instance gate")

// send sends one heartbeat, after the instance gate's check.
func (h *Heartbeats) send(ctx context.Context, n notice.Notice, lc notice.Lifecycle, node *corev1.Node, log *slog.Logger) error {
	check := instancegate.Request{Call: instancegate.CallLifecycleHeartbeat, Node: node.Name, InstanceID: n.InstanceID, Group: lc.Group}
	err := h.Gate.Check(ctx, check)
	if r, refused := instancegate.IsRefusal(err); refused {
		log.Error("lifecycle heartbeats refused: the node's record names an instance or group that is not the node's own",
			"instance", r.InstanceID, "nodeInstance", r.NodeInstance, "why", r.Reason)
		h.Metrics.Action(metrics.ActionHeartbeat, metrics.ResultRefused)
		h.Events.InstanceCallRefused(events.NodeOf(node), r.Error())
		return errRefused
	}
	if err == nil {
		err = h.AutoScaling.RecordLifecycleActionHeartbeat(ctx, cloud.LifecycleAction{Group: lc.Group, Hook: lc.Hook, InstanceID: n.InstanceID})
		h.Metrics.AWSCall("RecordLifecycleActionHeartbeat", err, cloud.ErrNoActiveAction)
	}
	h.Metrics.ActionErr(metrics.ActionHeartbeat, err)
	return err
}

// note records on the node that a heartbeat was sent for the notice at the given time.
func (h *Heartbeats) note(ctx context.Context, nodeName, noticeID string, at time.Time, log *slog.Logger) {
	edit := record.Edit(func(r *record.Record) {
		if r.Heartbeat == nil || r.Heartbeat.Notice != noticeID {
			r.Heartbeat = &record.Heartbeat{Notice: noticeID}
		}
		r.Heartbeat.Count++
		r.Heartbeat.Last = at.UTC().Truncate(time.Second)
	})
	if _, err := h.Nodes.Apply(ctx, nodeName, nil, "record lifecycle heartbeat for notice "+noticeID, edit); err != nil && ctx.Err() == nil {
		log.Warn("lifecycle heartbeat sent but not recorded on the node", "err", err)
		return
	}
	log.Debug("lifecycle heartbeat sent")
}

// ended brings the running drain back to when the action now expires (its deadline counted on
// heartbeats that will not come): the last heartbeat sent plus the hook's timeout, or now when
// the action is already over.
func (h *Heartbeats) ended(ctx context.Context, lc notice.Lifecycle, began, lastSent time.Time, over bool, deadline *drain.Deadline, log *slog.Logger) {
	timeouts, _, err := h.Hooks.Timeouts(ctx, lc.Group, lc.Hook)
	if err != nil {
		timeouts = cloud.AssumedHookTimeouts
	}
	expiry := timeouts.Expiry(began, lastSent)
	if now := time.Now(); over || expiry.Before(now) {
		expiry = now
	}
	if deadline.InstanceGoesAt(expiry) {
		log.Warn("heartbeats ended before the drain: its deadline is now the action's expiry", "deadline", expiry)
	}
}
