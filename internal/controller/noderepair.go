// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/events"
	"lifeboat.dev/lifeboat/internal/lifecycle"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/ownership"
	"lifeboat.dev/lifeboat/internal/record"
	"lifeboat.dev/lifeboat/internal/source/nodecondition"
)

// repairWatch is the watch of Node conditions (ENABLE_NODE_REPAIR) on the controller's node
// informer. Its notices are taken as a queue message's are (handleNotice: ownership, then the
// record on the Node), so a repair joins whatever else the node's episode holds, and a restart
// or a new leader finds it recorded.
type repairWatch struct {
	c        *Controller
	resolver *ownership.Resolver
	nodes    toolscache.SharedIndexInformer
}

// newRepairWatch is the watch when the configuration turns repair on, else nil.
func newRepairWatch(c *Controller, resolver *ownership.Resolver, nodes toolscache.SharedIndexInformer) sideLoop {
	if !c.cfg.EnableNodeRepair {
		return nil
	}
	return repairWatch{c: c, resolver: resolver, nodes: nodes}
}

// Start watches until ctx ends; stop ends the watch and waits for it.
func (r repairWatch) Start(ctx context.Context) (stop func()) {
	c, nodes := r.c, r.nodes
	log := c.log.With("source", string(notice.SourceNodeCondition))
	w, err := nodecondition.New(nodecondition.Options{
		Nodes: nodes, Policies: c.cfg.RepairPolicies(), DrainTimeout: c.cfg.NodeRepairDrainTimeout, Logger: log,
		Limits: nodecondition.LimitsOf(c.cfg), Report: &repairReports{c: c, log: log}, Owners: repairOwners(c), Panics: c.metrics,
		Instances: c.instances, Writer: repairWriter(c.cfg, c.client), ShowCondition: c.cfg.NodeCondition, StaleAfter: c.cfg.NodeRepairStaleAfter, RebootWait: c.cfg.NodeRepairRebootWait,
		Selector: c.cfg.RepairSelector(),
	})
	if err != nil {
		log.Error("node repair cannot start", "err", err)
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		log.Info("watching node conditions for repairs", "policies", c.cfg.RepairPolicies(), "drainTimeout", c.cfg.NodeRepairDrainTimeout.String(),
			"action", c.cfg.NodeRepairAction, "maxUnhealthyPercent", c.cfg.NodeRepairMaxUnhealthyPercent, "maxParallel", c.cfg.NodeRepairMaxParallel,
			"maxPerHour", c.cfg.NodeRepairMaxPerHour, "paused", c.cfg.NodeRepairPaused)
		if err := w.Run(ctx, func(ctx context.Context, ns []notice.Notice) []nodecondition.Fate {
			return takeRepairNotices(ctx, c, r.resolver, ns, log)
		}); err != nil {
			log.Error("node repair stopped", "err", err)
		}
	}()
	return func() { cancel(); <-done }
}

// repairOwners say which systems repair their own nodes: Karpenter while its repair is on;
// EKS for the managed node groups listed, and, with NODE_REPAIR_EKS_LOOKUP, those EKS says
// have node auto repair on, asked through a cache (its calls counted) that lives as long as
// this leader's watch.
func repairOwners(c *Controller) nodecondition.Owners {
	o := nodecondition.Owners{Karpenter: c.cfg.NodeRepairKarpenterRepairs, Listed: c.cfg.EKSAutoRepaired}
	if !c.cfg.NodeRepairEKSLookup {
		return o
	}
	if c.eks == nil {
		o.Ask = func(context.Context, string) (bool, error) { return false, errNoEKSClient }
		return o
	}
	o.Ask = cloud.NewNodegroupRepairs(cloud.CountedEKS{EKS: c.eks, Calls: c.metrics}, c.cfg.ClusterName).AutoRepaired
	return o
}

// errNoEKSClient: NODE_REPAIR_EKS_LOOKUP without an EKS client, which only a wiring mistake
// makes; said as any other failure to ask, never taken for "off".
var errNoEKSClient = errors.New("no EKS client to ask")

// takeRepairNotices handles repair notices as a status poll's, and says which started a repair:
// one refused (a claimant's, an untagged or foreign instance's) neither counts as running for
// the breaker nor is offered again until its condition changes.
func takeRepairNotices(ctx context.Context, c *Controller, resolver *ownership.Resolver, ns []notice.Notice, log *slog.Logger) []nodecondition.Fate {
	fates := handleLoopNotices(ctx, c, resolver, ns, log)
	out := make([]nodecondition.Fate, len(fates))
	for i, f := range fates {
		switch f {
		case noticeDone:
			out[i] = nodecondition.Started
		case noticeRefused, noticeForeign:
			out[i] = nodecondition.Refused
		}
	}
	return out
}

// repairWriter writes what node repair remembers on a Node, and its condition; under DRY_RUN
// it writes nothing.
func repairWriter(cfg *config.Config, client kubernetes.Interface) *nodes.Writer {
	w := nodes.NewWriter(client)
	w.DryRun = cfg.DryRun
	return w
}

// repairs is what the drains of repaired nodes ask of AWS: nothing under DRY_RUN or with
// repairs off.
func repairs(cfg *config.Config, ec2 cloud.EC2, client kubernetes.Interface) lifecycle.Repairs {
	if !cfg.EnableNodeRepair || cfg.DryRun {
		return lifecycle.Repairs{}
	}
	t, _ := ec2.(cloud.Terminator)
	r, _ := ec2.(cloud.Rebooter)
	return lifecycle.Repairs{Action: cfg.NodeRepairAction, Terminator: t, Rebooter: r, RebootWait: cfg.NodeRepairRebootWait, Nodes: nodes.NewWriter(client)}
}

