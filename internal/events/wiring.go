// SPDX-License-Identifier: Apache-2.0

package events

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
)

// ReasonAWSPermissionDenied is on Lifeboat's own pod and on the Node a refused AWS call blocks.
const ReasonAWSPermissionDenied = "AWSPermissionDenied"

// AWSPermissionDenied records, on Lifeboat's own pod, that AWS refused a call for want of
// permission: what it blocks waits and is retried until the permission is granted.
func (r *Recorder) AWSPermissionDenied(own Pod, why string) {
	if !r.Enabled() || own.Name == "" {
		return
	}
	r.rec.AnnotatedEventf(own.reference(), maps.Clone(r.annotations), corev1.EventTypeWarning, ReasonAWSPermissionDenied, "%s",
		clip("AWS refused a call Lifeboat needs: "+why))
}

// AWSPermissionDeniedOn records, on the Node a refused AWS call blocks, that its notice waits
// for the permission.
func (r *Recorder) AWSPermissionDeniedOn(node Node, why string) {
	r.emit(node, corev1.EventTypeWarning, ReasonAWSPermissionDenied, clip("A notice for this node waits: "+why))
}

// ReasonAWSSetupProblem is on Lifeboat's own pod when the AWS set-up that feeds its queue is
// wrong (a rule deleted or disabled, a queue policy that refuses EventBridge).
const ReasonAWSSetupProblem = "AWSSetupProblem"

// AWSSetupProblem records, on Lifeboat's own pod, something wrong with the AWS set-up that
// feeds the queue: notices it should carry may never arrive.
func (r *Recorder) AWSSetupProblem(own Pod, what string) {
	if !r.Enabled() || own.Name == "" {
		return
	}
	r.rec.AnnotatedEventf(own.reference(), maps.Clone(r.annotations), corev1.EventTypeWarning, ReasonAWSSetupProblem, "%s",
		clip("The AWS set-up that feeds Lifeboat's queue is wrong, and notices may never arrive: "+what))
}
