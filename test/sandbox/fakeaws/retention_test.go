// SPDX-License-Identifier: Apache-2.0

package fakeaws

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	asgtypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/smithy-go"
)

// A group's instance lifecycle policy decides what an abandoned termination hook does: with
// TerminateHookAbandon retain the instance stays Terminating:Retained until
// TerminateInstanceInAutoScalingGroup; without a policy (or with terminate) it is terminated
// at once. DescribeAutoScalingGroups states the policy only for groups that have one.
func TestInstanceLifecyclePolicy(t *testing.T) {
	ctx := context.Background()
	s := startFake(t, Options{})
	c := asgClient(s)
	s.AddInstance(Instance{ID: "i-0001", AutoScalingGroup: "kept"})
	s.AddInstance(Instance{ID: "i-0002", AutoScalingGroup: "plain"})
	s.AddInstance(Instance{ID: "i-0003", AutoScalingGroup: "said-terminate"})
	s.SetRetainOnAbandon("kept", true)
	s.SetRetainOnAbandon("said-terminate", false)
	for _, g := range []string{"kept", "plain", "said-terminate"} {
		s.AddLifecycleHook(LifecycleHook{Name: "drain", AutoScalingGroup: g})
	}

	out, err := c.DescribeAutoScalingGroups(ctx, &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{"kept", "plain", "said-terminate"}})
	if err != nil {
		t.Fatal(err)
	}
	policies := map[string]string{}
	for _, g := range out.AutoScalingGroups {
		policy := "(none)"
		if p := g.InstanceLifecyclePolicy; p != nil && p.RetentionTriggers != nil {
			policy = string(p.RetentionTriggers.TerminateHookAbandon)
		}
		policies[aws.ToString(g.AutoScalingGroupName)] = policy
		if len(g.Instances) != 1 {
			t.Errorf("group %s lists %d instances, want 1", aws.ToString(g.AutoScalingGroupName), len(g.Instances))
		}
	}
	want := map[string]string{"kept": "retain", "plain": "(none)", "said-terminate": "terminate"}
	for g, p := range want {
		if policies[g] != p {
			t.Errorf("group %s: TerminateHookAbandon %q, want %q (all: %v)", g, policies[g], p, policies)
		}
	}

	for i, id := range []string{"i-0001", "i-0002", "i-0003"} {
		group := []string{"kept", "plain", "said-terminate"}[i]
		s.BeginLifecycleAction("drain", group, id, "tok-"+id)
		if _, err := c.CompleteLifecycleAction(ctx, &autoscaling.CompleteLifecycleActionInput{AutoScalingGroupName: aws.String(group),
			LifecycleHookName: aws.String("drain"), InstanceId: aws.String(id), LifecycleActionResult: aws.String("ABANDON")}); err != nil {
			t.Fatalf("abandon %s: %v", id, err)
		}
	}
	cases := []struct{ id, ec2, asg string }{
		{"i-0001", "running", string(asgtypes.LifecycleStateTerminatingRetained)},
		{"i-0002", "terminated", "Terminated"},
		{"i-0003", "terminated", "Terminated"},
	}
	for _, tc := range cases {
		if e, a, _ := s.InstanceState(tc.id); e != tc.ec2 || a != tc.asg {
			t.Errorf("%s after ABANDON: %s / %s, want %s / %s", tc.id, e, a, tc.ec2, tc.asg)
		}
	}

	term, err := c.TerminateInstanceInAutoScalingGroup(ctx, &autoscaling.TerminateInstanceInAutoScalingGroupInput{
		InstanceId: aws.String("i-0001"), ShouldDecrementDesiredCapacity: aws.Bool(false)})
	if err != nil {
		t.Fatal(err)
	}
	if term.Activity == nil || aws.ToString(term.Activity.AutoScalingGroupName) != "kept" {
		t.Errorf("activity %+v, want one in group kept", term.Activity)
	}
	if e, a, _ := s.InstanceState("i-0001"); e != "terminated" || a != "Terminated" {
		t.Errorf("i-0001 after TerminateInstanceInAutoScalingGroup: %s / %s", e, a)
	}
	// A second call, or a call for an instance in no group, is refused as AWS refuses it.
	for _, id := range []string{"i-0001", "i-9999"} {
		_, err := c.TerminateInstanceInAutoScalingGroup(ctx, &autoscaling.TerminateInstanceInAutoScalingGroupInput{
			InstanceId: aws.String(id), ShouldDecrementDesiredCapacity: aws.Bool(false)})
		var apiErr smithy.APIError
		if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "ValidationError" {
			t.Errorf("terminate %s again: %v, want ValidationError", id, err)
		}
	}
	if n := s.CallCount("autoscaling", "TerminateInstanceInAutoScalingGroup"); n != 3 {
		t.Errorf("%d calls recorded, want 3", n)
	}
}
