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
	if c.foreignLevel("untagged/"+n.ID) == slog.LevelInfo { // the first time in an hour
		why := v.Reason + "; " + untaggedFix(c.cfg.ClusterName)
		log.Warn("notice for this cluster's node not acted on: its instance lacks the tag that says it is this cluster's", "notice", n.ID,
			"kind", string(n.Kind), "node", v.Node.Name, "instance", n.InstanceID, "reason", v.Reason)
		c.metrics.NoticeUntagged()
		c.events.NoticeUntagged(events.NodeOf(v.Node), string(n.Kind)+" notice "+n.ID+": "+why)
		c.noteUntagged(ctx, v.Node, n, why, log)
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

// noteUntagged records the notice on the Node for `lifeboat status` (nothing under DRY_RUN).
func (c *Controller) noteUntagged(ctx context.Context, node *corev1.Node, n notice.Notice, why string, log *slog.Logger) {
	if c.cfg.DryRun {
		return
	}
	note := ownership.UntaggedNote(time.Now(), n.ID, why)
	_, err := nodes.NewWriter(c.client).Apply(ctx, node.Name, node, "record a notice not acted on for its instance's tags", func(got *corev1.Node) {
		if got.Annotations == nil {
			got.Annotations = map[string]string{}
		}
		got.Annotations[ownership.AnnotationUntagged] = note
	})
	if err != nil {
		log.Warn("could not record the untagged notice on the node", "node", node.Name, "err", err)
	}
}
