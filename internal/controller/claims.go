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

func (r claimReports) ClaimRefused(c ownership.Claim) {
	r.metrics.ClaimRefused(metrics.ClaimCheckEC2)
	r.events.ClaimRefused(events.NodeOf(c.Claimant), c.String()+"; its notices are handled on the node EC2 describes, and nothing is done on this one")
	r.log.Warn("node's claim to an instance refused: EC2 describes the instance as another node",
		"claimant", c.Claimant.Name, "providerID", c.Claimant.Spec.ProviderID, "instance", c.InstanceID,
		"holder", c.Holder, "ec2", c.Described)
}
