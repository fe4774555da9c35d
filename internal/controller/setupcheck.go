// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"sync"
	"time"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/panics"
	"lifeboat.dev/lifeboat/internal/setupcheck"
	"lifeboat.dev/lifeboat/internal/source/sqs/messages"
)

// setupChecks checks, while this replica leads, the AWS set-up that feeds the queue: at start
// and every hour. A finding is said when it appears (a WARN line, a Warning Event on Lifeboat's
// pod) and when it goes (an INFO line); lifeboat_aws_setup_problems holds the last check's
// count by check, which LifeboatAWSSetupProblem alerts on.
type setupChecks struct {
	c     *Controller
	setup cloud.Setup
	every time.Duration
	said  map[string]bool // findings said and not yet gone; only the loop's goroutine uses it
	ran   bool            // a check has completed

	instances func() []string
}

// forInstances is the check as a side loop of the leader, over instances, this cluster's
// nodes' instances (their groups' hooks are checked); nil when the set-up is not checked.
func (s *setupChecks) forInstances(instances func() []string) sideLoop {
	if s == nil {
		return nil
	}
	s.instances = instances
	return s
}

// Start runs the checks until ctx ends; stop ends them and waits.
func (s *setupChecks) Start(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(s.every)
		defer t.Stop()
		for {
			// What AWS answers is input: a panic ends this check only.
			_ = panics.Do(panics.SetupCheck, s.c.log, s.c.metrics, func() { s.run(ctx) })
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
	return func() { cancel(); wg.Wait() }
}

func (s *setupChecks) run(ctx context.Context) {
	log := s.c.log.With("part", "setup-check")
	findings, err := setupcheck.Check(ctx, setupcheck.Options{Setup: s.setup, QueueURL: s.c.cfg.QueueURL, Kinds: messages.EventKinds(),
		Instances: s.instances()})
	if err != nil {
		if ctx.Err() == nil {
			log.Warn("cannot check the AWS set-up that feeds the queue; the next check tries again", "err", err)
		}
		return
	}
	counts := map[string]int{}
	for _, c := range setupcheck.Checks {
		counts[c] = 0
	}
	now := map[string]bool{}
	for _, f := range findings {
		counts[f.Check]++
		now[f.String()] = true
		if s.said[f.String()] {
			continue
		}
		log.Warn("the AWS set-up that feeds the queue is wrong: notices may never arrive", "check", f.Check, "problem", f.Problem, "fix", f.Fix)
		s.c.events.AWSSetupProblem(s.c.ownPod(), f.String())
	}
	for f := range s.said {
		if !now[f] {
			log.Info("the AWS set-up problem is gone", "was", f)
		}
	}
	if !s.ran && len(findings) == 0 {
		log.Info("the AWS set-up that feeds the queue is right: every notice kind has an enabled EventBridge rule to the queue, and the queue lets EventBridge send; checked again every hour",
			"every", s.every.String())
	}
	s.ran = true
	s.said = now
	s.c.metrics.SetupProblems(counts)
}
