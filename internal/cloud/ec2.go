// SPDX-License-Identifier: Apache-2.0

package cloud

import (
	"context"
	"fmt"
	"strings"
)

// Instance is what Lifeboat needs to know about one EC2 instance.
type Instance struct {
	ID             string
	PrivateDNSName string
	// PrivateIPs are the instance's primary private addresses (IPv4, and IPv6 when it has
	// one): a Node's InternalIP is one of them.
	PrivateIPs []string
	State      string // EC2 state name: pending, running, shutting-down, ...
	Tags       map[string]string
}

// EC2 is what Lifeboat needs from the EC2 API (controlleronly.AWSEC2 implements it: only the
// controller calls EC2).
type EC2 interface {
	// DescribeInstances returns the instances among ids that EC2 knows, keyed by id.
	// Unknown ids are simply absent from the map; they are not an error.
	DescribeInstances(ctx context.Context, ids []string) (map[string]Instance, error)
	// InstancesInCapacityReservation returns the instances EC2 runs in a capacity reservation
	// (a Capacity Block): one DescribeInstances filtered by capacity-reservation-id, paged.
	InstancesInCapacityReservation(ctx context.Context, reservationID string) ([]Instance, error)
	// DescribeInstanceStatus returns the status checks and scheduled events of at most
	// MaxStatusInstances running instances, in one request.
	DescribeInstanceStatus(ctx context.Context, ids []string) ([]InstanceStatus, error)
	// DescribeCapacityReservation reads one capacity reservation (a Capacity Block's type,
	// state, end date and instance type); an error wrapping ErrReservationNotFound when EC2
	// knows no such reservation.
	DescribeCapacityReservation(ctx context.Context, id string) (CapacityReservation, error)
}

// MaxFilterValues is how many values EC2 accepts in one DescribeInstances filter.
const MaxFilterValues = 200

// IDList names the ids of a request in an error or a log line, shortened when there are many.
func IDList(ids []string) string {
	const show = 3
	if len(ids) <= show {
		return strings.Join(ids, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(ids[:show], ", "), len(ids)-show)
}
