// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"log/slog"

	"lifeboat.dev/lifeboat/internal/events"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/ownership"
)

// claimReports says, for every Node whose providerID names an instance EC2 describes as
// another node, that its claim was refused: a Warning Event on the claimant, the metric, and
// a log line naming both nodes.
type claimReports struct {
	events  *events.Recorder
	metrics *metrics.Metrics
	log     *slog.Logger
}

func (c *Controller) claimReports() claimReports {
	return claimReports{events: c.events, metrics: c.metrics, log: c.log}
}

func (r claimReports) ClaimRefused(c ownership.Claim) {
	r.metrics.ClaimRefused(metrics.ClaimCheckEC2, string(c.Path))
	r.events.ClaimRefused(events.NodeOf(c.Claimant), c.String()+"; "+consequence(c.Path))
	r.log.Warn("node's claim to an instance refused: EC2 describes the instance as another node",
		"claimant", c.Claimant.Name, "providerID", c.Claimant.Spec.ProviderID, "instance", c.InstanceID,
		"holder", c.Holder, "ec2", c.Described, "path", string(c.Path))
}

// consequence says what the refusal means on each path.
func consequence(p ownership.Path) string {
	switch p {
	case ownership.PathNodeCondition:
		return "the node's condition repairs no node: neither this one nor the instance's"
	case ownership.PathDeadInstance:
		return "the node's pods are not deleted as a dead instance's: it is drained as usual"
	case ownership.PathNodeCleanup:
		return "the node is not deleted for that instance, and hides no other node from the clean-up"
	}
	return "the instance's notices are handled on the node EC2 describes, and nothing is done on this one for them"
}
