package controller

import (
	"context"

	toolscache "k8s.io/client-go/tools/cache"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/lifecycle"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/ownership"
	"lifeboat.dev/lifeboat/internal/source/nodecondition"
)

// startNodeRepair starts the watch of Node conditions (ENABLE_NODE_REPAIR) on the
// controller's node informer; stop ends it and waits for it. Its notices are taken as a queue
// message's are (handleNotice: ownership, then the record on the Node), so a repair joins
// whatever else the node's episode holds, and a restart or a new leader finds it recorded.
func (c *Controller) startNodeRepair(ctx context.Context, resolver *ownership.Resolver, nodes toolscache.SharedIndexInformer) (stop func()) {
	if !c.cfg.EnableNodeRepair {
		return func() {}
	}
	log := c.log.With("source", string(notice.SourceNodeCondition))
	w, err := nodecondition.New(nodecondition.Options{
		Nodes: nodes, Conditions: c.cfg.RepairConditions(), DrainTimeout: c.cfg.NodeRepairDrainTimeout, Logger: log,
	})
	if err != nil {
		log.Error("node repair cannot start", "err", err)
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		log.Info("watching node conditions for repairs", "conditions", c.cfg.RepairConditions(), "drainTimeout", c.cfg.NodeRepairDrainTimeout.String(),
			"action", c.cfg.NodeRepairAction)
		if err := w.Run(ctx, func(ctx context.Context, ns []notice.Notice) []bool {
			return c.takeStatusNotices(ctx, resolver, ns, log)
		}); err != nil {
			log.Error("node repair stopped", "err", err)
		}
	}()
	return func() { cancel(); <-done }
}

// repairs is what the drains of repaired nodes ask of AWS: nothing under DRY_RUN or with
// repairs off.
func repairs(cfg *config.Config, ec2 cloud.EC2) lifecycle.Repairs {
	if !cfg.EnableNodeRepair || cfg.DryRun {
		return lifecycle.Repairs{}
	}
	t, _ := ec2.(cloud.Terminator)
	return lifecycle.Repairs{Action: cfg.NodeRepairAction, Terminator: t}
}
