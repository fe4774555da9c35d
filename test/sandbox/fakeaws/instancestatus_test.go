// SPDX-License-Identifier: Apache-2.0

package fakeaws

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

func TestDescribeInstanceStatus(t *testing.T) {
	s := startFake(t, Options{})
	seedInstances(s) // i-0003 is stopped
	since := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	s.SetInstanceStatus("i-0001", Status{Failed: []string{"system"}, ImpairedSince: since,
		Events: []StatusEvent{{ID: "instance-event-0d59937288b749b32", Code: "system-reboot", Description: "scheduled reboot",
			NotBefore: since.Add(24 * time.Hour), NotAfter: since.Add(26 * time.Hour)}}})
	ctx := context.Background()
	out, err := ec2Client(s).DescribeInstanceStatus(ctx, &ec2.DescribeInstanceStatusInput{InstanceIds: []string{"i-0001", "i-0002", "i-0003"}})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, st := range out.InstanceStatuses {
		ids = append(ids, aws.ToString(st.InstanceId))
	}
	// Without IncludeAllInstances the stopped instance is left out.
	if !slices.Equal(ids, []string{"i-0001", "i-0002"}) {
		t.Fatalf("instances %v, want the two running ones", ids)
	}
	one, two := out.InstanceStatuses[0], out.InstanceStatuses[1]
	if one.SystemStatus.Status != ec2types.SummaryStatusImpaired || one.InstanceStatus.Status != ec2types.SummaryStatusOk ||
		one.SystemStatus.Details[0].Status != ec2types.StatusTypeFailed || !aws.ToTime(one.SystemStatus.Details[0].ImpairedSince).Equal(since) {
		t.Errorf("i-0001 status %+v / %+v", one.SystemStatus, one.InstanceStatus)
	}
	if len(one.Events) != 1 || aws.ToString(one.Events[0].InstanceEventId) != "instance-event-0d59937288b749b32" ||
		one.Events[0].Code != ec2types.EventCodeSystemReboot || !aws.ToTime(one.Events[0].NotBefore).Equal(since.Add(24*time.Hour)) {
		t.Errorf("i-0001 events %+v", one.Events)
	}
	if two.SystemStatus.Status != ec2types.SummaryStatusOk || two.AttachedEbsStatus.Status != ec2types.SummaryStatusOk || len(two.Events) != 0 {
		t.Errorf("i-0002 %+v", two)
	}
	all, err := ec2Client(s).DescribeInstanceStatus(ctx, &ec2.DescribeInstanceStatusInput{IncludeAllInstances: aws.Bool(true)})
	if err != nil || len(all.InstanceStatuses) != 3 {
		t.Errorf("IncludeAllInstances: %+v %v", all, err)
	}
	// As EC2: an unknown id fails the whole call, naming it; more than 100 ids are refused.
	_, err = ec2Client(s).DescribeInstanceStatus(ctx, &ec2.DescribeInstanceStatusInput{InstanceIds: []string{"i-0001", "i-0404"}})
	if ae := asAPIError(t, err); ae.ErrorCode() != "InvalidInstanceID.NotFound" || ae.ErrorMessage() != "The instance ID 'i-0404' does not exist" {
		t.Errorf("unknown id: %v", err)
	}
	many := make([]string, 101)
	for i := range many {
		many[i] = "i-0001"
	}
	if _, err := ec2Client(s).DescribeInstanceStatus(ctx, &ec2.DescribeInstanceStatusInput{InstanceIds: many}); errCode(t, err) != "InvalidParameterValue" {
		t.Errorf("101 ids: %v", err)
	}
}

func TestCapacityReservationFilter(t *testing.T) {
	s := startFake(t, Options{})
	seedInstances(s)
	s.AddInstance(Instance{ID: "i-0004", CapacityReservationID: "cr-0123456789abcdef0"})
	s.AddInstance(Instance{ID: "i-0005", CapacityReservationID: "cr-0fedcba9876543210"})
	out, err := ec2Client(s).DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{
		Filters: []ec2types.Filter{{Name: aws.String("capacity-reservation-id"), Values: []string{"cr-0123456789abcdef0"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if ids := instanceIDs(out); !slices.Equal(ids, []string{"i-0004"}) || aws.ToString(out.Reservations[0].Instances[0].CapacityReservationId) != "cr-0123456789abcdef0" {
		t.Errorf("got %v %+v", ids, out.Reservations)
	}
}

func TestSetInstanceHealth(t *testing.T) {
	s := startFake(t, Options{})
	seedInstances(s)
	ctx := context.Background()
	set := func(id, health string) error {
		_, err := asgClient(s).SetInstanceHealth(ctx, &autoscaling.SetInstanceHealthInput{InstanceId: aws.String(id), HealthStatus: aws.String(health)})
		return err
	}
	if err := set("i-0001", "Unhealthy"); err != nil {
		t.Fatal(err)
	}
	if err := set("i-0001", "Healthy"); err != nil {
		t.Fatal(err)
	}
	if got := s.UnhealthyMarks("i-0001"); got != 1 {
		t.Errorf("%d Unhealthy marks, want 1", got)
	}
	// Not in a group, or an unknown health: refused as Auto Scaling does.
	if err := set("i-0003", "Unhealthy"); errCode(t, err) != "ValidationError" {
		t.Errorf("instance in no group: %v", err)
	}
	if err := set("i-0002", "Sick"); errCode(t, err) != "ValidationError" {
		t.Errorf("bad health: %v", err)
	}
}
