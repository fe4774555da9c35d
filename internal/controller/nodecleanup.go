// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/events"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/nodecleanup"
	"lifeboat.dev/lifeboat/internal/ownership"
)

// nodeCleanup deletes terminated instances' Nodes (DELETE_NODE_AFTER_TERMINATION) over the
// controller's node informer.
type nodeCleanup struct {
	c     *Controller
	nodes toolscache.Store
}

// newNodeCleanup is the clean-up when the configuration turns it on, else nil. DRY_RUN deletes
// nothing, so it does not run.
func newNodeCleanup(c *Controller, nodes toolscache.Store) sideLoop {
	if !c.cfg.DeleteNodeAfterTermination || c.cfg.DryRun || c.ec2 == nil {
		return nil
	}
	return nodeCleanup{c: c, nodes: nodes}
}

// Start cleans up until ctx ends; stop ends it and waits.
func (n nodeCleanup) Start(ctx context.Context) (stop func()) {
	c, nodes := n.c, n.nodes
	log := c.log.With("part", "node-cleanup")
	cl := &nodecleanup.Cleaner{Client: c.client, EC2: cloud.CountedEC2{EC2: c.ec2, Calls: c.metrics}, Nodes: nodes,
		Interval: c.cfg.NodeCleanupInterval, Log: log, Report: cleanupReports{c: c}, Panics: c.metrics}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		log.Info("deleting the Nodes of terminated instances", "interval", c.cfg.NodeCleanupInterval.String())
		cl.Run(ctx)
	}()
	return func() { cancel(); <-done }
}

// cleanupReports make each deletion and refusal visible: an Event, a metric, a log line.
type cleanupReports struct{ c *Controller }

func (r cleanupReports) Deleted(node *corev1.Node, instanceID, why string) {
	r.c.metrics.NodeCleanup("deleted")
	r.c.log.Info("deleted the Node of a terminated instance", "node", node.Name, "instance", instanceID, "why", why)
	r.c.events.NodeDeleted(events.NodeOf(node), why)
}

func (r cleanupReports) Refused(node *corev1.Node, instanceID string, claim ownership.Claim) {
	r.c.metrics.NodeCleanup("refused")
	r.c.metrics.ClaimRefused(metrics.ClaimCheckEC2, string(claim.Path))
	why := claim.String()
	r.c.log.Warn("the Node of a terminated instance is not deleted: EC2 does not describe the instance as this node", "node", node.Name, "instance", instanceID, "why", why)
	r.c.events.NodeDeleteRefused(events.NodeOf(node), why+"; "+consequence(claim.Path))
}
