// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"log/slog"
	"time"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/lifecycle"
	"lifeboat.dev/lifeboat/internal/notice"
)

// hookDeadline is when a termination hook's lifecycle action expires, carried on by the
// heartbeats this controller sends (HEARTBEAT_INTERVAL, HEARTBEAT_UNTIL).
func (c *Controller) hookDeadline(ctx context.Context, n notice.Notice, lc notice.Lifecycle, log *slog.Logger) time.Time {
	start := n.StartTime
	if start.IsZero() {
		start = time.Now()
	}
	return lifecycle.Deadline(ctx, c.hooks, lc.Group, lc.Hook, start, c.heartbeats.Policy, log.With("notice", n.ID))
}

// heartbeatPolicy is HEARTBEAT_INTERVAL and HEARTBEAT_UNTIL, counted in unit (a second; tests
// shorten it); no heartbeats in dry-run.
func heartbeatPolicy(cfg *config.Config, unit time.Duration) cloud.Heartbeats {
	if cfg.HeartbeatInterval <= 0 || cfg.DryRun {
		return cloud.Heartbeats{}
	}
	return cloud.Heartbeats{
		Interval: time.Duration(cfg.HeartbeatInterval) * unit,
		Until:    time.Duration(cfg.HeartbeatUntil) * unit,
	}
}
