// SPDX-License-Identifier: Apache-2.0

package cloud

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
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

// EC2 is what Lifeboat needs from the EC2 API.
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

// ec2API are the SDK calls AWSEC2 makes.
type ec2API interface {
	ec2.DescribeInstancesAPIClient
	DescribeInstanceStatus(ctx context.Context, in *ec2.DescribeInstanceStatusInput, optFns ...func(*ec2.Options)) (*ec2.DescribeInstanceStatusOutput, error)
	DescribeCapacityReservations(ctx context.Context, in *ec2.DescribeCapacityReservationsInput, optFns ...func(*ec2.Options)) (*ec2.DescribeCapacityReservationsOutput, error)
	TerminateInstances(ctx context.Context, in *ec2.TerminateInstancesInput, optFns ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error)
	RebootInstances(ctx context.Context, in *ec2.RebootInstancesInput, optFns ...func(*ec2.Options)) (*ec2.RebootInstancesOutput, error)
}

// MaxFilterValues is how many values EC2 accepts in one DescribeInstances filter.
const MaxFilterValues = 200

// AWSEC2 implements EC2 with aws-sdk-go-v2.
//
// It asks with the instance-id filter rather than InstanceIds: with InstanceIds a single
// unknown id (an instance terminated long ago, a message from another account) fails the
// whole call with InvalidInstanceID.NotFound, whereas a filter just leaves it out.
type AWSEC2 struct {
	client ec2API
	// PageSize is the MaxResults of each request (5 to 1000); 0 lets EC2 choose.
	PageSize int32
}

// NewAWSEC2 uses cfg (see LoadAWSConfig).
func NewAWSEC2(cfg aws.Config) *AWSEC2 {
	return &AWSEC2{client: ec2.NewFromConfig(cfg)}
}

// DescribeInstances asks for at most MaxFilterValues ids per request, following NextToken
// through every page.
func (a *AWSEC2) DescribeInstances(ctx context.Context, ids []string) (map[string]Instance, error) {
	out := make(map[string]Instance, len(ids))
	ids = uniqueNonEmpty(ids)
	for start := 0; start < len(ids); start += MaxFilterValues {
		chunk := ids[start:min(start+MaxFilterValues, len(ids))]
		in := &ec2.DescribeInstancesInput{
			Filters: []ec2types.Filter{{Name: aws.String("instance-id"), Values: chunk}},
		}
		if a.PageSize > 0 {
			in.MaxResults = aws.Int32(a.PageSize)
		}
		pages := ec2.NewDescribeInstancesPaginator(a.client, in)
		for pages.HasMorePages() {
			page, err := pages.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("EC2 DescribeInstances for %d instance(s) (%s): %w", len(chunk), describeIDs(chunk), err)
			}
			for _, r := range page.Reservations {
				for _, i := range r.Instances {
					inst := toInstance(i)
					if inst.ID != "" {
						out[inst.ID] = inst
					}
				}
			}
		}
	}
	return out, nil
}

// InstancesInCapacityReservation pages through DescribeInstances filtered by the
// reservation (and by the states an instance that may still run pods is in).
func (a *AWSEC2) InstancesInCapacityReservation(ctx context.Context, reservationID string) ([]Instance, error) {
	in := &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: aws.String("capacity-reservation-id"), Values: []string{reservationID}},
		{Name: aws.String("instance-state-name"), Values: []string{"pending", "running", "stopping"}},
	}}
	if a.PageSize > 0 {
		in.MaxResults = aws.Int32(a.PageSize)
	}
	var out []Instance
	pages := ec2.NewDescribeInstancesPaginator(a.client, in)
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("EC2 DescribeInstances in capacity reservation %s: %w", reservationID, err)
		}
		for _, r := range page.Reservations {
			for _, i := range r.Instances {
				if inst := toInstance(i); inst.ID != "" {
					out = append(out, inst)
				}
			}
		}
	}
	return out, nil
}

func toInstance(i ec2types.Instance) Instance {
	inst := Instance{
		ID:             aws.ToString(i.InstanceId),
		PrivateDNSName: aws.ToString(i.PrivateDnsName),
	}
	for _, ip := range []*string{i.PrivateIpAddress, i.Ipv6Address} {
		if ip := aws.ToString(ip); ip != "" {
			inst.PrivateIPs = append(inst.PrivateIPs, ip)
		}
	}
	if i.State != nil {
		inst.State = string(i.State.Name)
	}
	if len(i.Tags) > 0 {
		inst.Tags = make(map[string]string, len(i.Tags))
		for _, t := range i.Tags {
			inst.Tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
		}
	}
	return inst
}

func uniqueNonEmpty(ids []string) []string {
	seen := make(map[string]bool, len(ids))
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if id != "" && !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// describeIDs names the ids of a request in an error, shortened when there are many.
func describeIDs(ids []string) string {
	const show = 3
	if len(ids) <= show {
		return strings.Join(ids, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(ids[:show], ", "), len(ids)-show)
}
