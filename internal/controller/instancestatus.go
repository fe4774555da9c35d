package controller

import (
	"context"
	"log/slog"
	"time"

	"k8s.io/client-go/tools/cache"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/instancegate"
	"lifeboat.dev/lifeboat/internal/interruption"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/ownership"
	"lifeboat.dev/lifeboat/internal/source/ec2status"
)

// startInstanceStatus starts the DescribeInstanceStatus poll (ENABLE_INSTANCE_STATUS_DRAINING)
// over the instances the cluster's Nodes name by providerID; stop ends it and waits for it.
// Its notices are taken as a queue message's are (handleNotice: ownership, then the record on
// the Node), so the agent, the queue and the poll coalesce on the Node's record.
func (c *Controller) startInstanceStatus(ctx context.Context, resolver *ownership.Resolver, nodes cache.Indexer) (stop func()) {
	if !c.cfg.EnableInstanceStatusDraining {
		return func() {}
	}
	log := c.log.With("source", string(notice.SourceEC2Status))
	p, err := ec2status.New(ec2status.Options{
		API:       countedEC2{c.ec2, c.metrics},
		Instances: func() []string { return nodes.ListIndexFuncValues(ownership.IndexInstanceID) },
		Interval:  time.Duration(c.cfg.InstanceStatusInterval) * time.Second,
		Threshold: time.Duration(c.cfg.InstanceImpairedThreshold) * time.Second,
		Logger:    log, Pass: c.metrics.InstanceStatusPass,
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
			return c.takeStatusNotices(ctx, resolver, ns, log)
		})
	}()
	return func() { cancel(); <-done }
}

// takeStatusNotices handles a pass's notices with the queue's pool; a notice is taken once
// recorded, or once found not to be this cluster's (it is not offered again every pass).
func (c *Controller) takeStatusNotices(ctx context.Context, resolver *ownership.Resolver, ns []notice.Notice, log *slog.Logger) []bool {
	for _, n := range ns {
		c.metrics.Notice(string(n.Kind), string(n.Source))
	}
	fates := runNotices(ctx, ns, c.noticeWorkers(), c.intake.Backoff(), func(ctx context.Context, n notice.Notice) noticeFate {
		return c.handleNotice(ctx, resolver, n, log)
	})
	taken := make([]bool, len(fates))
	for i, f := range fates {
		taken[i] = f == noticeDone || f == noticeForeign
	}
	return taken
}

// markUnhealthy runs once an impaired instance's node is drained: with
// SET_IMPAIRED_INSTANCE_UNHEALTHY it marks the instance Unhealthy in its Auto Scaling group,
// which replaces it, once the gate has confirmed that the node names the instance and that
// Auto Scaling reports it in that group. An instance in no group is left drained (nothing
// would replace it).
func (c *Controller) markUnhealthy(ctx context.Context, nodeName string, n notice.Notice) (*interruption.Completed, error) {
	if !c.cfg.SetImpairedInstanceUnhealthy || c.cfg.DryRun {
		return nil, nil
	}
	group, err := c.gate.GroupOf(ctx, n.InstanceID)
	switch {
	case err != nil && cloud.IsPermanent(err):
		c.log.Error("cannot learn the impaired instance's Auto Scaling group, so it is not marked Unhealthy", "notice", n.ID, "err", err)
		c.metrics.Action(metrics.ActionMarkUnhealthy, metrics.ResultError)
		return nil, nil
	case err != nil:
		return nil, err
	case group == "":
		c.log.Info("the impaired instance is in no Auto Scaling group: nothing replaces it, its node stays drained", "notice", n.ID, "node", nodeName)
		c.metrics.Action(metrics.ActionMarkUnhealthy, metrics.ResultSkipped)
		return nil, nil
	}
	if err := c.gate.Check(ctx, instancegate.Request{Call: instancegate.CallSetInstanceHealth, Node: nodeName, InstanceID: n.InstanceID, Group: group}); err != nil {
		if _, refused := instancegate.IsRefusal(err); refused {
			c.metrics.Action(metrics.ActionMarkUnhealthy, metrics.ResultRefused)
		}
		return nil, err
	}
	err = c.asg.SetUnhealthy(ctx, n.InstanceID)
	c.metrics.AWSCall("SetInstanceHealth", err, nil)
	switch {
	case err == nil:
		c.metrics.Action(metrics.ActionMarkUnhealthy, metrics.ResultOK)
		c.log.Info("impaired instance marked Unhealthy: its Auto Scaling group replaces it", "notice", n.ID, "node", nodeName, "group", group)
	case cloud.IsPermanent(err):
		c.metrics.Action(metrics.ActionMarkUnhealthy, metrics.ResultError)
		c.log.Error("cannot mark the impaired instance Unhealthy; its node stays drained", "notice", n.ID, "err", err)
	default:
		return nil, err
	}
	return nil, nil
}
