// SPDX-License-Identifier: Apache-2.0

package events

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Reasons of node health's Events (ENABLE_NODE_REPAIR and the fast path for dead instances).
const (
	ReasonNodeRepair            = "NodeRepair"               // a node's condition held long enough: the repair's notice
	ReasonRepairInstanceNoGroup = "RepairInstanceNoGroup"    // the drained instance is in no Auto Scaling group: nothing replaces it
	ReasonRepairMarkedUnhealthy = "RepairMarkedUnhealthy"    // the drained instance was marked Unhealthy in its group
	ReasonRepairTerminated      = "RepairInstanceTerminated" // the drained instance was terminated (NODE_REPAIR_ACTION=terminate)
	ReasonRepairHeld            = "NodeRepairHeld"           // the breaker keeps the node's due repair from starting
	ReasonRepairVetoed          = "NodeRepairVetoed"         // the node carries lifeboat.dev/node-repair=disabled
)

// RepairHeld records that the node's repair came due (why) but does not start while the
// breaker is open (reason); it starts once the breaker closes.
func (r *Recorder) RepairHeld(node Node, why, reason string) {
	r.emit(node, corev1.EventTypeWarning, ReasonRepairHeld, clip(fmt.Sprintf(
		"Node repair is due (%s) but held: the repair breaker is open (%s); it starts once the breaker closes", why, reason)))
}

// RepairVetoed records that the node's repair came due but an operator vetoed repairs of it.
func (r *Recorder) RepairVetoed(node Node, why, annotation string) {
	r.emit(node, corev1.EventTypeNormal, ReasonRepairVetoed, clip(fmt.Sprintf(
		"Node repair is due (%s) but not started: the node carries %s", why, annotation)))
}

// RepairNoGroup records that a drained node's instance is in no Auto Scaling group, so
// marking it Unhealthy would replace nothing: it stays drained and cordoned.
func (r *Recorder) RepairNoGroup(node Node, instanceID, why string) {
	r.emit(node, corev1.EventTypeWarning, ReasonRepairInstanceNoGroup, clip(fmt.Sprintf(
		"Instance %s (%s) is in no Auto Scaling group: nothing replaces it, so it is not marked Unhealthy; the node stays drained and cordoned (NODE_REPAIR_ACTION=terminate terminates such instances)",
		instanceID, why)))
}

// RepairMarkedUnhealthy records that a drained node's instance was marked Unhealthy in its
// group, which replaces it.
func (r *Recorder) RepairMarkedUnhealthy(node Node, instanceID, group, why string) {
	r.emit(node, corev1.EventTypeNormal, ReasonRepairMarkedUnhealthy, clip(fmt.Sprintf(
		"The node is drained (%s): marked instance %s Unhealthy in Auto Scaling group %s, which replaces it", why, instanceID, group)))
}

// RepairTerminated records that a drained node's instance was terminated.
func (r *Recorder) RepairTerminated(node Node, instanceID, why string) {
	r.emit(node, corev1.EventTypeNormal, ReasonRepairTerminated, clip(fmt.Sprintf(
		"The node is drained (%s): terminated instance %s (TerminateInstances)", why, instanceID)))
}

// ReasonDeadInstance is the fast path for a dead instance: its pods deleted with grace 0.
const ReasonDeadInstance = "DeadInstanceFastPath"

// DeadInstance records that the node's instance is dead (why), so its pods are deleted with
// grace 0, with no eviction, no budget wait and no wait for its volumes.
func (r *Recorder) DeadInstance(node Node, why string) {
	r.emit(node, corev1.EventTypeWarning, ReasonDeadInstance, clip(
		"The node's instance is dead ("+why+"): its pods are deleted with grace 0, without eviction or PodDisruptionBudget, and volume waits are skipped; "+
			"their controllers recreate them elsewhere and the attach-detach controller forces their volumes off"))
}

// Reasons of a repair's reboot step (a policy whose action is reboot).
const (
	ReasonRepairRebooted     = "NodeRepairRebooted"     // the drained node's instance was rebooted
	ReasonRepairRebootFailed = "NodeRepairRebootFailed" // the reboot could not be asked for: the node is replaced
	ReasonRepairRecovered    = "NodeRepairRecovered"    // the condition cleared after the reboot: no replacement
	ReasonRepairEscalated    = "NodeRepairEscalated"    // the condition did not clear after the reboot: replaced
)

// RepairRebooted records that the drained node's instance was rebooted for its repair (why);
// it is replaced if its condition has not cleared after wait.
func (r *Recorder) RepairRebooted(node Node, instanceID, why string, wait time.Duration) {
	r.emit(node, corev1.EventTypeNormal, ReasonRepairRebooted, clip(fmt.Sprintf(
		"The node is drained (%s): rebooted instance %s (RebootInstances); it is replaced if its condition has not cleared %s after the reboot", why, instanceID, wait)))
}

// RepairRebootFailed records that the repair's reboot could not be asked for (err): the node
// goes to the next step, its replacement.
func (r *Recorder) RepairRebootFailed(node Node, instanceID, why, err string) {
	r.emit(node, corev1.EventTypeWarning, ReasonRepairRebootFailed, clip(fmt.Sprintf(
		"The node is drained (%s) but instance %s could not be rebooted (%s): it is replaced instead", why, instanceID, err)))
}

