// SPDX-License-Identifier: Apache-2.0

package events

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
)

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

// ForgedCapacityBlock records, on Lifeboat's own pod, a Capacity Block expiration warning that
// cannot be a real one (EC2 knows no such reservation, or it is not a Capacity Block): there
// may be no Node to tell, and whoever can write to the queue should be looked at.
func (r *Recorder) ForgedCapacityBlock(own Pod, why string) {
	if !r.Enabled() || own.Name == "" {
		return
	}
	r.rec.AnnotatedEventf(own.reference(), maps.Clone(r.annotations), corev1.EventTypeWarning, ReasonCapacityBlockNotDrained, "%s",
		clip("A Capacity Block expiration warning on the queue is not a real one: "+why+"; nothing drained. Check who can send to the queue."))
}
