// SPDX-License-Identifier: Apache-2.0

package fakeaws

import "time"

// A Capacity Block's end, as EC2 announces it forty minutes ahead: the event names the
// reservation, not its instances. AWS documents the detail-type in two spellings; a builder
// for each.

// CapacityBlockExpirationWarning is EC2's warning, sent at at, that the Capacity Block
// reservation ends forty minutes later (its instances begin to terminate ten minutes after
// the warning).
func CapacityBlockExpirationWarning(reservation string, at time.Time) string {
	return capacityBlockWarning("Capacity Block Expiration Warning", reservation, at)
}

// CapacityBlockReservationExpirationWarning is the same warning with the detail-type's other
// documented spelling.
func CapacityBlockReservationExpirationWarning(reservation string, at time.Time) string {
	return capacityBlockWarning("Capacity Block Reservation Expiration Warning", reservation, at)
}

func capacityBlockWarning(detailType, reservation string, at time.Time) string {
	return envelope(reservation+"-approaching-expiry", "aws.ec2", detailType, at,
		[]string{"arn:aws:ec2:us-east-1:" + Account + ":capacity-reservation/" + reservation},
		map[string]string{"capacity-reservation-id": reservation, "end-date": at.Add(40 * time.Minute).UTC().Format(time.RFC3339)})
}
