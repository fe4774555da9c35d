// SPDX-License-Identifier: Apache-2.0

package controlleronly_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/cloud/controlleronly"
	"lifeboat.dev/lifeboat/test/sandbox/fakeaws"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// One DescribeCapacityReservations per reservation read; an id EC2 does not know is
// ErrReservationNotFound, not a failure to retry.
func TestDescribeCapacityReservation(t *testing.T) {
	fake := sandboxtest.FakeAWS(t, "")
	end := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	fake.AddCapacityReservation(fakeaws.CapacityReservation{ID: "cr-0123456789abcdef0", InstanceType: "trn2u.48xlarge", EndDate: end})
	fake.AddCapacityReservation(fakeaws.CapacityReservation{ID: "cr-0fedcba9876543210", Type: "default", State: "expired"})
	ec2 := controlleronly.NewAWSEC2(sandboxtest.AWSConfig(fake.URL()))
	ctx := context.Background()
	got, err := ec2.DescribeCapacityReservation(ctx, "cr-0123456789abcdef0")
	want := cloud.CapacityReservation{ID: "cr-0123456789abcdef0", Type: "capacity-block", State: "active", InstanceType: "trn2u.48xlarge", EndDate: end}
	if err != nil || got != want {
		t.Errorf("got %+v %v, want %+v", got, err, want)
	}
	got, err = ec2.DescribeCapacityReservation(ctx, "cr-0fedcba9876543210")
	if err != nil || got.Type != "default" || got.State != "expired" || !got.EndDate.IsZero() {
		t.Errorf("ordinary reservation: %+v %v", got, err)
	}
	if _, err := ec2.DescribeCapacityReservation(ctx, "cr-0aaaaaaaaaaaaaaa1"); !errors.Is(err, cloud.ErrReservationNotFound) {
		t.Errorf("unknown id: %v, want ErrReservationNotFound", err)
	}
	if n := fake.CallCount("ec2", "DescribeCapacityReservations"); n != 3 {
		t.Errorf("%d calls for three reads", n)
	}
}
