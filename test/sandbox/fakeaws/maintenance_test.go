// SPDX-License-Identifier: Apache-2.0

package fakeaws

import (
	"context"
	"fmt"
	"maps"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
)

// A group's instance maintenance policy is stated by DescribeAutoScalingGroups only once a
// test sets it, and is gone again once the test removes it; a group the policy alone names
// is described too.
func TestInstanceMaintenancePolicy(t *testing.T) {
	ctx := context.Background()
	s := startFake(t, Options{})
	c := asgClient(s)
	s.AddInstance(Instance{ID: "i-0001", AutoScalingGroup: "first"})
	s.AddInstance(Instance{ID: "i-0002", AutoScalingGroup: "plain"})
	s.SetMaintenancePolicy("first", &MaintenancePolicy{MinHealthyPercentage: 100, MaxHealthyPercentage: 110})
	s.SetMaintenancePolicy("empty", &MaintenancePolicy{MinHealthyPercentage: 90, MaxHealthyPercentage: 100})

	describe := func() map[string]string {
		t.Helper()
		out, err := c.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{"first", "plain", "empty"}})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, g := range out.AutoScalingGroups {
			policy := "(none)"
			if p := g.InstanceMaintenancePolicy; p != nil {
				if p.MinHealthyPercentage == nil || p.MaxHealthyPercentage == nil {
					t.Fatalf("group %s: a policy without both percentages: %+v", aws.ToString(g.AutoScalingGroupName), p)
				}
				policy = fmt.Sprintf("%d-%d", *p.MinHealthyPercentage, *p.MaxHealthyPercentage)
			}
			got[aws.ToString(g.AutoScalingGroupName)] = policy
		}
		return got
	}
	want := map[string]string{"first": "100-110", "plain": "(none)", "empty": "90-100"}
	if got := describe(); !maps.Equal(got, want) {
		t.Errorf("policies %v, want %v", got, want)
	}
	s.SetMaintenancePolicy("first", nil)
	if got := describe(); got["first"] != "(none)" {
		t.Errorf("after removing it, first states %q", got["first"])
	}
}
