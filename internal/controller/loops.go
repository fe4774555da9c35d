// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"

	"lifeboat.dev/lifeboat/internal/ownership"
)

// sideLoop is work the leader runs beside intake: the status poll, node repair, the retained
// sweep, node clean-up, the set-up check and the periodic workload check. Each is built for
// one work loop, started with it, and stopped and waited for before the reconciler stops, so
// nothing a loop started outlives the leadership it was started under.
type sideLoop interface {
	// Start runs the loop until ctx ends; stop ends it and returns once it has.
	Start(ctx context.Context) (stop func())
}

// sideLoops are the loops the configuration turns on, over what the work loop runs on.
func (c *Controller) sideLoops(w *warm) []sideLoop {
	instances := func() []string { return w.nodes.GetIndexer().ListIndexFuncValues(ownership.IndexInstanceID) }
	var on []sideLoop
	for _, l := range []sideLoop{
		newStatusPoll(c, w.resolver, w.nodes.GetIndexer()),
		newRetainedSweep(c, w.resolver),
		newRepairWatch(c, w.resolver, w.nodes),
		newNodeCleanup(c, w.nodes.GetStore()),
		c.setup.forInstances(instances),
		newCheckReports(c),
	} {
		if l != nil {
			on = append(on, l)
		}
	}
	return on
}

// startLoops starts every loop; stop stops them in the reverse order and waits for each.
func startLoops(ctx context.Context, loops []sideLoop) (stop func()) {
	stops := make([]func(), 0, len(loops))
	for _, l := range loops {
		stops = append(stops, l.Start(ctx))
	}
	return func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
}
