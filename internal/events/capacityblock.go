package events

import corev1 "k8s.io/api/core/v1"

// Reasons of a Capacity Block expiration warning that EC2 contradicts, and of the sweep of
// instances Auto Scaling retained.
const (
	ReasonCapacityBlockNotDrained = "CapacityBlockNotDrained" // EC2 says the warning does not hold: nothing drained
	ReasonRetainedInstanceBusy    = "RetainedInstanceBusy"    // Auto Scaling retains the instance, and its node still runs pods
)

// CapacityBlockNotDrained records that a Capacity Block expiration warning naming the node's
// instance's reservation was not acted on, because EC2 describes the reservation otherwise
// (extended, not a Capacity Block, not active). forged: the warning cannot be a real one (a
// Warning Event); otherwise it is stale (Normal).
func (r *Recorder) CapacityBlockNotDrained(node Node, forged bool, why string) {
	kind := corev1.EventTypeNormal
	if forged {
		kind = corev1.EventTypeWarning
	}
	r.emit(node, kind, ReasonCapacityBlockNotDrained, clip("A Capacity Block expiration warning was not acted on: "+why))
}

// RetainedInstanceBusy records that Auto Scaling retains the node's instance (a termination
// hook timed out or was abandoned) while the node still runs pods: Lifeboat does not
// terminate it.
func (r *Recorder) RetainedInstanceBusy(node Node, why string) {
	r.emit(node, corev1.EventTypeWarning, ReasonRetainedInstanceBusy, clip(why))
}
