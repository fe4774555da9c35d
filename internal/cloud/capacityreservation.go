// SPDX-License-Identifier: Apache-2.0

package cloud

import (
	"context"
	"errors"
	"time"
)

// CapacityReservation is what Lifeboat reads of a capacity reservation: enough to tell a
// Capacity Block that is about to end from anything else.
type CapacityReservation struct {
	ID           string
	Type         string // ReservationType: "capacity-block", "default"
	State        string // active, expired, cancelled, scheduled, ...
	InstanceType string
	EndDate      time.Time // zero when EC2 states none (an unlimited reservation)
}

// Capacity reservation facts, as EC2 reports them.
const (
	ReservationTypeCapacityBlock = "capacity-block"
	ReservationStateActive       = "active"
)

// ErrReservationNotFound is DescribeCapacityReservation's answer for an id EC2 does not know
// (or that is not a reservation id at all).
var ErrReservationNotFound = errors.New("no such capacity reservation")

func (e CountedEC2) DescribeCapacityReservation(ctx context.Context, id string) (CapacityReservation, error) {
	out, err := e.EC2.DescribeCapacityReservation(ctx, id)
	e.Calls.AWSCall("DescribeCapacityReservations", err, ErrReservationNotFound)
	return out, err
}
