// SPDX-License-Identifier: Apache-2.0

package cloud_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/cloud/controlleronly"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// TestBlackHoledEndpointEndsEveryCall: against an endpoint that accepts and never answers,
// every operation Lifeboat calls returns a deadline error once its deadline passes: the
// configured one, or a receive's long-poll wait plus the margin.
func TestBlackHoledEndpointEndsEveryCall(t *testing.T) {
	d := cloud.Deadlines{Call: 300 * time.Millisecond, ReceiveMargin: 400 * time.Millisecond}
	cfg := cloud.WithDeadlines(sandboxtest.AWSConfig(sandboxtest.BlackHole(t)), d)
	cfg.RetryMaxAttempts = 3 // the SDK's default: the deadline covers every attempt
	ec2, asg, elb, sqs := controlleronly.NewAWSEC2(cfg), cloud.NewAWSAutoScaling(cfg), cloud.NewAWSLoadBalancing(cfg), awssqs.NewFromConfig(cfg)
	action := cloud.LifecycleAction{Group: "g", Hook: "h", InstanceID: "i-0123456789abcdef0"}
	receive := 1 * time.Second

	tests := []struct {
		name string
		want time.Duration
		call func(context.Context) error
	}{
		{"DescribeInstances", d.Call, func(ctx context.Context) error {
			_, err := ec2.DescribeInstances(ctx, []string{action.InstanceID})
			return err
		}},
		{"DescribeAutoScalingInstances", d.Call, func(ctx context.Context) error {
			_, err := asg.GroupOf(ctx, action.InstanceID)
			return err
		}},
		{"CompleteLifecycleAction", d.Call, func(ctx context.Context) error { return asg.CompleteLifecycleAction(ctx, action) }},
		{"RecordLifecycleActionHeartbeat", d.Call, func(ctx context.Context) error { return asg.RecordLifecycleActionHeartbeat(ctx, action) }},
		{"DescribeLifecycleHooks", d.Call, func(ctx context.Context) error {
			_, err := asg.LifecycleHookTimeouts(ctx, "g", "h")
			return err
		}},
		{"DescribeTargetGroups", d.Call, func(ctx context.Context) error {
			_, err := elb.TargetGroups(ctx)
			return err
		}},
		{"DescribeTargetHealth", d.Call, func(ctx context.Context) error {
			_, err := elb.TargetHealth(ctx, "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/web/0123456789abcdef")
			return err
		}},
		{"DeleteMessage", d.Call, func(ctx context.Context) error {
			_, err := sqs.DeleteMessage(ctx, &awssqs.DeleteMessageInput{QueueUrl: aws.String("q"), ReceiptHandle: aws.String("h")})
			return err
		}},
		{"ReceiveMessage", receive + d.ReceiveMargin, func(ctx context.Context) error {
			_, err := sqs.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: aws.String("q"), WaitTimeSeconds: int32(receive / time.Second)})
			return err
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// The test's own limit, far past the deadline, only keeps a regression from hanging.
			ctx, cancel := context.WithTimeout(context.Background(), tc.want+10*time.Second)
			defer cancel()
			start := time.Now()
			err := tc.call(ctx)
			took := time.Since(start)
			t.Logf("returned after %s: %v", took.Round(time.Millisecond), err)
			if err == nil {
				t.Fatal("the call succeeded against an endpoint that never answers")
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("error %v: want a deadline error", err)
			}
			var te *cloud.CallTimeoutError
			if !errors.As(err, &te) || te.Operation != tc.name || te.Limit != tc.want {
				t.Errorf("error %v: want a CallTimeoutError for %s after %s", err, tc.name, tc.want)
			}
			if took < tc.want || took > tc.want+2*time.Second {
				t.Errorf("the call returned after %s, want just after its deadline %s", took, tc.want)
			}
		})
	}
}

// TestShorterContextWins: a caller's own, earlier deadline ends the call, and is not reported
// as the per-call deadline.
func TestShorterContextWins(t *testing.T) {
	cfg := cloud.WithDeadlines(sandboxtest.AWSConfig(sandboxtest.BlackHole(t)), cloud.Deadlines{Call: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := cloud.NewAWSAutoScaling(cfg).GroupOf(ctx, "i-0123456789abcdef0")
	if took := time.Since(start); err == nil || took > 5*time.Second {
		t.Fatalf("GroupOf returned %v after %s, want the caller's deadline after 200ms", err, took)
	}
	var te *cloud.CallTimeoutError
	if errors.As(err, &te) {
		t.Errorf("error %v: the caller's deadline reported as the per-call one", err)
	}
}

func TestDeadlinesFor(t *testing.T) {
	d := cloud.DefaultDeadlines
	tests := []struct {
		name   string
		params any
		want   time.Duration
	}{
		{"a call", &awssqs.DeleteMessageInput{}, d.Call},
		{"a receive's wait plus the margin", &awssqs.ReceiveMessageInput{WaitTimeSeconds: 5}, 5*time.Second + d.ReceiveMargin},
		// Without a wait of its own the queue's default applies, up to SQS's 20 s.
		{"a receive without a wait", &awssqs.ReceiveMessageInput{}, 20*time.Second + d.ReceiveMargin},
		{"a receive asking more than SQS allows", &awssqs.ReceiveMessageInput{WaitTimeSeconds: 3600}, 20*time.Second + d.ReceiveMargin},
	}
	for _, tc := range tests {
		if got := d.For(tc.params); got != tc.want {
			t.Errorf("%s: For = %s, want %s", tc.name, got, tc.want)
		}
	}
}

// TestLoadAWSConfigInstallsDeadlines: every client built from the configuration Lifeboat
// loads gets the deadline middleware.
func TestLoadAWSConfigInstallsDeadlines(t *testing.T) {
	cfg, err := cloud.LoadAWSConfig(context.Background(), "us-east-1", "http://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	stack := middleware.NewStack("test", smithyhttp.NewStackRequest)
	for _, fn := range cfg.APIOptions {
		if err := fn(stack); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := stack.Initialize.Get("LifeboatCallDeadline"); !ok {
		t.Errorf("no call deadline in the stack: %v", stack.Initialize.List())
	}
}
