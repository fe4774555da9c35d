// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/events"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/ownership"
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

// reservationNotices resolves warnings that name a capacity reservation (a Capacity Block's
// end) to notices for this cluster's instances in it. Per warning: one
// DescribeCapacityReservations, whose answer decides whether to act and the deadline, then
// one DescribeInstances (paged) for the instances in it, whose answer (tags, private DNS
// names) also serves the ownership checks, which each notice then goes through as any other.
// An instance in the reservation that no Node of this cluster names is another cluster's (a
// reservation serves a whole account) and is left out. A warning EC2 contradicts drains
// nothing, and says so on this cluster's Nodes in the reservation, in the log and in
// lifeboat_queue_messages_ignored_total. ok is false when EC2 could not be asked: the message
// comes back.
func (c *Controller) reservationNotices(ctx context.Context, resolver *ownership.Resolver, reservations []messages.Reservation, log *slog.Logger) (out []notice.Notice, ok bool) {
	ec2 := cloud.CountedEC2{EC2: c.ec2, Calls: c.metrics}
	for _, r := range reservations {
		desc, err := ec2.DescribeCapacityReservation(ctx, r.ID)
		if errors.Is(err, cloud.ErrReservationNotFound) {
			log.Warn("a Capacity Block expiration warning names a reservation EC2 does not know: nothing drained (the message is not a real warning)",
				"reservation", r.ID, "err", err)
			c.metrics.QueueMessageIgnored(messages.IgnoreCapacityBlockExpiration, messages.ReasonReservationAbsent)
			c.events.ForgedCapacityBlock(c.ownPod(), "EC2 knows no capacity reservation "+r.ID)
			continue
		}
		if err != nil {
			log.Warn("cannot read the capacity reservation yet; the message will come back", "reservation", r.ID, "err", err)
			return nil, false
		}
		v := judgeBlock(desc, time.Now())
		mine, ok := c.blockInstances(ctx, resolver, r.ID, log)
		if !ok {
			return nil, false
		}
		if v.reason != "" {
			c.blockNotDrained(r, v, mine, log)
			continue
		}
		r.Deadline, r.EndDate = v.deadline, desc.EndDate
		for _, id := range mine.instances {
			out = append(out, r.Notice(id))
		}
		log.Info("Capacity Block ends: notices for this cluster's instances in it", "reservation", r.ID, "endDate", desc.EndDate,
			"instanceType", desc.InstanceType, "ultraServer", IsUltraServerType(desc.InstanceType), "deadline", v.deadline,
			"instances", mine.total, "ours", len(mine.instances))
		if len(mine.instances) == 0 {
			c.metrics.QueueMessageIgnored(messages.IgnoreCapacityBlockExpiration, messages.ReasonNoInstanceOfOurs)
		}
	}
	return out, true
}

// blockMembers are a reservation's instances this cluster may own, and their Nodes.
type blockMembers struct {
	total     int
	instances []string
	nodes     []events.Node
}

// blockInstances asks EC2 for the reservation's instances and keeps those a Node of this
// cluster names, or whose ownership is not known yet (handleNotice decides, and retries, as
// for any notice).
func (c *Controller) blockInstances(ctx context.Context, resolver *ownership.Resolver, reservation string, log *slog.Logger) (blockMembers, bool) {
	instances, err := c.ec2.InstancesInCapacityReservation(ctx, reservation)
	c.metrics.AWSCall("DescribeInstances", err, nil)
	if err != nil {
		log.Warn("cannot look up the capacity reservation's instances yet; the message will come back", "reservation", reservation, "err", err)
		return blockMembers{}, false
	}
	c.instances.Known(instances)
	m := blockMembers{total: len(instances)}
	for _, in := range instances {
		v, err := resolver.Resolve(ctx, ownership.Subject{Path: ownership.PathCapacityBlock, InstanceID: in.ID})
		if err == nil && v.Node == nil {
			continue
		}
		m.instances = append(m.instances, in.ID)
		if err == nil {
			m.nodes = append(m.nodes, events.NodeOf(v.Node))
		}
	}
	return m, true
}

// blockNotDrained reports a warning EC2 contradicts: an Event on each of this cluster's
// Nodes in the reservation, a log line, a count.
func (c *Controller) blockNotDrained(r messages.Reservation, v blockVerdict, mine blockMembers, log *slog.Logger) {
	level := slog.LevelInfo
	if v.forged {
		level = slog.LevelWarn
	}
	log.Log(context.Background(), level, "Capacity Block expiration warning not acted on: nothing drained", "reservation", r.ID,
		"reason", v.reason, "why", v.why, "nodes", len(mine.nodes))
	c.metrics.QueueMessageIgnored(messages.IgnoreCapacityBlockExpiration, v.reason)
	for _, n := range mine.nodes {
		c.events.CapacityBlockNotDrained(n, v.forged, v.why+": nothing drained")
	}
	if v.forged {
		c.events.ForgedCapacityBlock(c.ownPod(), v.why)
	}
}

// ownPod is Lifeboat's own pod (POD_NAME, NAMESPACE); no name when they are unset.
func (c *Controller) ownPod() events.Pod {
	return events.Pod{Namespace: c.cfg.PodNamespace, Name: c.cfg.PodName}
}
