// SPDX-License-Identifier: Apache-2.0

package controller

import "time"

// SetHeartbeatUnit makes HEARTBEAT_INTERVAL and HEARTBEAT_UNTIL count in unit instead of
// seconds, so a test sees several heartbeats in a few seconds.
func SetHeartbeatUnit(c *Controller, unit time.Duration) {
	c.heartbeats.Policy = heartbeatPolicy(c.cfg, unit)
}

// PodsSynced reports whether the drains' shared pod informer has listed the cluster's pods.
func PodsSynced(c *Controller) bool { return c.podsSynced.Load() }
