// SPDX-License-Identifier: Apache-2.0

package metrics

import "github.com/prometheus/client_golang/prometheus"

// ActionTerminateInstance is TerminateInstances on a repaired node's instance
// (NODE_REPAIR_ACTION=terminate), counted by lifeboat_actions_total.
const ActionTerminateInstance = "terminate_instance"

// ActionRebootInstance is RebootInstances on a repaired node's instance (a policy's reboot
// step), counted by lifeboat_actions_total.
const ActionRebootInstance = "reboot_instance"

// Outcomes of a repair that came due (lifeboat_node_repairs_total).
const (
	RepairStarted = "started"       // handed to intake: recorded on its Node
	RepairHeld    = "held"          // the breaker kept it from starting (it starts once the breaker closes)
	RepairVetoed  = "vetoed"        // the node carries lifeboat.dev/node-repair=disabled
	RepairLeftTo  = "left_to_owner" // Karpenter or EKS node auto repair repairs the node
	RepairStale   = "stale"         // its condition's agent stopped refreshing it (NODE_REPAIR_STALE_AFTER)
	// RepairOwnerUnknown: EKS could not say whether its node auto repair repairs the node
	// (NODE_REPAIR_EKS_LOOKUP): not started now, looked at again.
	RepairOwnerUnknown = "owner_unknown"
	// Outcomes of a repair's reboot step.
	RepairRecovered = "recovered" // the condition cleared after the reboot: released without a replacement
	RepairEscalated = "escalated" // the condition did not clear after the reboot (or it failed): replaced
)

// Causes of an open breaker (lifeboat_node_repair_breaker_open).
var repairBreakerCauses = []string{"paused", "unhealthy_share", "group_unhealthy_share", "max_parallel", "max_per_hour"}

// nodeRepairMetrics are the controller's node repairs (ENABLE_NODE_REPAIR).
type nodeRepairMetrics struct {
	repairs   *prometheus.CounterVec
	breaker   *prometheus.GaugeVec
	unhealthy prometheus.Gauge
	running   prometheus.Gauge
	started   prometheus.Gauge
	restated  prometheus.Counter
	dead      prometheus.Counter
	cleanup   *prometheus.CounterVec
}

func newNodeRepairMetrics(reg *prometheus.Registry) *nodeRepairMetrics {
	r := &nodeRepairMetrics{
		repairs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lifeboat_node_repairs_total", Help: "Node repairs that came due, by outcome: started (recorded on the Node), held (a breaker kept it from starting; counted once per node each time a breaker holds it), vetoed (the node carries lifeboat.dev/node-repair=disabled; once per node and failure), left_to_owner (Karpenter or EKS node auto repair repairs the node; once per node and failure), owner_unknown (whether EKS node auto repair repairs the node could not be learned from EKS, so it is not repaired for now; once per node and failure), stale (its condition was last refreshed NODE_REPAIR_STALE_AFTER before the node's Ready heartbeat, so it is not repaired; once per node, condition and transition); after a policy's reboot, recovered (the condition cleared: no replacement) or escalated (it did not clear within NODE_REPAIR_REBOOT_WAIT, or the reboot failed: replaced).",
		}, []string{"outcome"}),
		breaker: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "lifeboat_node_repair_breaker_open", Help: "1 while a node repair breaker holds new repairs, by cause (paused: NODE_REPAIR_PAUSED; unhealthy_share: more of the cluster's nodes unhealthy than NODE_REPAIR_MAX_UNHEALTHY_PERCENT allows; group_unhealthy_share: the same of some node group's, while the cluster's breaker is closed; max_parallel: NODE_REPAIR_MAX_PARALLEL repairs running; max_per_hour: NODE_REPAIR_MAX_PER_HOUR repairs started in the last hour); 0 otherwise. Read when a repair comes due; one cause at a time.",
		}, []string{"cause"}),
		unhealthy: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "lifeboat_node_repair_unhealthy_nodes", Help: "Nodes with a condition a repair policy (NODE_REPAIR_POLICIES, NODE_REPAIR_CONDITIONS) repairs, however long, when a repair last came due.",
		}),
		running: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "lifeboat_node_repairs_running", Help: "Repairs recorded on their Node and not finished, when a repair last came due.",
		}),
		restated: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lifeboat_node_condition_restated_total", Help: "Node conditions that restated their lastTransitionTime without a change of status (a new reason, a restart of their agent): node repair's wait still counts from the first transition. Once per restatement.",
		}),
		started: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "lifeboat_node_repairs_started_last_hour", Help: "Repairs started within the hour before a repair last came due (NODE_REPAIR_MAX_PER_HOUR bounds them).",
		}),
	}
	r.dead = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "lifeboat_dead_instance_fast_path_total",
		Help: "Drains of nodes whose instance was dead (Ready Unknown and EC2 stopped, stopping, shutting down or terminated; or, with DEAD_INSTANCE_FAST_PATH_UNREACHABLE, merely unreachable): pods deleted with grace 0, no eviction, no budget or volume wait.",
	})
	r.cleanup = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "lifeboat_node_cleanup_total",
		Help: "DELETE_NODE_AFTER_TERMINATION: Nodes of terminated instances deleted, and refused (EC2 does not describe the instance as the Node; once per node and instance).",
	}, []string{"result"})
	each([]string{"deleted", "refused"}, func(v string) { r.cleanup.WithLabelValues(v) })
	reg.MustRegister(r.repairs, r.breaker, r.unhealthy, r.running, r.started, r.restated, r.dead, r.cleanup)
	each([]string{RepairStarted, RepairHeld, RepairVetoed, RepairLeftTo, RepairOwnerUnknown, RepairStale, RepairRecovered, RepairEscalated}, func(o string) { r.repairs.WithLabelValues(o) })
	each(repairBreakerCauses, func(c string) { r.breaker.WithLabelValues(c) })
	return r
}

// NodeRepair counts a repair that came due, by outcome.
func (m *Metrics) NodeRepair(outcome string) {
	if m == nil {
		return
	}
	m.nodeRepair.repairs.WithLabelValues(outcome).Inc()
}

// RepairBreaker records the breakers' state: cause is "" when none is open.
func (m *Metrics) RepairBreaker(cause string, unhealthy, running, started int) {
	if m == nil {
		return
	}
	for _, c := range repairBreakerCauses {
		v := 0.0
		if c == cause {
			v = 1
		}
		m.nodeRepair.breaker.WithLabelValues(c).Set(v)
	}
	m.nodeRepair.unhealthy.Set(float64(unhealthy))
	m.nodeRepair.running.Set(float64(running))
	m.nodeRepair.started.Set(float64(started))
}

// ConditionRestated counts a condition that restated its transition time under the same status.
func (m *Metrics) ConditionRestated() {
	if m == nil {
		return
	}
	m.nodeRepair.restated.Inc()
}

// DeadInstance counts a drain that took the fast path for a dead instance.
func (m *Metrics) DeadInstance() {
	if m == nil {
		return
	}
	m.nodeRepair.dead.Inc()
}

// NodeCleanup counts a Node deleted or refused by DELETE_NODE_AFTER_TERMINATION.
func (m *Metrics) NodeCleanup(result string) {
	if m == nil {
		return
	}
	m.nodeRepair.cleanup.WithLabelValues(result).Inc()
}
