// SPDX-License-Identifier: Apache-2.0

package controlleronly_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/cloud/controlleronly"
	"lifeboat.dev/lifeboat/test/sandbox/fakeaws"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

func TestAWSEC2DescribeInstanceStatus(t *testing.T) {
	fake := sandboxtest.FakeAWS(t, "")
	for i := range 3 {
		fake.AddInstance(fakeInstance(i))
	}
	ids := []string{fakeInstance(0).ID, fakeInstance(1).ID, fakeInstance(2).ID}
	since := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	fake.SetInstanceStatus(ids[0], fakeaws.Status{Failed: []string{"ebs"}, ImpairedSince: since})
	fake.SetInstanceStatus(ids[1], fakeaws.Status{Events: []fakeaws.StatusEvent{{ID: "instance-event-1", Code: "instance-retirement",
		Description: "The instance is running on degraded hardware", NotBefore: since.Add(time.Hour)}}})
	fake.SetInstanceStatus(ids[2], fakeaws.Status{Instance: "insufficient-data"})
	ec2 := controlleronly.NewAWSEC2(sandboxtest.AWSConfig(fake.URL()))
	got, err := ec2.DescribeInstanceStatus(context.Background(), append(ids, ids[0]))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("%d statuses: %+v", len(got), got)
	}
	if s := got[0]; !s.Impaired() || s.EBS != "impaired" || !slices.Equal(s.Failed, []string{"ebs reachability"}) || !s.ImpairedSince.Equal(since) {
		t.Errorf("EBS failed: %+v", s)
	}
	if s := got[1]; s.Impaired() || len(s.Events) != 1 || s.Events[0] != (cloud.ScheduledEvent{ID: "instance-event-1", Code: "instance-retirement",
		Description: "The instance is running on degraded hardware", NotBefore: since.Add(time.Hour)}) {
		t.Errorf("scheduled event: %+v", s)
	}
	if s := got[2]; s.Impaired() || s.Instance != "insufficient-data" {
		t.Errorf("insufficient data is not impaired: %+v", s)
	}
	// A request naming an instance EC2 does not know says which, so it can be asked again
	// without it.
	_, err = ec2.DescribeInstanceStatus(context.Background(), []string{ids[0], "i-0aaaaaaaaaaaaaaa1", "i-0aaaaaaaaaaaaaaa2"})
	var unknown *cloud.UnknownInstancesError
	if !errors.As(err, &unknown) || !slices.Equal(unknown.IDs, []string{"i-0aaaaaaaaaaaaaaa1", "i-0aaaaaaaaaaaaaaa2"}) {
		t.Errorf("unknown instances: %v", err)
	}
	if _, err := ec2.DescribeInstanceStatus(context.Background(), make([]string, 0, 101)); err != nil {
		t.Errorf("no ids: %v", err)
	}
	many := make([]string, 101)
	for i := range many {
		many[i] = fakeInstance(i).ID
	}
	if _, err := ec2.DescribeInstanceStatus(context.Background(), many); err == nil {
		t.Error("101 ids in one request accepted")
	}
	if calls := fake.CallCount("ec2", "DescribeInstanceStatus"); calls != 2 {
		t.Errorf("%d calls, want 2 (nothing is asked for no ids or too many)", calls)
	}
}

func TestAWSEC2InstancesInCapacityReservation(t *testing.T) {
	fake := sandboxtest.FakeAWS(t, "")
	for i := range 12 {
		in := fakeInstance(i)
		switch {
		case i%3 == 0:
			in.CapacityReservationID = "cr-0123456789abcdef0"
		case i%3 == 1:
			in.CapacityReservationID = "cr-0fedcba9876543210"
		}
		if i == 9 {
			in.State = "terminated" // gone already: not listed
		}
		fake.AddInstance(in)
	}
	ec2 := controlleronly.NewAWSEC2(sandboxtest.AWSConfig(fake.URL()))
	ec2.PageSize = 5
	got, err := ec2.InstancesInCapacityReservation(context.Background(), "cr-0123456789abcdef0")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, in := range got {
		ids = append(ids, in.ID)
	}
	if want := []string{fakeInstance(0).ID, fakeInstance(3).ID, fakeInstance(6).ID}; !slices.Equal(ids, want) {
		t.Errorf("instances %v, want %v", ids, want)
	}
	if len(got) > 0 && got[0].Tags["kubernetes.io/cluster/prod"] != "owned" {
		t.Errorf("tags not read: %+v", got[0])
	}
}
