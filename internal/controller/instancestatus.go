// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"log/slog"
	"time"

	"k8s.io/client-go/tools/cache"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/ownership"
	"lifeboat.dev/lifeboat/internal/source/ec2status"
)

// statusPoll is the DescribeInstanceStatus poll (ENABLE_INSTANCE_STATUS_DRAINING) over the
// instances the cluster's Nodes name by providerID. Its notices are taken as a queue
// message's are (handleNotice: ownership, then the record on the Node), so the agent, the
// queue and the poll coalesce on the Node's record.
type statusPoll struct {
	c        *Controller
	resolver *ownership.Resolver
	nodes    cache.Indexer
}

// newStatusPoll is the poll when the configuration turns it on, else nil.
func newStatusPoll(c *Controller, resolver *ownership.Resolver, nodes cache.Indexer) sideLoop {
	if !c.cfg.EnableInstanceStatusDraining {
		return nil
	}
	return statusPoll{c: c, resolver: resolver, nodes: nodes}
}

// Start polls until ctx ends; stop ends the poll and waits for it.
func (s statusPoll) Start(ctx context.Context) (stop func()) {
	c, nodes := s.c, s.nodes
	log := c.log.With("source", string(notice.SourceEC2Status))
	p, err := ec2status.New(ec2status.Options{
		API:       cloud.CountedEC2{EC2: c.ec2, Calls: c.metrics},
		Instances: func() []string { return nodes.ListIndexFuncValues(ownership.IndexInstanceID) },
		Interval:  time.Duration(c.cfg.InstanceStatusInterval) * time.Second,
		Threshold: time.Duration(c.cfg.InstanceImpairedThreshold) * time.Second,
		Logger:    log, Pass: c.metrics.InstanceStatusPass, Panics: c.metrics,
	})
	if err != nil {
		log.Error("the DescribeInstanceStatus poll cannot start", "err", err)
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		log.Info("polling DescribeInstanceStatus for this cluster's instances", "interval", c.cfg.InstanceStatusInterval, "impairedThreshold", c.cfg.InstanceImpairedThreshold,
			"markUnhealthy", c.cfg.SetImpairedInstanceUnhealthy)
		p.Run(ctx, func(ctx context.Context, ns []notice.Notice) []bool {
			return takeStatusNotices(ctx, c, s.resolver, ns, log)
		})
	}()
	return func() { cancel(); <-done }
}

// takeStatusNotices handles a pass's notices with the queue's pool; a notice is taken once
// recorded, or once found not to be this cluster's (it is not offered again every pass).
func takeStatusNotices(ctx context.Context, c *Controller, resolver *ownership.Resolver, ns []notice.Notice, log *slog.Logger) []bool {
	fates := handleLoopNotices(ctx, c, resolver, ns, log)
	taken := make([]bool, len(fates))
	for i, f := range fates {
		taken[i] = f == noticeDone || f == noticeForeign || f == noticeRefused
	}
	return taken
}

// handleLoopNotices counts and handles a side loop's notices with the queue's pool.
func handleLoopNotices(ctx context.Context, c *Controller, resolver *ownership.Resolver, ns []notice.Notice, log *slog.Logger) []noticeFate {
	for _, n := range ns {
		c.metrics.Notice(string(n.Kind), string(n.Source))
	}
	return runNotices(ctx, ns, c.messages.noticePool(log), func(ctx context.Context, n notice.Notice) noticeFate {
		return c.notices.handleNotice(ctx, resolver, n, log)
	})
}