// repairReports make the repairs' fate visible: Events on the node, metrics, and a log line
// when the breaker opens or closes.
type repairReports struct {
	c   *Controller
	log *slog.Logger

	mu    sync.Mutex
	cause string // the breaker's last cause, "" while closed
}

func (r *repairReports) Breaker(b nodecondition.Breaker) {
	r.c.metrics.RepairBreaker(b.MetricCause(), b.Unhealthy, b.Running, b.Started)
	r.mu.Lock()
	changed := b.Cause != r.cause
	r.cause = b.Cause
	r.mu.Unlock()
	switch {
	case changed && b.Open:
		r.log.Warn("node repair breaker open: no new repair starts; repairs already started finish", "reason", b.Reason,
			"unhealthy", b.Unhealthy, "nodes", b.Nodes, "running", b.Running)
	case changed:
		r.log.Info("node repair breaker closed: repairs start again", "unhealthy", b.Unhealthy, "nodes", b.Nodes, "running", b.Running)
	}
}

func (r *repairReports) Held(node *corev1.Node, n notice.Notice, h nodecondition.Hold) {
	r.c.metrics.NodeRepair(metrics.RepairHeld)
	r.log.Info("node repair held by a breaker", "node", node.Name, "notice", n.ID, "breaker", h.Cause, "reason", h.Reason)
	r.c.events.RepairHeld(events.NodeOf(node), n.Description, h.Reason)
}

func (r *repairReports) Vetoed(node *corev1.Node, n notice.Notice) {
	r.c.metrics.NodeRepair(metrics.RepairVetoed)
	r.log.Info("node repair vetoed by the node's annotation", "node", node.Name, "notice", n.ID, "annotation", nodecondition.AnnotationVeto)
	r.c.events.RepairVetoed(events.NodeOf(node), n.Description, nodecondition.AnnotationVeto+"="+nodecondition.VetoValue)
}

func (r *repairReports) Started(*corev1.Node, notice.Notice) {
	r.c.metrics.NodeRepair(metrics.RepairStarted)
}

func (r *repairReports) LeftTo(node *corev1.Node, n notice.Notice, owner string) {
	r.c.metrics.NodeRepair(metrics.RepairLeftTo)
	r.log.Info("node repair left to the system that repairs the node", "node", node.Name, "notice", n.ID, "to", owner)
	r.c.events.RepairLeftTo(events.NodeOf(node), n.Description, owner)
}

func (r *repairReports) Unreadable(node *corev1.Node, err error) {
	r.c.metrics.InvalidRecord()
	r.log.Warn("node repair state unreadable: read as empty", "node", node.Name, "annotation", record.AnnotationRepair, "err", err)
	r.c.events.RepairStateUnreadable(events.NodeOf(node), record.AnnotationRepair, err.Error())
}

// OwnerUnknown says, once per node and failure, that the node's repair waits for EKS to say
// whether it repairs the node: a Warning Event, a metric, a WARN line; a refused permission
// is said as every refused call is (on Lifeboat's pod, on the node, in lifeboat status).
func (r *repairReports) OwnerUnknown(ctx context.Context, node *corev1.Node, n notice.Notice, err error) {
	r.c.metrics.NodeRepair(metrics.RepairOwnerUnknown)
	r.log.Warn("node repair not started: EKS could not say whether node auto repair repairs the node; asked again within a minute",
		"node", node.Name, "notice", n.ID, "nodegroup", node.Labels[nodecondition.LabelEKSNodegroup], "err", err)
	r.c.events.RepairOwnerUnknown(events.NodeOf(node), n.Description, err.Error())
	r.c.notices.denied(ctx, "DescribeNodegroup", err, n, []*corev1.Node{node}, r.log)
}

func (r *repairReports) Restated(node *corev1.Node, k record.ConditionClock) {
	r.c.metrics.ConditionRestated()
	r.log.Info("node condition restated its transition time under the same status: its repair still counts from the first", "node", node.Name,
		"condition", k.Type, "status", k.Status, "since", k.Since, "restated", k.Restated)
	r.c.events.ConditionRestated(events.NodeOf(node), k.Type, k.Status, k.Since, k.Restated)
}

func (r *repairReports) Stale(node *corev1.Node, n notice.Notice, c corev1.NodeCondition, ready time.Time) {
	r.c.metrics.NodeRepair(metrics.RepairStale)
	r.log.Warn("node repair not started: its condition is stale (its agent stopped refreshing it)", "node", node.Name, "notice", n.ID,
		"condition", string(c.Type), "heartbeat", c.LastHeartbeatTime.Time, "readyHeartbeat", ready)
	r.c.events.ConditionStale(events.NodeOf(node), n.Description, string(c.Type), c.LastHeartbeatTime.Time, ready)
}

func (r *repairReports) Recovered(node *corev1.Node, condition string, rebooted time.Time) {
	r.c.metrics.NodeRepair(metrics.RepairRecovered)
	r.log.Info("node condition cleared after the repair's reboot: released without a replacement", "node", node.Name, "condition", condition, "rebooted", rebooted)
	r.c.events.RepairRecovered(events.NodeOf(node), condition, rebooted)
}

func (r *repairReports) Escalated(node *corev1.Node, n notice.Notice, after string) {
	r.c.metrics.NodeRepair(metrics.RepairEscalated)
	r.log.Warn("node repair goes on to replace the node after its reboot", "node", node.Name, "notice", n.ID, "why", after)
	r.c.events.RepairEscalated(events.NodeOf(node), n.Description, after)
}
