// SPDX-License-Identifier: Apache-2.0

package controlleronly

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	"lifeboat.dev/lifeboat/internal/cloud"
)

// ec2API are the SDK calls AWSEC2 makes.
type ec2API interface {
	ec2.DescribeInstancesAPIClient
	DescribeInstanceStatus(ctx context.Context, in *ec2.DescribeInstanceStatusInput, optFns ...func(*ec2.Options)) (*ec2.DescribeInstanceStatusOutput, error)
	DescribeCapacityReservations(ctx context.Context, in *ec2.DescribeCapacityReservationsInput, optFns ...func(*ec2.Options)) (*ec2.DescribeCapacityReservationsOutput, error)
	TerminateInstances(ctx context.Context, in *ec2.TerminateInstancesInput, optFns ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error)
	RebootInstances(ctx context.Context, in *ec2.RebootInstancesInput, optFns ...func(*ec2.Options)) (*ec2.RebootInstancesOutput, error)
}

// AWSEC2 implements cloud.EC2, cloud.Terminator and cloud.Rebooter with aws-sdk-go-v2.
//
// It asks with the instance-id filter rather than InstanceIds: with InstanceIds a single
// unknown id (an instance terminated long ago, a message from another account) fails the
// whole call with InvalidInstanceID.NotFound, whereas a filter just leaves it out.
type AWSEC2 struct {
	client ec2API
	// PageSize is the MaxResults of each request (5 to 1000); 0 lets EC2 choose.
	PageSize int32
}

// NewAWSEC2 uses cfg (see cloud.LoadAWSConfig).
func NewAWSEC2(cfg aws.Config) *AWSEC2 {
	return &AWSEC2{client: ec2.NewFromConfig(cfg)}
}

// DescribeInstances asks for at most cloud.MaxFilterValues ids per request, following NextToken
// through every page.
func (a *AWSEC2) DescribeInstances(ctx context.Context, ids []string) (map[string]cloud.Instance, error) {
	out := make(map[string]cloud.Instance, len(ids))
	ids = uniqueNonEmpty(ids)
	for start := 0; start < len(ids); start += cloud.MaxFilterValues {
		chunk := ids[start:min(start+cloud.MaxFilterValues, len(ids))]
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
				return nil, fmt.Errorf("EC2 DescribeInstances for %d instance(s) (%s): %w", len(chunk), cloud.IDList(chunk), err)
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
func (a *AWSEC2) InstancesInCapacityReservation(ctx context.Context, reservationID string) ([]cloud.Instance, error) {
	in := &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: aws.String("capacity-reservation-id"), Values: []string{reservationID}},
		{Name: aws.String("instance-state-name"), Values: []string{"pending", "running", "stopping"}},
	}}
	if a.PageSize > 0 {
		in.MaxResults = aws.Int32(a.PageSize)
	}
	var out []cloud.Instance
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

