// SPDX-License-Identifier: Apache-2.0

package cloud

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
)

// MaxStatusInstances is how many instance ids EC2 accepts in one DescribeInstanceStatus
// request.
const MaxStatusInstances = 100

// InstanceStatus is what DescribeInstanceStatus says of one running instance.
type InstanceStatus struct {
	InstanceID string
	// Instance, System and EBS are the summaries of the instance, system and attached-EBS
	// status checks: ok, impaired, insufficient-data, not-applicable or initializing.
	Instance, System, EBS string
	// Failed names the checks whose detail is failed ("instance reachability", "ebs
	// reachability", ...).
	Failed []string
	// ImpairedSince is the earliest time a failed check says it began failing; zero when none
	// says.
	ImpairedSince time.Time
	// Events are the scheduled events EC2 lists for the instance.
	Events []ScheduledEvent
}

// Impaired reports whether a status check of the instance fails: the instance or system
// status is impaired, or the attached EBS status is impaired or one of its checks failed.
func (s InstanceStatus) Impaired() bool {
	return s.Instance == "impaired" || s.System == "impaired" || s.EBS == "impaired" || len(s.Failed) > 0
}

// ScheduledEvent is one scheduled event of an instance, as DescribeInstanceStatus lists it.
type ScheduledEvent struct {
	ID          string // InstanceEventId, the id instance metadata gives the same event
	Code        string // instance-reboot, system-reboot, system-maintenance, instance-retirement, instance-stop
	Description string // "[Completed] ..." or "[Canceled] ..." once the event is over
	NotBefore   time.Time
	NotAfter    time.Time
}

// UnknownInstancesError is EC2 refusing a DescribeInstanceStatus request because some of its
// ids name no instance (terminated long ago): the request can be made again without them.
type UnknownInstancesError struct {
	IDs []string
	Err error
}

func (e *UnknownInstancesError) Error() string {
	return fmt.Sprintf("EC2 knows no instance %s: %v", describeIDs(e.IDs), e.Err)
}

func (e *UnknownInstancesError) Unwrap() error { return e.Err }

// instanceIDInMessage finds the instance ids EC2 names in an InvalidInstanceID.NotFound
// message ("The instance IDs 'i-1, i-2' do not exist").
var instanceIDInMessage = regexp.MustCompile(`i-[0-9a-f]+`)

// DescribeInstanceStatus asks, in one request, the status of at most MaxStatusInstances
// running instances (IncludeAllInstances=false: an instance that is not running is left out
// of the answer). A request naming an unknown instance fails with *UnknownInstancesError.
func (a *AWSEC2) DescribeInstanceStatus(ctx context.Context, ids []string) ([]InstanceStatus, error) {
	ids = uniqueNonEmpty(ids)
	if len(ids) == 0 {
		return nil, nil
	}
	if len(ids) > MaxStatusInstances {
		return nil, fmt.Errorf("EC2 DescribeInstanceStatus: %d instances in one request, at most %d", len(ids), MaxStatusInstances)
	}
	out, err := a.client.DescribeInstanceStatus(ctx, &ec2.DescribeInstanceStatusInput{InstanceIds: ids, IncludeAllInstances: aws.Bool(false)})
	if err != nil {
		var apiErr smithy.APIError
		if errors.As(err, &apiErr) && apiErr.ErrorCode() == "InvalidInstanceID.NotFound" {
			if unknown := instanceIDInMessage.FindAllString(apiErr.ErrorMessage(), -1); len(unknown) > 0 {
				return nil, &UnknownInstancesError{IDs: unknown, Err: err}
			}
		}
		return nil, fmt.Errorf("EC2 DescribeInstanceStatus for %d instance(s) (%s): %w", len(ids), describeIDs(ids), err)
	}
	statuses := make([]InstanceStatus, 0, len(out.InstanceStatuses))
	for _, s := range out.InstanceStatuses {
		statuses = append(statuses, toInstanceStatus(s))
	}
	return statuses, nil
}

func toInstanceStatus(s ec2types.InstanceStatus) InstanceStatus {
	st := InstanceStatus{InstanceID: aws.ToString(s.InstanceId)}
	summary := func(name string, sum *ec2types.InstanceStatusSummary) string {
		if sum == nil {
			return ""
		}
		st.failed(name, sum.Details)
		return string(sum.Status)
	}
	st.Instance = summary("instance", s.InstanceStatus)
	st.System = summary("system", s.SystemStatus)
	if e := s.AttachedEbsStatus; e != nil {
		st.EBS = string(e.Status)
		for _, d := range e.Details {
			st.fail("ebs", string(d.Name), string(d.Status), d.ImpairedSince)
		}
	}
	for _, e := range s.Events {
		st.Events = append(st.Events, ScheduledEvent{
			ID: aws.ToString(e.InstanceEventId), Code: string(e.Code), Description: aws.ToString(e.Description),
			NotBefore: aws.ToTime(e.NotBefore), NotAfter: aws.ToTime(e.NotAfter),
		})
	}
	return st
}

func (s *InstanceStatus) failed(check string, details []ec2types.InstanceStatusDetails) {
	for _, d := range details {
		s.fail(check, string(d.Name), string(d.Status), d.ImpairedSince)
	}
}

func (s *InstanceStatus) fail(check, name, status string, since *time.Time) {
	if status != "failed" {
		return
	}
	s.Failed = append(s.Failed, check+" "+name)
	if since != nil && (s.ImpairedSince.IsZero() || since.Before(s.ImpairedSince)) {
		s.ImpairedSince = *since
	}
}
