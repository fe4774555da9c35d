// SPDX-License-Identifier: Apache-2.0

package episode

import (
	"context"
	"log/slog"

	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/record"
	"lifeboat.dev/lifeboat/internal/webhook"
)

// reports tell the world an episode's outcome once: the Events and the webhook are sent after
// the write that claims the outcome (claimOutcome), so notices coalesced into the episode,
// other replicas and restarts report it once.
type reports struct {
	webhook *webhook.Sender
	cfg     *config.Config
	metrics *metrics.Metrics
	log     *slog.Logger
}

// claimOutcome marks the episode's outcome as reported, setting *claimed when this write is
// the one that does it. The webhook and the Event are sent after the write: at most once per
// outcome (a crash between the two loses them rather than sending them twice).
func claimOutcome(outcome string, claimed *bool) nodes.Edit {
	return record.Edit(func(r *record.Record) {
		// A cordon is no outcome to report once the episode drains (a cordon-only notice
		// that joins after the drain).
		*claimed = !r.WasReported(outcome) && !(outcome == record.OutcomeCordoned && r.Phase >= record.PhaseDraining)
		if *claimed {
			r.Reported = append(r.Reported, outcome)
			r.Notified = true // so that an older binary, during a rollout, reports nothing again
		}
	})
}

// notify sends the interruption's webhook. Failures are logged and counted, never retried
// past the sender's own attempts: the node's work is done either way.
func (r *reports) notify(ctx context.Context, n notice.Notice, node *corev1.Node, state string, pods []string) {
	if !r.webhook.Enabled() {
		return
	}
	if r.cfg.DryRun {
		r.log.Info("dry run: would send the interruption webhook", "notice", n.ID, "node", node.Name)
		r.metrics.Action(metrics.ActionWebhook, metrics.ResultDryRun)
		return
	}
	err := r.webhook.Send(ctx, webhook.Notification{
		EventID: n.ID, Kind: string(n.Kind), Monitor: string(n.Source), Description: n.Description, State: state,
		NodeName: node.Name, InstanceID: n.InstanceID, ProviderID: node.Spec.ProviderID,
		InstanceType: node.Labels[corev1.LabelInstanceTypeStable], StartTime: n.StartTime, EndTime: n.EndTime,
		Pods: pods, NodeLabels: node.Labels,
	})
	r.metrics.ActionErr(metrics.ActionWebhook, err)
}
