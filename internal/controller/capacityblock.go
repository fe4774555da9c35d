// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"log/slog"

	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/ownership"
	"lifeboat.dev/lifeboat/internal/source/sqs/messages"
)

// reservationNotices resolves warnings that name a capacity reservation (a Capacity Block's
// end) to notices for this cluster's instances in it: one DescribeInstances per warning,
// whose answer (tags, private DNS names) also serves the ownership checks, which each notice
// then goes through as any other. An instance in the reservation that no Node of this
// cluster names is another cluster's (a reservation serves a whole account) and is left out
// without keeping the message for it. ok is false when EC2 could not be asked: the message
// comes back.
func (c *Controller) reservationNotices(ctx context.Context, resolver *ownership.Resolver, reservations []messages.Reservation, log *slog.Logger) (out []notice.Notice, ok bool) {
	for _, r := range reservations {
		instances, err := c.ec2.InstancesInCapacityReservation(ctx, r.ID)
		c.metrics.AWSCall("DescribeInstances", err, nil)
		if err != nil {
			log.Warn("cannot look up the capacity reservation's instances yet; the message will come back", "reservation", r.ID, "err", err)
			return nil, false
		}
		c.instances.Known(instances)
		var others int
		for _, in := range instances {
			v, err := resolver.Resolve(ctx, in.ID)
			if err == nil && v.Node == nil {
				others++
				continue
			}
			// An instance whose Node is here, or whose ownership is not known yet, is taken:
			// handleNotice decides (and retries) as for any notice.
			out = append(out, r.Notice(in.ID))
		}
		log.Info("capacity reservation ends: notices for this cluster's instances in it", "reservation", r.ID,
			"deadline", r.Deadline, "instances", len(instances), "ours", len(instances)-others, "others", others)
	}
	return out, true
}