// RepairRecovered records that the node's condition cleared after its reboot: it is released
// without a replacement.
func (r *Recorder) RepairRecovered(node Node, condition string, rebooted time.Time) {
	r.emit(node, corev1.EventTypeNormal, ReasonRepairRecovered, clip(fmt.Sprintf(
		"Node condition %s cleared after the repair's reboot at %s: the node is released without a replacement", condition, rebooted.UTC().Format(time.RFC3339))))
}

// RepairEscalated records that the node's condition did not clear after its reboot (or the
// reboot could not be made): the repair goes on to replace the node.
func (r *Recorder) RepairEscalated(node Node, why, after string) {
	r.emit(node, corev1.EventTypeWarning, ReasonRepairEscalated, clip(fmt.Sprintf(
		"Node repair goes on to replace the node (%s): %s", why, after)))
}

// Reasons of conditions node repair does not take at their word.
const (
	ReasonConditionRestated = "NodeConditionRestated" // a condition restated its transition time under the same status
	ReasonConditionStale    = "NodeConditionStale"    // a due condition its agent stopped refreshing
)

// ConditionRestated records that the node's condition typ restated its transition time (at)
// without a change of status: its repair's wait still counts from since.
func (r *Recorder) ConditionRestated(node Node, typ, status string, since, at time.Time) {
	r.emit(node, corev1.EventTypeNormal, ReasonConditionRestated, clip(fmt.Sprintf(
		"Node condition %s restated its transition time (%s) while it stayed %s: a repair still counts from %s, when it first took that status",
		typ, at.UTC().Format(time.RFC3339), status, since.UTC().Format(time.RFC3339))))
}

// ConditionStale records that the node's due repair (why) does not start: its condition typ
// was last refreshed at heartbeat, long before the kubelet's Ready heartbeat (ready).
func (r *Recorder) ConditionStale(node Node, why, typ string, heartbeat, ready time.Time) {
	r.emit(node, corev1.EventTypeWarning, ReasonConditionStale, clip(fmt.Sprintf(
		"Node repair is due (%s) but not started: condition %s was last refreshed at %s, %s before the kubelet's Ready heartbeat; its agent stopped refreshing it, so it may have latched. It is repaired if its agent refreshes it again",
		why, typ, heartbeat.UTC().Format(time.RFC3339), ready.Sub(heartbeat).Round(time.Second))))
}

// ReasonRepairStateUnreadable is a node whose repair state annotation does not read.
const ReasonRepairStateUnreadable = "NodeRepairStateUnreadable"

// RepairStateUnreadable records that what node repair remembers of the node (annotation)
// does not read (why): it is read as empty, and replaced at its next write.
func (r *Recorder) RepairStateUnreadable(node Node, annotation, why string) {
	r.emit(node, corev1.EventTypeWarning, ReasonRepairStateUnreadable, clip(fmt.Sprintf(
		"Lifeboat cannot read annotation %s (%s): node repair reads it as empty (no repair start, kept clock or reboot step) and replaces it at its next write", annotation, why)))
}

// ReasonRepairLeftTo is a due repair left to the system that repairs the node.
const ReasonRepairLeftTo = "NodeRepairLeftToOwner"

// RepairLeftTo records that the node's repair came due (why) but is left to owner, which
// repairs the node itself.
func (r *Recorder) RepairLeftTo(node Node, why, owner string) {
	r.emit(node, corev1.EventTypeNormal, ReasonRepairLeftTo, clip(fmt.Sprintf(
		"Node repair is due (%s) but left to %s, which repairs this node itself", why, owner)))
}

// ReasonRepairOwnerUnknown is a due repair not started because whether EKS node auto repair
// repairs the node could not be learned.
const ReasonRepairOwnerUnknown = "NodeRepairOwnerUnknown"

// RepairOwnerUnknown records that the node's repair came due (why) but does not start now:
// EKS could not say whether the node's managed node group repairs it (err).
func (r *Recorder) RepairOwnerUnknown(node Node, why, err string) {
	r.emit(node, corev1.EventTypeWarning, ReasonRepairOwnerUnknown, clip(fmt.Sprintf(
		"Node repair is due (%s) but not started: EKS could not say whether node auto repair repairs this node (%s), and a node is never repaired by both. EKS is asked again within a minute", why, err)))
}

// Reasons of DELETE_NODE_AFTER_TERMINATION.
const (
	ReasonNodeDeleted       = "NodeDeleted"       // the Node of a terminated instance was deleted
	ReasonNodeDeleteRefused = "NodeDeleteRefused" // EC2 does not describe the instance as this Node
)

// NodeDeleted records that the Node was deleted: its instance is terminated (why).
func (r *Recorder) NodeDeleted(node Node, why string) {
	r.emit(node, corev1.EventTypeNormal, ReasonNodeDeleted, clip("Deleted the Node: "+why))
}

// NodeDeleteRefused records that the Node of a terminated instance was kept: EC2 did not give
// its name or addresses for that instance.
func (r *Recorder) NodeDeleteRefused(node Node, why string) {
	r.emit(node, corev1.EventTypeWarning, ReasonNodeDeleteRefused, clip("Not deleting the Node: "+why))
}
