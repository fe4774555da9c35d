// SPDX-License-Identifier: Apache-2.0

package events

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Reasons of a retained instance's Events (ABANDON_LIFECYCLE_ACTION_ON_INCOMPLETE_DRAIN).
const (
	ReasonInstanceRetained  = "InstanceRetained"           // the hook was abandoned; the group keeps the instance while the drain goes on
	ReasonRetainedTerminate = "RetainedInstanceTerminated" // drained: Lifeboat terminated the retained instance
	ReasonRetentionExpired  = "RetainedDrainTimedOut"      // RETAINED_DRAIN_TIMEOUT passed: Lifeboat stopped, the instance stays retained
)

// InstanceRetained records that the node's drain could not finish before the lifecycle
// action of hook expired, so the action was completed with ABANDON and the group retains the
// instance: the drain goes on until until, then the instance is terminated once empty.
func (r *Recorder) InstanceRetained(node Node, hook, group, why string, until time.Time) {
	r.emit(node, corev1.EventTypeWarning, ReasonInstanceRetained, clip(fmt.Sprintf(
		"The drain could not finish before the lifecycle action of hook %s expired (%s): completed it with ABANDON, and group %s retains the instance. "+
			"Lifeboat goes on draining with no deadline and terminates the instance once the node is empty, until %s.",
		hook, why, group, until.UTC().Format(time.RFC3339))))
}

// RetainedTerminated records that the retained instance, drained, was terminated by Lifeboat.
func (r *Recorder) RetainedTerminated(node Node, instanceID, group string, retainedFor time.Duration) {
	r.emit(node, corev1.EventTypeNormal, ReasonRetainedTerminate, clip(fmt.Sprintf(
		"The node is drained: terminated instance %s in group %s (TerminateInstanceInAutoScalingGroup) after %s retained",
		instanceID, group, retainedFor.Round(time.Second))))
}

// RetentionExpired records that the drain of the retained instance did not finish within
// RETAINED_DRAIN_TIMEOUT: Lifeboat stops, and the instance stays retained with what is left.
func (r *Recorder) RetentionExpired(node Node, instanceID, group, left string) {
	r.emit(node, corev1.EventTypeWarning, ReasonRetentionExpired, clip(fmt.Sprintf(
		"RETAINED_DRAIN_TIMEOUT passed and the node is not empty (%s): Lifeboat stops; instance %s stays retained in group %s until it is terminated by hand (TerminateInstanceInAutoScalingGroup) or the node is uncordoned",
		left, instanceID, group)))
}
