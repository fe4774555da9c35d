// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/events"
	"lifeboat.dev/lifeboat/internal/source/sqs/messages"
)

// A Capacity Block expiration warning is not trusted as sent: it names a reservation, and
// anyone who can write to the queue can name any reservation. EC2 is asked what the
// reservation is (DescribeCapacityReservations) before anything drains, and the deadline
// comes from EC2's end date, not from the message.
const (
	// blockWarningAhead is how long before its end EC2 warns that a Capacity Block ends, and
	// blockWindowSlack the delivery delay and clock skew allowed on top: a block that ends
	// later than that was extended after the warning was sent (a block can be extended until
	// 35 minutes before its end).
	blockWarningAhead = 40 * time.Minute
	blockWindowSlack  = 5 * time.Minute
	// EC2 begins to terminate a Capacity Block's instances 30 minutes before its end; an
	// UltraServer block's instances must be gone 60 minutes before it.
	blockTerminateBefore       = 30 * time.Minute
	ultraServerTerminateBefore = 60 * time.Minute
)

// ultraServerFamilies are the instance families AWS sells only as UltraServers (instances
// joined by an accelerator interconnect: NVLink, NeuronLink), whose Capacity Blocks end 60
// minutes early: P6e-GB200, P6e-GB300 and Trn2 UltraServers.
var ultraServerFamilies = []string{"p6e-gb200", "p6e-gb300", "trn2u"}

// IsUltraServerType tells an UltraServer instance type (p6e-gb200.36xlarge, trn2u.48xlarge)
// by its family.
func IsUltraServerType(instanceType string) bool {
	family, _, _ := strings.Cut(instanceType, ".")
	return slices.Contains(ultraServerFamilies, family)
}

// blockVerdict is what EC2's description of a reservation says about a warning.
type blockVerdict struct {
	deadline time.Time // when the block's instances must be gone; zero when not acted on
	reason   string    // messages.Reason* when not acted on
	forged   bool      // the warning cannot be a real one
	why      string
}

// judgeBlock decides from EC2's description of the reservation, at now, whether its
// expiration warning holds: a Capacity Block, active, ending within the warning's window.
func judgeBlock(r cloud.CapacityReservation, now time.Time) blockVerdict {
	switch {
	case r.Type != cloud.ReservationTypeCapacityBlock:
		return blockVerdict{reason: messages.ReasonNotCapacityBlock, forged: true,
			why: fmt.Sprintf("EC2 describes reservation %s as a %q reservation, not a Capacity Block", r.ID, r.Type)}
	case r.State != cloud.ReservationStateActive:
		// A late copy of a real warning, or a warning for a block that never started.
		return blockVerdict{reason: messages.ReasonBlockNotActive,
			why: fmt.Sprintf("EC2 describes Capacity Block %s as %s, not active", r.ID, r.State)}
	case r.EndDate.IsZero():
		return blockVerdict{reason: messages.ReasonNotCapacityBlock, forged: true,
			why: fmt.Sprintf("EC2 states no end date for Capacity Block %s", r.ID)}
	case r.EndDate.After(now.Add(blockWarningAhead + blockWindowSlack)):
		return blockVerdict{reason: messages.ReasonBlockExtended,
			why: fmt.Sprintf("Capacity Block %s now ends at %s, later than the warning's window (it was extended)", r.ID, r.EndDate.UTC().Format(time.RFC3339))}
	}
	before := blockTerminateBefore
	if IsUltraServerType(r.InstanceType) {
		before = ultraServerTerminateBefore
	}
	return blockVerdict{deadline: r.EndDate.Add(-before)}
}

// blockMembers are a reservation's instances this cluster may own, and their Nodes.
type blockMembers struct {
	total     int
	instances []string
	nodes     []events.Node
}

// ownPod is Lifeboat's own pod (POD_NAME, NAMESPACE); no name when they are unset.
func (c *Controller) ownPod() events.Pod {
	return events.Pod{Namespace: c.cfg.PodNamespace, Name: c.cfg.PodName}
}
