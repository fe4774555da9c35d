// SPDX-License-Identifier: Apache-2.0

package cloud

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/smithy-go"
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

// DescribeCapacityReservation reads one capacity reservation: one DescribeCapacityReservations
// naming its id.
func (a *AWSEC2) DescribeCapacityReservation(ctx context.Context, id string) (CapacityReservation, error) {
	out, err := a.client.DescribeCapacityReservations(ctx, &ec2.DescribeCapacityReservationsInput{CapacityReservationIds: []string{id}})
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) && strings.HasPrefix(apiErr.ErrorCode(), "InvalidCapacityReservationId.") {
		return CapacityReservation{}, fmt.Errorf("EC2 DescribeCapacityReservations %s: %w (%s)", id, ErrReservationNotFound, apiErr.ErrorCode())
	}
	if err != nil {
		return CapacityReservation{}, fmt.Errorf("EC2 DescribeCapacityReservations %s: %w", id, err)
	}
	for _, r := range out.CapacityReservations {
		if aws.ToString(r.CapacityReservationId) != id {
			continue
		}
		return CapacityReservation{ID: id, Type: string(r.ReservationType), State: string(r.State),
			InstanceType: aws.ToString(r.InstanceType), EndDate: aws.ToTime(r.EndDate)}, nil
	}
	return CapacityReservation{}, fmt.Errorf("EC2 DescribeCapacityReservations %s: %w", id, ErrReservationNotFound)
}

func (e CountedEC2) DescribeCapacityReservation(ctx context.Context, id string) (CapacityReservation, error) {
	out, err := e.EC2.DescribeCapacityReservation(ctx, id)
	e.Calls.AWSCall("DescribeCapacityReservations", err, ErrReservationNotFound)
	return out, err
}
