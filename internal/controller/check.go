// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"time"

	"lifeboat.dev/lifeboat/internal/check"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/panics"
	"lifeboat.dev/lifeboat/internal/wiring"
)

// checkReports runs `lifeboat check` every READINESS_REPORT_INTERVAL while this replica
// leads, and publishes the workloads it finds per namespace and reason: a team learns that its
// workload could not leave a node within a Spot warning before an interruption shows it.
type checkReports struct {
	c     *Controller
	every time.Duration
}

// newCheckReports is the periodic check when READINESS_REPORT_INTERVAL is set, else nil.
func newCheckReports(c *Controller) sideLoop {
	if c.cfg.CheckInterval <= 0 {
		return nil
	}
	return checkReports{c: c, every: c.cfg.CheckInterval}
}

// Start checks until ctx ends; stop ends the checks and waits for the one running.
func (r checkReports) Start(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); r.run(ctx) }()
	return func() { cancel(); <-done }
}

func (r checkReports) run(ctx context.Context) {
	c, every := r.c, r.every
	drainOpts := wiring.Drain(c.cfg, c.client, nil)
	opts := check.Options{Policy: drainOpts.Policy, PodGracePeriod: drainOpts.PodGracePeriod, FromCache: true}
	ticker := time.NewTicker(every)
	defer ticker.Stop()
	for {
		findings, err := runCheck(ctx, c, opts)
		if ctx.Err() != nil {
			return
		}
		workloads := map[metrics.CheckKey]int{}
		for _, f := range findings {
			workloads[metrics.CheckKey{Namespace: f.Namespace, Reason: f.Reason}]++
		}
		c.metrics.CheckFindings(workloads, time.Now(), err)
		if err != nil {
			c.log.Warn("periodic readiness check failed; the last findings stay published", "err", err)
		} else {
			c.log.Debug("periodic readiness check", "workloads", len(findings))
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// runCheck runs one check. A panic (a bug met on the cluster's workloads) is that
// check's failure: the last findings stay published, and the next check runs on time.
func runCheck(ctx context.Context, c *Controller, opts check.Options) (findings []check.Finding, err error) {
	defer panics.Recover(panics.PeriodicCheck, c.log, c.metrics, &err)
	return check.Check(ctx, c.client, opts)
}
