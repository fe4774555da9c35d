package controller

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/events"
	"lifeboat.dev/lifeboat/internal/instancegate"
	"lifeboat.dev/lifeboat/internal/lifecycle"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/record"
)

// hookDeadline is when a termination hook's lifecycle action expires, carried on by the
// heartbeats this controller sends (HEARTBEAT_INTERVAL, HEARTBEAT_UNTIL).
func (c *Controller) hookDeadline(ctx context.Context, n notice.Notice, lc notice.Lifecycle, log *slog.Logger) time.Time {
	start := n.StartTime
	if start.IsZero() {
		start = time.Now()
	}
	return lifecycle.Deadline(ctx, c.hooks, lc.Group, lc.Hook, start, c.heartbeatPolicy(), log.With("notice", n.ID))
}

// heartbeatPolicy is HEARTBEAT_INTERVAL and HEARTBEAT_UNTIL; no heartbeats in dry-run.
func (c *Controller) heartbeatPolicy() cloud.Heartbeats {
	if c.cfg.HeartbeatInterval <= 0 || c.cfg.DryRun {
		return cloud.Heartbeats{}
	}
	return cloud.Heartbeats{
		Interval: time.Duration(c.cfg.HeartbeatInterval) * c.heartbeatUnit,
		Until:    time.Duration(c.cfg.HeartbeatUntil) * c.heartbeatUnit,
	}
}

// heartbeatsEnded brings the node's running drain back to when the action now expires (its
// deadline counted on heartbeats that will not come): the last heartbeat sent plus the hook's
// timeout, or now when the action is already over.
func (c *Controller) heartbeatsEnded(ctx context.Context, lc notice.Lifecycle, node string, began, lastSent time.Time, over bool, log *slog.Logger) {
	timeouts, _, err := c.hooks.Timeouts(ctx, lc.Group, lc.Hook)
	if err != nil {
		timeouts = cloud.AssumedHookTimeouts
	}
	expiry := timeouts.Expiry(began, lastSent)
	if now := time.Now(); over || expiry.Before(now) {
		expiry = now
	}
	if c.handler.TightenDrain(node, expiry) {
		log.Warn("heartbeats ended before the drain: its deadline is now the action's expiry", "deadline", expiry)
	}
}

// whileDraining keeps the lifecycle actions of a drain's termination-hook notices alive while
// it runs (HEARTBEAT_INTERVAL; never in dry-run), and returns the function that stops them.
func (c *Controller) whileDraining(ctx context.Context, node *corev1.Node, notices []notice.Notice) (stop func()) {
	if c.cfg.HeartbeatInterval <= 0 || c.cfg.DryRun {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, n := range notices {
		if n.Kind != notice.ASGTermination || n.Lifecycle == nil {
			continue
		}
		lc := *n.Lifecycle
		wg.Go(func() {
			c.heartbeats(ctx, n, lc, node, c.log.With("notice", n.ID, "group", lc.Group, "hook", lc.Hook))
		})
	}
	return func() { cancel(); wg.Wait() }
}

// heartbeats keeps an Auto Scaling termination hook alive while its node drains
// (HEARTBEAT_INTERVAL), for at most HEARTBEAT_UNTIL from when the hook began. Progress is
// recorded on the Node, so a restarted or new leader resumes the schedule instead of
// starting over (the hook's own timeout keeps running across a restart). It returns when ctx
// ends, the window closes, or the action is over.
func (c *Controller) heartbeats(ctx context.Context, n notice.Notice, lc notice.Lifecycle, node *corev1.Node, log *slog.Logger) {
	interval := time.Duration(c.cfg.HeartbeatInterval) * c.heartbeatUnit
	began := n.StartTime
	if began.IsZero() {
		began = time.Now()
	}
	until := began.Add(time.Duration(c.cfg.HeartbeatUntil) * c.heartbeatUnit)
	// last schedules the next heartbeat (a failure brings it forward); lastSent is the last
	// one Auto Scaling accepted, from which the action's expiry counts.
	last := began
	if rec, err := record.Read(node); err == nil && rec.Heartbeat != nil && rec.Heartbeat.Notice == n.ID {
		last = rec.Heartbeat.Last
		log.Info("resuming lifecycle heartbeats", "sent", rec.Heartbeat.Count, "last", last)
	}
	lastSent := last
	action := cloud.LifecycleAction{Group: lc.Group, Hook: lc.Hook, InstanceID: n.InstanceID}
	check := instancegate.Request{Call: instancegate.CallLifecycleHeartbeat, Node: node.Name, InstanceID: n.InstanceID, Group: lc.Group}
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
		err := c.gate.Check(ctx, check)
		if r, refused := instancegate.IsRefusal(err); refused {
			log.Error("lifecycle heartbeats refused: the node's record names an instance or group that is not the node's own",
				"instance", r.InstanceID, "nodeInstance", r.NodeInstance, "why", r.Reason)
			c.metrics.Action(metrics.ActionHeartbeat, metrics.ResultRefused)
			c.events.InstanceCallRefused(events.NodeOf(node), r.Error())
			return
		}
		if err == nil {
			err = c.asg.RecordLifecycleActionHeartbeat(ctx, action)
			c.metrics.AWSCall("RecordLifecycleActionHeartbeat", err, cloud.ErrNoActiveAction)
		}
		c.metrics.ActionErr(metrics.ActionHeartbeat, err)
		switch {
		case err == nil:
			last = time.Now()
			lastSent = last
			if err := c.handler.RecordHeartbeat(ctx, node.Name, n.ID, last); err != nil && ctx.Err() == nil {
				log.Warn("lifecycle heartbeat sent but not recorded on the node", "err", err)
			}
			log.Debug("lifecycle heartbeat sent")
		case errors.Is(err, cloud.ErrNoActiveAction):
			log.Info("lifecycle action is over (completed or timed out); heartbeats stop", "err", err)
			c.heartbeatsEnded(ctx, lc, node.Name, began, lastSent, true, log)
			return
		case cloud.IsPermanent(err):
			log.Error("cannot send lifecycle heartbeats; the hook will time out", "err", err)
			c.heartbeatsEnded(ctx, lc, node.Name, began, lastSent, false, log)
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
