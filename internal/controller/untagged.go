// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/events"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/ownership"
)

// untagged is the fate of a notice for this cluster's Node (EC2 describes the instance as the
// Node) whose instance lacks the managed tag or this cluster's tag. It is not acted on, as
// CHECK_TAG_BEFORE_DRAINING asks, but it is not another cluster's either: the node's pods go
// with the instance, so it is said where the operator looks, once an hour per notice: a
// Warning Event on the Node, lifeboat_notices_untagged_total (alerted on), a WARN line, and
// the Node's lifeboat.dev/untagged-notice annotation, which `lifeboat status` shows. The
// message's fate is a foreign notice's.
func (c *Controller) untagged(ctx context.Context, n notice.Notice, v ownership.Verdict, log *slog.Logger) noticeFate {
	if c.firstInHour("untagged/" + n.ID) {
		why := v.Reason + "; " + untaggedFix(c.cfg.ClusterName)
		log.Warn("notice for this cluster's node not acted on: its instance lacks the tag that says it is this cluster's", "notice", n.ID,
			"kind", string(n.Kind), "node", v.Node.Name, "instance", n.InstanceID, "reason", v.Reason)
		c.metrics.NoticeUntagged()
		c.events.NoticeUntagged(events.NodeOf(v.Node), string(n.Kind)+" notice "+n.ID+": "+why)
		c.note(ctx, v.Node, ownership.AnnotationUntagged, n, why, log)
	}
	if c.cfg.DeleteSQSMsgIfNodeNotFound {
		return noticeDone
	}
	return noticeForeign
}

// untaggedFix says how to have such notices acted on.
func untaggedFix(clusterName string) string {
	fix := "tag the instance (its Auto Scaling group's tags, propagated at launch) with MANAGED_TAG"
	if clusterName != "" {
		fix += " and kubernetes.io/cluster/" + clusterName + "=owned"
	}
	return fix + ", or set CHECK_TAG_BEFORE_DRAINING=false to act on this cluster's nodes whatever their tags"
}

// note records on the Node, for `lifeboat status`, a notice the wiring holds up (annotation:
// ownership.AnnotationUntagged, ...); nothing under DRY_RUN.
func (c *Controller) note(ctx context.Context, node *corev1.Node, annotation string, n notice.Notice, why string, log *slog.Logger) {
	if c.cfg.DryRun {
		return
	}
	value := ownership.NoteValue(time.Now(), n.ID, why)
	_, err := nodes.NewWriter(c.client).Apply(ctx, node.Name, node, "record a notice the wiring holds up", func(got *corev1.Node) {
		if got.Annotations == nil {
			got.Annotations = map[string]string{}
		}
		got.Annotations[annotation] = value
	})
	if err != nil {
		log.Warn("could not record on the node a notice the wiring holds up", "node", node.Name, "annotation", annotation, "err", err)
	}
}
