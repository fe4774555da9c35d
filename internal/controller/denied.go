// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"log/slog"

	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/events"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/ownership"
)

// denied says, where it blocks, that AWS refused operation for want of permission: a Warning
// Event on Lifeboat's own pod naming the IAM action (once an hour per action), one on each
// Node the notice names (once an hour per notice), and a WARN line. The call is counted by
// metrics.AWSCall (lifeboat_aws_permission_denied_total), which the LifeboatAWSPermissionDenied
// alert reads, and `lifeboat status` shows the pod's Event on its first line. The notice is
// kept and retried: it is acted on once the permission is granted. Any other error says
// nothing here.
func (c *Controller) denied(ctx context.Context, operation string, err error, n notice.Notice, blocked []*corev1.Node, log *slog.Logger) {
	code, ok := cloud.Denied(err)
	if !ok {
		return
	}
	action := cloud.IAMAction(operation)
	why := "AWS answered " + code + " to " + operation + ": grant " + action + " to Lifeboat's IAM role (deploy/aws)"
	if c.firstInHour("denied/" + action) {
		log.Warn("AWS refused a call for want of permission: notices wait and are retried until it is granted",
			"operation", operation, "iamAction", action, "code", code, "notice", n.ID)
		c.events.AWSPermissionDenied(c.ownPod(), why+"; notices that need it wait and are retried")
	}
	if c.firstInHour("denied/" + action + "/" + n.ID) {
		for _, node := range blocked {
			c.events.AWSPermissionDeniedOn(events.NodeOf(node), string(n.Kind)+" notice "+n.ID+" for instance "+n.InstanceID+": "+why)
			c.note(ctx, node, ownership.AnnotationDenied, n, why, log)
		}
	}
}