func toInstance(i ec2types.Instance) cloud.Instance {
	inst := cloud.Instance{
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

// instanceIDInMessage finds the instance ids EC2 names in an InvalidInstanceID.NotFound
// message ("The instance IDs 'i-1, i-2' do not exist").
var instanceIDInMessage = regexp.MustCompile(`i-[0-9a-f]+`)

// DescribeInstanceStatus asks, in one request, the status of at most cloud.MaxStatusInstances
// running instances (IncludeAllInstances=false: an instance that is not running is left out
// of the answer). A request naming an unknown instance fails with *cloud.UnknownInstancesError.
func (a *AWSEC2) DescribeInstanceStatus(ctx context.Context, ids []string) ([]cloud.InstanceStatus, error) {
	ids = uniqueNonEmpty(ids)
	if len(ids) == 0 {
		return nil, nil
	}
	if len(ids) > cloud.MaxStatusInstances {
		return nil, fmt.Errorf("EC2 DescribeInstanceStatus: %d instances in one request, at most %d", len(ids), cloud.MaxStatusInstances)
	}
	out, err := a.client.DescribeInstanceStatus(ctx, &ec2.DescribeInstanceStatusInput{InstanceIds: ids, IncludeAllInstances: aws.Bool(false)})
	if err != nil {
		var apiErr smithy.APIError
		if errors.As(err, &apiErr) && apiErr.ErrorCode() == "InvalidInstanceID.NotFound" {
			if unknown := instanceIDInMessage.FindAllString(apiErr.ErrorMessage(), -1); len(unknown) > 0 {
				return nil, &cloud.UnknownInstancesError{IDs: unknown, Err: err}
			}
		}
		return nil, fmt.Errorf("EC2 DescribeInstanceStatus for %d instance(s) (%s): %w", len(ids), cloud.IDList(ids), err)
	}
	statuses := make([]cloud.InstanceStatus, 0, len(out.InstanceStatuses))
	for _, s := range out.InstanceStatuses {
		statuses = append(statuses, toInstanceStatus(s))
	}
	return statuses, nil
}

func toInstanceStatus(s ec2types.InstanceStatus) cloud.InstanceStatus {
	st := cloud.InstanceStatus{InstanceID: aws.ToString(s.InstanceId)}
	summary := func(name string, sum *ec2types.InstanceStatusSummary) string {
		if sum == nil {
			return ""
		}
		failedChecks(&st, name, sum.Details)
		return string(sum.Status)
	}
	st.Instance = summary("instance", s.InstanceStatus)
	st.System = summary("system", s.SystemStatus)
	if e := s.AttachedEbsStatus; e != nil {
		st.EBS = string(e.Status)
		for _, d := range e.Details {
			failedCheck(&st, "ebs", string(d.Name), string(d.Status), d.ImpairedSince)
		}
	}
	for _, e := range s.Events {
		st.Events = append(st.Events, cloud.ScheduledEvent{
			ID: aws.ToString(e.InstanceEventId), Code: string(e.Code), Description: aws.ToString(e.Description),
			NotBefore: aws.ToTime(e.NotBefore), NotAfter: aws.ToTime(e.NotAfter),
		})
	}
	return st
}

func failedChecks(s *cloud.InstanceStatus, check string, details []ec2types.InstanceStatusDetails) {
	for _, d := range details {
		failedCheck(s, check, string(d.Name), string(d.Status), d.ImpairedSince)
	}
}

func failedCheck(s *cloud.InstanceStatus, check, name, status string, since *time.Time) {
	if status != "failed" {
		return
	}
	s.Failed = append(s.Failed, check+" "+name)
	if since != nil && (s.ImpairedSince.IsZero() || since.Before(s.ImpairedSince)) {
		s.ImpairedSince = *since
	}
}

// TerminateInstance terminates one instance. A group that holds it sees it terminated and
// replaces it; an instance in no group is simply gone.
func (e *AWSEC2) TerminateInstance(ctx context.Context, instanceID string) error {
	_, err := e.client.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{instanceID}})
	if err != nil {
		return fmt.Errorf("TerminateInstances %s: %w", instanceID, err)
	}
	return nil
}

// RebootInstance asks EC2 to reboot one instance. The instance keeps its id, its volumes and
// its Node; EC2 reboots it within minutes, or stops and starts it if it does not shut down.
func (e *AWSEC2) RebootInstance(ctx context.Context, instanceID string) error {
	_, err := e.client.RebootInstances(ctx, &ec2.RebootInstancesInput{InstanceIds: []string{instanceID}})
	if err != nil {
		return fmt.Errorf("RebootInstances %s: %w", instanceID, err)
	}
	return nil
}

// DescribeCapacityReservation reads one capacity reservation: one DescribeCapacityReservations
// naming its id.
func (a *AWSEC2) DescribeCapacityReservation(ctx context.Context, id string) (cloud.CapacityReservation, error) {
	out, err := a.client.DescribeCapacityReservations(ctx, &ec2.DescribeCapacityReservationsInput{CapacityReservationIds: []string{id}})
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) && strings.HasPrefix(apiErr.ErrorCode(), "InvalidCapacityReservationId.") {
		return cloud.CapacityReservation{}, fmt.Errorf("EC2 DescribeCapacityReservations %s: %w (%s)", id, cloud.ErrReservationNotFound, apiErr.ErrorCode())
	}
	if err != nil {
		return cloud.CapacityReservation{}, fmt.Errorf("EC2 DescribeCapacityReservations %s: %w", id, err)
	}
	for _, r := range out.CapacityReservations {
		if aws.ToString(r.CapacityReservationId) != id {
			continue
		}
		return cloud.CapacityReservation{ID: id, Type: string(r.ReservationType), State: string(r.State),
			InstanceType: aws.ToString(r.InstanceType), EndDate: aws.ToTime(r.EndDate)}, nil
	}
	return cloud.CapacityReservation{}, fmt.Errorf("EC2 DescribeCapacityReservations %s: %w", id, cloud.ErrReservationNotFound)
}
