// SPDX-License-Identifier: Apache-2.0

package preflight

import (
	"fmt"
	"strings"
	"testing"

	"lifeboat.dev/lifeboat/test/sandbox"
	"lifeboat.dev/lifeboat/test/sandbox/fakeaws"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// The controller's AWS checks against the SQS server and the EC2 / Auto Scaling fake, with
// actions denied the way IAM denies them.
func TestAWSChecks(t *testing.T) {
	ctx := testContext(t)
	sqs := sandboxtest.SQS(t, sandbox.SQSOptions{Queues: []string{"lifeboat"}})
	queue := sqs.QueueURLs["lifeboat"]

	type want struct {
		status Status
		fix    string // the fix mentions this
	}
	tests := []struct {
		name     string
		deny     [][2]string // service, action
		queueURL string
		endpoint string // default: the fake
		want     map[string]want
	}{
		{name: "all allowed", want: map[string]want{
			"sqs queue": {StatusOK, ""}, "sqs:DeleteMessage": {StatusOK, ""}, "sqs:ChangeMessageVisibility": {StatusOK, ""},
			"ec2:DescribeInstances": {StatusOK, ""}, "autoscaling:CompleteLifecycleAction": {StatusOK, ""},
			"autoscaling:DescribeLifecycleHooks": {StatusOK, ""}, "autoscaling:DescribeAutoScalingInstances": {StatusOK, ""},
		}},
		{name: "DescribeAutoScalingInstances denied: no lifecycle call can be confirmed", deny: [][2]string{{"autoscaling", "DescribeAutoScalingInstances"}}, want: map[string]want{
			"autoscaling:DescribeAutoScalingInstances": {StatusFail, "allow autoscaling:DescribeAutoScalingInstances"},
		}},
		{name: "DescribeLifecycleHooks denied: pods keep their grace, a warning", deny: [][2]string{{"autoscaling", "DescribeLifecycleHooks"}}, want: map[string]want{
			"autoscaling:CompleteLifecycleAction": {StatusOK, ""}, "autoscaling:DescribeLifecycleHooks": {StatusWarn, "allow autoscaling:DescribeLifecycleHooks"},
		}},
		{name: "GetQueueAttributes denied: not needed, a warning", deny: [][2]string{{"sqs", "GetQueueAttributes"}}, want: map[string]want{
			"sqs queue": {StatusWarn, "sqs:GetQueueAttributes"}, "sqs:DeleteMessage": {StatusOK, ""}, "sqs:ChangeMessageVisibility": {StatusOK, ""},
		}},
		{name: "DeleteMessage denied", deny: [][2]string{{"sqs", "DeleteMessage"}}, want: map[string]want{
			"sqs queue": {StatusOK, ""}, "sqs:DeleteMessage": {StatusFail, "allow sqs:DeleteMessage"}, "sqs:ChangeMessageVisibility": {StatusOK, ""},
		}},
		{name: "ChangeMessageVisibility denied", deny: [][2]string{{"sqs", "ChangeMessageVisibility"}}, want: map[string]want{
			"sqs:DeleteMessage": {StatusOK, ""}, "sqs:ChangeMessageVisibility": {StatusFail, "allow sqs:ChangeMessageVisibility"},
		}},
		{name: "DescribeInstances denied", deny: [][2]string{{"ec2", "DescribeInstances"}}, want: map[string]want{
			"ec2:DescribeInstances": {StatusFail, "allow ec2:DescribeInstances"}, "autoscaling:CompleteLifecycleAction": {StatusOK, ""},
		}},
		{name: "CompleteLifecycleAction denied: ambiguous, a warning", deny: [][2]string{{"autoscaling", "CompleteLifecycleAction"}}, want: map[string]want{
			"ec2:DescribeInstances": {StatusOK, ""}, "autoscaling:CompleteLifecycleAction": {StatusWarn, "allow autoscaling:CompleteLifecycleAction"},
		}},
		{name: "no such queue", queueURL: strings.TrimSuffix(queue, "lifeboat") + "missing", want: map[string]want{
			"sqs queue": {StatusFail, "QUEUE_URL"},
		}},
		{name: "endpoint down", endpoint: fmt.Sprintf("http://127.0.0.1:%d", closedPort(t)), want: map[string]want{
			"sqs queue": {StatusFail, "AWS_ENDPOINT"}, "ec2:DescribeInstances": {StatusFail, "AWS_ENDPOINT"},
			"autoscaling:CompleteLifecycleAction": {StatusFail, "AWS_ENDPOINT"}, "autoscaling:DescribeLifecycleHooks": {StatusFail, "AWS_ENDPOINT"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := sandboxtest.FakeAWS(t, sqs.Endpoint)
			for _, d := range tt.deny {
				fake.Deny(d[0], d[1])
			}
			fake.AddLifecycleHook(fakeaws.LifecycleHook{Name: "drain", AutoScalingGroup: "workers"})
			fake.BeginLifecycleAction("drain", "workers", "i-0000000000000001", "token-1")
			endpoint := fake.URL()
			if tt.endpoint != "" {
				endpoint = tt.endpoint
			}
			queueURL := queue
			if tt.queueURL != "" {
				queueURL = tt.queueURL
			}
			api := NewAWS(sandboxtest.AWSConfig(endpoint))
			rows := append(CheckQueue(ctx, api.SQS, queueURL), CheckEC2(ctx, api.EC2), CheckAutoScaling(ctx, api.AutoScaling), CheckGroupLookup(ctx, api.AutoScaling), CheckLifecycleHooks(ctx, api.AutoScaling))
			got := rowsByCheck(rows)
			for check, w := range tt.want {
				r, ok := got[check]
				if !ok {
					t.Errorf("no %s row in %+v", check, rows)
					continue
				}
				if r.Status != w.status || !strings.Contains(r.Fix, w.fix) {
					t.Errorf("%s: %s %q (fix %q), want %s with a fix mentioning %q", check, r.Status, r.Detail, r.Fix, w.status, w.fix)
				}
			}
			if _, completed, _, _ := fake.LifecycleAction("token-1"); completed {
				t.Error("the Auto Scaling probe completed a real lifecycle action")
			}
			if tt.endpoint == "" {
				for _, call := range fake.Calls() {
					if call.Service == "ec2" && call.Params.Get("DryRun") != "true" {
						t.Errorf("EC2 called without DryRun: %s %v", call.Action, call.Params)
					}
				}
			}
		})
	}
}

// The agent's lookup of its own Auto Scaling group, before it completes its hook.
func TestCheckInstanceGroup(t *testing.T) {
	ctx := testContext(t)
	tests := []struct {
		name     string
		instance string
		deny     bool
		want     Status
		mention  string // in the detail, or the fix when not ok
	}{
		{"in a group", "i-0000000000000001", false, StatusOK, "group workers"},
		{"in no group", "i-0000000000000002", false, StatusWarn, "ASG_LIFECYCLE_HOOK_NAME"},
		{"denied", "i-0000000000000001", true, StatusFail, "allow autoscaling:DescribeAutoScalingInstances"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := sandboxtest.FakeAWS(t, "")
			fake.AddInstance(fakeaws.Instance{ID: "i-0000000000000001", AutoScalingGroup: "workers"})
			fake.AddInstance(fakeaws.Instance{ID: "i-0000000000000002"})
			if tt.deny {
				fake.Deny("autoscaling", "DescribeAutoScalingInstances")
			}
			r := CheckInstanceGroup(ctx, NewAWS(sandboxtest.AWSConfig(fake.URL())).AutoScaling, tt.instance)
			text := r.Detail
			if r.Status != StatusOK {
				text = r.Fix
			}
			if r.Status != tt.want || !strings.Contains(text, tt.mention) {
				t.Errorf("row %+v, want %s mentioning %q", r, tt.want, tt.mention)
			}
		})
	}
}
