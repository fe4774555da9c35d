// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"time"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/config"
)

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
