// SPDX-License-Identifier: Apache-2.0

package fakeaws

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	asgtypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	elb "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"
)

// startFake starts a fake on loopback for the duration of the test.
func startFake(t *testing.T, opts Options) *Server {
	t.Helper()
	s := New(opts)
	if err := s.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// awsConfig is built by hand: config.LoadDefaultConfig could reach for IMDS
// or a shared profile. One attempt keeps error tests fast and deterministic.
func awsConfig() aws.Config {
	return aws.Config{
		Region:           "us-east-1",
		Credentials:      credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
		RetryMaxAttempts: 1,
	}
}

func ec2Client(s *Server) *ec2.Client {
	return ec2.NewFromConfig(awsConfig(), func(o *ec2.Options) { o.BaseEndpoint = aws.String(s.URL()) })
}

func asgClient(s *Server) *autoscaling.Client {
	return autoscaling.NewFromConfig(awsConfig(), func(o *autoscaling.Options) { o.BaseEndpoint = aws.String(s.URL()) })
}

func sqsClient(s *Server) *sqs.Client {
	return sqs.NewFromConfig(awsConfig(), func(o *sqs.Options) { o.BaseEndpoint = aws.String(s.URL()) })
}

// asAPIError unwraps the AWS API error of err, failing the test if there is none.
func asAPIError(t *testing.T, err error) smithy.APIError {
	t.Helper()
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("got error %v, want an AWS API error", err)
	}
	return ae
}

// errCode is the AWS error code of err, or "" if err is nil.
func errCode(t *testing.T, err error) string {
	t.Helper()
	if err == nil {
		return ""
	}
	return asAPIError(t, err).ErrorCode()
}

// seedInstances adds a small fleet: two ASG members and one stopped loner.
func seedInstances(s *Server) {
	s.AddInstance(Instance{
		ID: "i-0001", PrivateDNSName: "ip-10-0-0-1.ec2.internal", PrivateIP: "10.0.0.1",
		AvailabilityZone: "us-east-1a", InstanceType: "m5.large",
		Tags: map[string]string{"Name": "worker-1", "team": "blue"}, AutoScalingGroup: "workers",
	})
	s.AddInstance(Instance{
		ID: "i-0002", PrivateDNSName: "ip-10-0-0-2.ec2.internal", PrivateIP: "10.0.0.2",
		AvailabilityZone: "us-east-1b", InstanceType: "m5.large",
		Tags: map[string]string{"Name": "worker-2"}, AutoScalingGroup: "workers",
	})
	s.AddInstance(Instance{
		ID: "i-0003", PrivateDNSName: "ip-10-0-0-3.ec2.internal", PrivateIP: "10.0.0.3",
		AvailabilityZone: "us-east-1a", InstanceType: "t3.small", State: "stopped",
		Tags: map[string]string{"Name": "bastion", "team": "red"},
	})
}

func instanceIDs(out *ec2.DescribeInstancesOutput) []string {
	var ids []string
	for _, r := range out.Reservations {
		for _, in := range r.Instances {
			ids = append(ids, aws.ToString(in.InstanceId))
		}
	}
	return ids
}

func TestEC2DescribeInstances(t *testing.T) {
	s := startFake(t, Options{})
	seedInstances(s)
	client := ec2Client(s)
	f := func(name string, values ...string) ec2types.Filter {
		return ec2types.Filter{Name: aws.String(name), Values: values}
	}

	tests := []struct {
		name     string
		in       ec2.DescribeInstancesInput
		wantIDs  []string
		wantCode string
	}{
		{name: "all", wantIDs: []string{"i-0001", "i-0002", "i-0003"}},
		{name: "by id", in: ec2.DescribeInstancesInput{InstanceIds: []string{"i-0002"}}, wantIDs: []string{"i-0002"}},
		{name: "by private dns name", in: ec2.DescribeInstancesInput{Filters: []ec2types.Filter{f("private-dns-name", "ip-10-0-0-3.ec2.internal")}}, wantIDs: []string{"i-0003"}},
		{name: "by instance-id filter, values ORed", in: ec2.DescribeInstancesInput{Filters: []ec2types.Filter{f("instance-id", "i-0001", "i-0003")}}, wantIDs: []string{"i-0001", "i-0003"}},
		{name: "by state", in: ec2.DescribeInstancesInput{Filters: []ec2types.Filter{f("instance-state-name", "running")}}, wantIDs: []string{"i-0001", "i-0002"}},
		{name: "by tag key", in: ec2.DescribeInstancesInput{Filters: []ec2types.Filter{f("tag-key", "team")}}, wantIDs: []string{"i-0001", "i-0003"}},
		{name: "by tag value with wildcard", in: ec2.DescribeInstancesInput{Filters: []ec2types.Filter{f("tag:Name", "worker-*")}}, wantIDs: []string{"i-0001", "i-0002"}},
		{name: "by ASG tag", in: ec2.DescribeInstancesInput{Filters: []ec2types.Filter{f("tag:aws:autoscaling:groupName", "workers")}}, wantIDs: []string{"i-0001", "i-0002"}},
		{name: "filters ANDed", in: ec2.DescribeInstancesInput{Filters: []ec2types.Filter{f("tag-key", "team"), f("instance-state-name", "running")}}, wantIDs: []string{"i-0001"}},
		{name: "ids and filters", in: ec2.DescribeInstancesInput{InstanceIds: []string{"i-0001", "i-0003"}, Filters: []ec2types.Filter{f("instance-state-name", "stopped")}}, wantIDs: []string{"i-0003"}},
		{name: "no match", in: ec2.DescribeInstancesInput{Filters: []ec2types.Filter{f("tag:Name", "nope")}}, wantIDs: nil},
		{name: "unknown id fails the call", in: ec2.DescribeInstancesInput{InstanceIds: []string{"i-0001", "i-404"}}, wantCode: "InvalidInstanceID.NotFound"},
		{name: "unknown filter", in: ec2.DescribeInstancesInput{Filters: []ec2types.Filter{f("flavour", "x")}}, wantCode: "InvalidParameterValue"},
		{name: "ids with MaxResults", in: ec2.DescribeInstancesInput{InstanceIds: []string{"i-0001"}, MaxResults: aws.Int32(5)}, wantCode: "InvalidParameterCombination"},
		{name: "MaxResults too small", in: ec2.DescribeInstancesInput{MaxResults: aws.Int32(2)}, wantCode: "InvalidParameterValue"},
		{name: "bad NextToken", in: ec2.DescribeInstancesInput{NextToken: aws.String("garbage")}, wantCode: "InvalidPaginationToken"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := client.DescribeInstances(context.Background(), &tt.in)
			if code := errCode(t, err); code != tt.wantCode {
				t.Fatalf("error code = %q (%v), want %q", code, err, tt.wantCode)
			}
			if err != nil {
				return
			}
			if got := instanceIDs(out); !slices.Equal(got, tt.wantIDs) {
				t.Errorf("instances = %v, want %v", got, tt.wantIDs)
			}
		})
	}
}

func TestEC2DescribeInstancesFields(t *testing.T) {
	s := startFake(t, Options{})
	seedInstances(s)
	out, err := ec2Client(s).DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{InstanceIds: []string{"i-0001", "i-0003"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Reservations) != 2 || len(out.Reservations[0].Instances) != 1 {
		t.Fatalf("got %d reservations, want 2 with one instance each", len(out.Reservations))
	}
	in := out.Reservations[0].Instances[0]
	got := map[string]string{
		"id":    aws.ToString(in.InstanceId),
		"type":  string(in.InstanceType),
		"dns":   aws.ToString(in.PrivateDnsName),
		"ip":    aws.ToString(in.PrivateIpAddress),
		"az":    aws.ToString(in.Placement.AvailabilityZone),
		"state": string(in.State.Name),
		"code":  fmt.Sprint(aws.ToInt32(in.State.Code)),
	}
	want := map[string]string{
		"id": "i-0001", "type": "m5.large", "dns": "ip-10-0-0-1.ec2.internal", "ip": "10.0.0.1",
		"az": "us-east-1a", "state": "running", "code": "16",
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s = %q, want %q", k, got[k], w)
		}
	}
	tags := map[string]string{}
	for _, tag := range in.Tags {
		tags[aws.ToString(tag.Key)] = aws.ToString(tag.Value)
	}
	wantTags := map[string]string{"Name": "worker-1", "team": "blue", "aws:autoscaling:groupName": "workers"}
	if fmt.Sprint(tags) != fmt.Sprint(wantTags) {
		t.Errorf("tags = %v, want %v", tags, wantTags)
	}
	stopped := out.Reservations[1].Instances[0]
	if stopped.State.Name != ec2types.InstanceStateNameStopped || aws.ToInt32(stopped.State.Code) != 80 {
		t.Errorf("i-0003 state = %s/%d, want stopped/80", stopped.State.Name, aws.ToInt32(stopped.State.Code))
	}
	for _, tag := range stopped.Tags {
		if aws.ToString(tag.Key) == asgGroupTag {
			t.Errorf("instance outside any ASG has tag %s", asgGroupTag)
		}
	}
}

func TestEC2DescribeInstancesPagination(t *testing.T) {
	s := startFake(t, Options{})
	var want []string
	for i := range 12 {
		id := fmt.Sprintf("i-%04d", i)
		want = append(want, id)
		s.AddInstance(Instance{ID: id})
	}
	p := ec2.NewDescribeInstancesPaginator(ec2Client(s), &ec2.DescribeInstancesInput{MaxResults: aws.Int32(5)})
	var got []string
	var pageSizes []int
	for p.HasMorePages() {
		out, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		ids := instanceIDs(out)
		got = append(got, ids...)
		pageSizes = append(pageSizes, len(ids))
	}
	if !slices.Equal(got, want) {
		t.Errorf("paged ids = %v, want %v", got, want)
	}
	if !slices.Equal(pageSizes, []int{5, 5, 2}) {
		t.Errorf("page sizes = %v, want [5 5 2]", pageSizes)
	}
	if n := s.CallCount("ec2", "DescribeInstances"); n != 3 {
		t.Errorf("DescribeInstances calls = %d, want 3", n)
	}
}

// TestDescribeTags checks that the EC2 and Auto Scaling actions of the same
// name, told apart only by Version, each answer from their own data.
func TestDescribeTags(t *testing.T) {
	s := startFake(t, Options{})
	seedInstances(s)
	s.SetAutoScalingGroupTags("workers", map[string]string{"aws-node-termination-handler/managed": "", "env": "prod"})
	s.SetAutoScalingGroupTags("batch", map[string]string{"env": "dev"})
	ctx := context.Background()

	t.Run("ec2", func(t *testing.T) {
		tests := []struct {
			name    string
			filters []ec2types.Filter
			want    []string // resource/key=value
		}{
			{"by resource", []ec2types.Filter{{Name: aws.String("resource-id"), Values: []string{"i-0002"}}},
				[]string{"i-0002/Name=worker-2", "i-0002/aws:autoscaling:groupName=workers"}},
			{"by key and type", []ec2types.Filter{{Name: aws.String("key"), Values: []string{"team"}}, {Name: aws.String("resource-type"), Values: []string{"instance"}}},
				[]string{"i-0001/team=blue", "i-0003/team=red"}},
			{"wrong type", []ec2types.Filter{{Name: aws.String("resource-type"), Values: []string{"volume"}}}, nil},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				out, err := ec2Client(s).DescribeTags(ctx, &ec2.DescribeTagsInput{Filters: tt.filters})
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, d := range out.Tags {
					if d.ResourceType != ec2types.ResourceTypeInstance {
						t.Errorf("resource type = %q, want instance", d.ResourceType)
					}
					got = append(got, fmt.Sprintf("%s/%s=%s", aws.ToString(d.ResourceId), aws.ToString(d.Key), aws.ToString(d.Value)))
				}
				if !slices.Equal(got, tt.want) {
					t.Errorf("tags = %v, want %v", got, tt.want)
				}
			})
		}
	})

	t.Run("autoscaling", func(t *testing.T) {
		tests := []struct {
			name     string
			filters  []asgtypes.Filter
			want     []string
			wantCode string
		}{
			{name: "all", want: []string{"batch/env=dev", "workers/aws-node-termination-handler/managed=", "workers/env=prod"}},
			{name: "by group", filters: []asgtypes.Filter{{Name: aws.String("auto-scaling-group"), Values: []string{"workers"}}},
				want: []string{"workers/aws-node-termination-handler/managed=", "workers/env=prod"}},
			{name: "by group and key", filters: []asgtypes.Filter{{Name: aws.String("auto-scaling-group"), Values: []string{"workers", "batch"}}, {Name: aws.String("key"), Values: []string{"env"}}},
				want: []string{"batch/env=dev", "workers/env=prod"}},
			{name: "bad filter", filters: []asgtypes.Filter{{Name: aws.String("colour")}}, wantCode: "ValidationError"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				out, err := asgClient(s).DescribeTags(ctx, &autoscaling.DescribeTagsInput{Filters: tt.filters})
				if code := errCode(t, err); code != tt.wantCode {
					t.Fatalf("error code = %q (%v), want %q", code, err, tt.wantCode)
				}
				if err != nil {
					return
				}
				var got []string
				for _, d := range out.Tags {
					if aws.ToString(d.ResourceType) != "auto-scaling-group" || !aws.ToBool(d.PropagateAtLaunch) {
						t.Errorf("tag %+v: want resource type auto-scaling-group, propagated", d)
					}
					got = append(got, fmt.Sprintf("%s/%s=%s", aws.ToString(d.ResourceId), aws.ToString(d.Key), aws.ToString(d.Value)))
				}
				if !slices.Equal(got, tt.want) {
					t.Errorf("tags = %v, want %v", got, tt.want)
				}
			})
		}
	})

	if n := s.CallCount("ec2", "DescribeTags"); n != 3 {
		t.Errorf("ec2 DescribeTags calls = %d, want 3", n)
	}
	if n := s.CallCount("autoscaling", "DescribeTags"); n != 4 {
		t.Errorf("autoscaling DescribeTags calls = %d, want 4", n)
	}
}

func TestCompleteLifecycleAction(t *testing.T) {
	s := startFake(t, Options{})
	seedInstances(s)
	s.AddLifecycleHook(LifecycleHook{Name: "drain", AutoScalingGroup: "workers"})
	s.BeginLifecycleAction("drain", "workers", "i-0001", "tok-1")
	s.BeginLifecycleAction("drain", "workers", "i-0002", "tok-2")
	client := asgClient(s)
	complete := func(in autoscaling.CompleteLifecycleActionInput) error {
		in.LifecycleHookName = cmpOr(in.LifecycleHookName, "drain")
		in.AutoScalingGroupName = aws.String("workers")
		in.LifecycleActionResult = cmpOr(in.LifecycleActionResult, "CONTINUE")
		_, err := client.CompleteLifecycleAction(context.Background(), &in)
		return err
	}

	// Steps run in order: the second completion of an action must fail.
	steps := []struct {
		name    string
		in      autoscaling.CompleteLifecycleActionInput
		wantMsg string // "" for success
	}{
		{"bad result", autoscaling.CompleteLifecycleActionInput{LifecycleActionToken: aws.String("tok-1"), LifecycleActionResult: aws.String("MAYBE")}, "LifecycleActionResult must be"},
		{"wrong hook", autoscaling.CompleteLifecycleActionInput{LifecycleActionToken: aws.String("tok-1"), LifecycleHookName: aws.String("other")}, "No active Lifecycle Action found with token tok-1"},
		{"by token", autoscaling.CompleteLifecycleActionInput{LifecycleActionToken: aws.String("tok-1")}, ""},
		{"by token again", autoscaling.CompleteLifecycleActionInput{LifecycleActionToken: aws.String("tok-1")}, "No active Lifecycle Action found with token tok-1"},
		{"by instance id", autoscaling.CompleteLifecycleActionInput{InstanceId: aws.String("i-0002"), LifecycleActionResult: aws.String("ABANDON")}, ""},
		{"by instance id again", autoscaling.CompleteLifecycleActionInput{InstanceId: aws.String("i-0002")}, "No active Lifecycle Action found with instance ID i-0002"},
		{"unknown token", autoscaling.CompleteLifecycleActionInput{LifecycleActionToken: aws.String("nope")}, "No active Lifecycle Action found with token nope"},
		{"neither token nor id", autoscaling.CompleteLifecycleActionInput{}, "Either LifecycleActionToken or InstanceId"},
	}
	for _, st := range steps {
		err := complete(st.in)
		if st.wantMsg == "" {
			if err != nil {
				t.Errorf("%s: %v", st.name, err)
			}
			continue
		}
		ae := asAPIError(t, err)
		if ae.ErrorCode() != "ValidationError" || !strings.Contains(ae.ErrorMessage(), st.wantMsg) {
			t.Errorf("%s: got %s %q, want ValidationError containing %q", st.name, ae.ErrorCode(), ae.ErrorMessage(), st.wantMsg)
		}
	}

	for token, want := range map[string]string{"tok-1": "CONTINUE", "tok-2": "ABANDON"} {
		result, completed, _, ok := s.LifecycleAction(token)
		if !ok || !completed || result != want {
			t.Errorf("LifecycleAction(%s) = %q, completed %v, ok %v; want %q, true, true", token, result, completed, ok, want)
		}
	}
	if _, _, _, ok := s.LifecycleAction("nope"); ok {
		t.Error("LifecycleAction of unknown token reported ok")
	}
}

func cmpOr(p *string, def string) *string {
	if p != nil {
		return p
	}
	return aws.String(def)
}

func TestRecordLifecycleActionHeartbeat(t *testing.T) {
	s := startFake(t, Options{})
	s.BeginLifecycleAction("drain", "workers", "i-0001", "tok")
	client := asgClient(s)
	ctx := context.Background()
	beat := func(token string) error {
		_, err := client.RecordLifecycleActionHeartbeat(ctx, &autoscaling.RecordLifecycleActionHeartbeatInput{
			LifecycleHookName: aws.String("drain"), AutoScalingGroupName: aws.String("workers"), LifecycleActionToken: aws.String(token),
		})
		return err
	}
	for i := range 3 {
		if err := beat("tok"); err != nil {
			t.Fatalf("heartbeat %d: %v", i, err)
		}
	}
	if _, completed, beats, _ := s.LifecycleAction("tok"); beats != 3 || completed {
		t.Errorf("heartbeats = %d, completed = %v; want 3, false", beats, completed)
	}

	ae := asAPIError(t, beat("unknown"))
	if ae.ErrorCode() != "ValidationError" || ae.ErrorMessage() != "No active Lifecycle Action found with token unknown" {
		t.Errorf("unknown token: got %s %q", ae.ErrorCode(), ae.ErrorMessage())
	}
	if _, _, _, ok := s.LifecycleAction("unknown"); ok {
		t.Error("heartbeat on an unknown token created an action")
	}

	if _, err := client.CompleteLifecycleAction(ctx, &autoscaling.CompleteLifecycleActionInput{
		LifecycleHookName: aws.String("drain"), AutoScalingGroupName: aws.String("workers"),
		LifecycleActionToken: aws.String("tok"), LifecycleActionResult: aws.String("CONTINUE"),
	}); err != nil {
		t.Fatal(err)
	}
	if code := errCode(t, beat("tok")); code != "ValidationError" {
		t.Errorf("heartbeat after completion: code %q, want ValidationError", code)
	}
	if _, _, beats, _ := s.LifecycleAction("tok"); beats != 3 {
		t.Errorf("heartbeats after rejected beat = %d, want 3", beats)
	}
}

func TestDescribeAutoScalingInstances(t *testing.T) {
	s := startFake(t, Options{})
	seedInstances(s)
	s.AddLifecycleHook(LifecycleHook{Name: "drain", AutoScalingGroup: "workers"})
	s.BeginLifecycleAction("drain", "workers", "i-0002", "tok")

	tests := []struct {
		name string
		ids  []string
		want []string // id/group/state
	}{
		{"all group members", nil, []string{"i-0001/workers/InService", "i-0002/workers/Terminating:Wait"}},
		{"by id, unknown and ungrouped skipped", []string{"i-0002", "i-0003", "i-404"}, []string{"i-0002/workers/Terminating:Wait"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := asgClient(s).DescribeAutoScalingInstances(context.Background(), &autoscaling.DescribeAutoScalingInstancesInput{InstanceIds: tt.ids})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, d := range out.AutoScalingInstances {
				got = append(got, fmt.Sprintf("%s/%s/%s", aws.ToString(d.InstanceId), aws.ToString(d.AutoScalingGroupName), aws.ToString(d.LifecycleState)))
				if aws.ToString(d.HealthStatus) != "HEALTHY" || d.ProtectedFromScaleIn == nil || aws.ToString(d.AvailabilityZone) == "" {
					t.Errorf("incomplete details: %+v", d)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("instances = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestDescribeLifecycleHooks(t *testing.T) {
	s := startFake(t, Options{})
	s.AddLifecycleHook(LifecycleHook{Name: "drain", AutoScalingGroup: "workers"})
	s.AddLifecycleHook(LifecycleHook{Name: "warm", AutoScalingGroup: "workers", Transition: "autoscaling:EC2_INSTANCE_LAUNCHING",
		HeartbeatTimeout: 60, GlobalTimeout: 600, DefaultResult: "CONTINUE"})
	s.AddLifecycleHook(LifecycleHook{Name: "drain", AutoScalingGroup: "batch"})

	tests := []struct {
		name     string
		group    string
		names    []string
		want     []string // name/transition/heartbeat/global/default
		wantCode string
	}{
		{name: "group with defaults", group: "workers", want: []string{
			"drain/autoscaling:EC2_INSTANCE_TERMINATING/3600/172800/ABANDON",
			"warm/autoscaling:EC2_INSTANCE_LAUNCHING/60/600/CONTINUE",
		}},
		{name: "by name", group: "workers", names: []string{"warm"}, want: []string{"warm/autoscaling:EC2_INSTANCE_LAUNCHING/60/600/CONTINUE"}},
		{name: "other group", group: "batch", want: []string{"drain/autoscaling:EC2_INSTANCE_TERMINATING/3600/172800/ABANDON"}},
		{name: "unknown group", group: "ghosts", wantCode: "ValidationError"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := asgClient(s).DescribeLifecycleHooks(context.Background(), &autoscaling.DescribeLifecycleHooksInput{
				AutoScalingGroupName: aws.String(tt.group), LifecycleHookNames: tt.names,
			})
			if code := errCode(t, err); code != tt.wantCode {
				t.Fatalf("error code = %q (%v), want %q", code, err, tt.wantCode)
			}
			if err != nil {
				return
			}
			var got []string
			for _, h := range out.LifecycleHooks {
				if aws.ToString(h.AutoScalingGroupName) != tt.group {
					t.Errorf("hook %s of group %s", aws.ToString(h.LifecycleHookName), aws.ToString(h.AutoScalingGroupName))
				}
				got = append(got, fmt.Sprintf("%s/%s/%d/%d/%s", aws.ToString(h.LifecycleHookName), aws.ToString(h.LifecycleTransition),
					aws.ToInt32(h.HeartbeatTimeout), aws.ToInt32(h.GlobalTimeout), aws.ToString(h.DefaultResult)))
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("hooks = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestFaults(t *testing.T) {
	describeInstances := func(s *Server) error {
		_, err := ec2Client(s).DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{})
		return err
	}
	describeASGInstances := func(s *Server) error {
		_, err := asgClient(s).DescribeAutoScalingInstances(context.Background(), &autoscaling.DescribeAutoScalingInstancesInput{})
		return err
	}
	future := time.Now().Add(time.Hour)
	tests := []struct {
		name       string
		fault      Fault
		call       func(*Server) error
		service    string
		action     string
		wantCode   string // "" for success
		wantStatus int
	}{
		{name: "ec2 500 by default", fault: Fault{Service: "ec2"}, call: describeInstances,
			service: "ec2", action: "DescribeInstances", wantCode: "InternalError", wantStatus: 500},
		{name: "ec2 RequestLimitExceeded", fault: Fault{Service: "ec2", Action: "DescribeInstances", Status: 503, Code: "RequestLimitExceeded", Until: future}, call: describeInstances,
			service: "ec2", action: "DescribeInstances", wantCode: "RequestLimitExceeded", wantStatus: 503},
		{name: "autoscaling Throttling", fault: Fault{Service: "autoscaling", Status: 400, Code: "Throttling"}, call: describeASGInstances,
			service: "autoscaling", action: "DescribeAutoScalingInstances", wantCode: "Throttling", wantStatus: 400},
		{name: "any service", fault: Fault{Status: 500, Code: "InternalFailure"}, call: describeASGInstances,
			service: "autoscaling", action: "DescribeAutoScalingInstances", wantCode: "InternalFailure", wantStatus: 500},
		{name: "other action unaffected", fault: Fault{Service: "ec2", Action: "DescribeTags"}, call: describeInstances,
			service: "ec2", action: "DescribeInstances"},
		{name: "other service unaffected", fault: Fault{Service: "autoscaling"}, call: describeInstances,
			service: "ec2", action: "DescribeInstances"},
		{name: "expired", fault: Fault{Service: "ec2", Until: time.Now().Add(-time.Second)}, call: describeInstances,
			service: "ec2", action: "DescribeInstances"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := startFake(t, Options{})
			s.SetFault(tt.fault)
			err := tt.call(s)
			if code := errCode(t, err); code != tt.wantCode {
				t.Fatalf("error code = %q (%v), want %q", code, err, tt.wantCode)
			}
			if err != nil {
				var re *awshttp.ResponseError
				if !errors.As(err, &re) || re.HTTPStatusCode() != tt.wantStatus {
					t.Errorf("status: got %v, want %d", err, tt.wantStatus)
				}
			}
			calls := s.Calls()
			if len(calls) != 1 || calls[0].Service != tt.service || calls[0].Action != tt.action || calls[0].ErrorCode != tt.wantCode {
				t.Errorf("calls = %+v, want one %s %s with error code %q", calls, tt.service, tt.action, tt.wantCode)
			}

			s.ClearFaults()
			if err := tt.call(s); err != nil {
				t.Errorf("after ClearFaults: %v", err)
			}
		})
	}
}

func TestSQSProxy(t *testing.T) {
	type seen struct {
		method, path, query, host, target, custom, body string
	}
	var mu sync.Mutex
	var got []seen
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, seen{r.Method, r.URL.Path, r.URL.RawQuery, r.Host, r.Header.Get("X-Amz-Target"), r.Header.Get("X-Custom"), string(body)})
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.Header().Set("X-Backend", "stub")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, `{"QueueUrl":"http://sqs.example/123456789012/q"}`)
	}))
	defer backend.Close()
	s := startFake(t, Options{SQSBackend: backend.URL})

	t.Run("raw request intact", func(t *testing.T) {
		body := `{"QueueUrl":"q","MaxNumberOfMessages":1}`
		req, _ := http.NewRequest(http.MethodPost, s.URL()+"/some/path?x=1", strings.NewReader(body))
		req.Header.Set("X-Amz-Target", "AmazonSQS.ReceiveMessage")
		req.Header.Set("X-Custom", "kept")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		respBody, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || resp.Header.Get("X-Backend") != "stub" || !strings.Contains(string(respBody), "QueueUrl") {
			t.Errorf("response = %d %v %s, want the backend's", resp.StatusCode, resp.Header, respBody)
		}
		mu.Lock()
		defer mu.Unlock()
		want := seen{"POST", "/some/path", "x=1", strings.TrimPrefix(s.URL(), "http://"), "AmazonSQS.ReceiveMessage", "kept", body}
		if len(got) != 1 || got[0] != want {
			t.Errorf("backend saw %+v, want %+v", got, want)
		}
	})

	t.Run("real sqs client", func(t *testing.T) {
		out, err := sqsClient(s).GetQueueUrl(context.Background(), &sqs.GetQueueUrlInput{QueueName: aws.String("q")})
		if err != nil {
			t.Fatal(err)
		}
		if aws.ToString(out.QueueUrl) != "http://sqs.example/123456789012/q" {
			t.Errorf("QueueUrl = %q", aws.ToString(out.QueueUrl))
		}
		mu.Lock()
		defer mu.Unlock()
		if last := got[len(got)-1]; last.target != "AmazonSQS.GetQueueUrl" || !strings.Contains(last.body, `"QueueName":"q"`) {
			t.Errorf("backend saw %+v", last)
		}
	})

	t.Run("fault", func(t *testing.T) {
		s.SetFault(Fault{Service: "sqs", Action: "GetQueueUrl", Status: 400, Code: "Throttling"})
		defer s.ClearFaults()
		_, err := sqsClient(s).GetQueueUrl(context.Background(), &sqs.GetQueueUrlInput{QueueName: aws.String("q")})
		if code := errCode(t, err); code != "Throttling" {
			t.Errorf("code = %q (%v), want Throttling", code, err)
		}
	})

	if n := s.CallCount("sqs", ""); n != 3 {
		t.Errorf("sqs calls = %d, want 3", n)
	}
	if n := s.CallCount("sqs", "GetQueueUrl"); n != 2 {
		t.Errorf("GetQueueUrl calls = %d, want 2", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 {
		t.Errorf("backend got %d requests, want 2 (faulted one must not be proxied)", len(got))
	}
}

func TestSQSWithoutBackend(t *testing.T) {
	s := startFake(t, Options{})
	_, err := sqsClient(s).ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(s.URL() + "/123456789012/q")})
	ae := asAPIError(t, err)
	if ae.ErrorCode() != "NotImplemented" || !strings.Contains(ae.ErrorMessage(), "no SQS backend configured") {
		t.Errorf("got %s %q, want NotImplemented explaining the missing backend", ae.ErrorCode(), ae.ErrorMessage())
	}
	var re *awshttp.ResponseError
	if !errors.As(err, &re) || re.HTTPStatusCode() != http.StatusNotImplemented {
		t.Errorf("want HTTP 501, got %v", err)
	}
	if c := s.Calls(); len(c) != 1 || c[0].Service != "sqs" || c[0].Action != "ReceiveMessage" || c[0].ErrorCode != "NotImplemented" {
		t.Errorf("calls = %+v", c)
	}
}

func TestSQSBackendDown(t *testing.T) {
	backend := httptest.NewServer(http.NotFoundHandler())
	backendURL := backend.URL
	backend.Close() // nothing listens there any more
	s := startFake(t, Options{SQSBackend: backendURL})
	_, err := sqsClient(s).GetQueueUrl(context.Background(), &sqs.GetQueueUrlInput{QueueName: aws.String("q")})
	if code := errCode(t, err); code != "ServiceUnavailable" {
		t.Errorf("code = %q (%v), want ServiceUnavailable", code, err)
	}
	if c := s.Calls(); len(c) != 1 || c[0].ErrorCode != "ServiceUnavailable" {
		t.Errorf("calls = %+v", c)
	}
}

// TestUnrecognisedRequests posts raw forms, since the SDK cannot send these.
func TestUnrecognisedRequests(t *testing.T) {
	s := startFake(t, Options{})
	tests := []struct {
		name        string
		form        url.Values
		wantService string
		wantCode    string
		ec2Format   bool
	}{
		{"unknown ec2 action", url.Values{"Action": {"LaunchRockets"}, "Version": {ec2Version}}, "ec2", "InvalidAction", true},
		{"unknown autoscaling action", url.Values{"Action": {"LaunchRockets"}, "Version": {asgVersion}}, "autoscaling", "InvalidAction", false},
		{"unknown elasticloadbalancing action", url.Values{"Action": {"LaunchRockets"}, "Version": {elbVersion}}, "elasticloadbalancing", "InvalidAction", false},
		{"unknown version", url.Values{"Action": {"DescribeInstances"}, "Version": {"1999-01-01"}}, "unknown", "NoSuchVersion", false},
		{"no action", url.Values{"Version": {ec2Version}}, "ec2", "MissingAction", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := http.PostForm(s.URL(), tt.form)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("status = %d, want 400", resp.StatusCode)
			}
			// Decode with the same element paths the SDK's error decoders use.
			var e struct {
				XMLName   xml.Name
				EC2Code   string `xml:"Errors>Error>Code"`
				QueryCode string `xml:"Error>Code"`
				QueryType string `xml:"Error>Type"`
			}
			if err := xml.NewDecoder(resp.Body).Decode(&e); err != nil {
				t.Fatal(err)
			}
			code, root := e.QueryCode, "ErrorResponse"
			if tt.ec2Format {
				code, root = e.EC2Code, "Response"
			}
			if code != tt.wantCode || e.XMLName.Local != root {
				t.Errorf("got <%s> code %q, want <%s> code %q", e.XMLName.Local, code, root, tt.wantCode)
			}
			if !tt.ec2Format && e.QueryType != "Sender" {
				t.Errorf("error type = %q, want Sender", e.QueryType)
			}
			calls := s.Calls()
			if last := calls[len(calls)-1]; last.Service != tt.wantService || last.ErrorCode != tt.wantCode {
				t.Errorf("recorded %+v, want service %q code %q", last, tt.wantService, tt.wantCode)
			}
		})
	}
}

func TestCallRecording(t *testing.T) {
	s := startFake(t, Options{})
	seedInstances(s)
	before := time.Now()
	client := ec2Client(s)
	ctx := context.Background()
	if _, err := client.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{"i-0001"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{"i-404"}}); err == nil {
		t.Fatal("want an error for an unknown instance")
	}

	calls := s.Calls()
	if len(calls) != 2 {
		t.Fatalf("got %d calls, want 2", len(calls))
	}
	first, second := calls[0], calls[1]
	if first.Service != "ec2" || first.Action != "DescribeInstances" || first.ErrorCode != "" ||
		first.Params.Get("InstanceId.1") != "i-0001" || first.Params.Get("Version") != ec2Version {
		t.Errorf("first call = %+v", first)
	}
	if first.At.Before(before) || first.At.After(time.Now()) {
		t.Errorf("first call time %v outside the test's window", first.At)
	}
	if second.ErrorCode != "InvalidInstanceID.NotFound" || second.Params.Get("InstanceId.1") != "i-404" {
		t.Errorf("second call = %+v", second)
	}

	// Calls returns copies.
	calls[0].Params.Set("InstanceId.1", "tampered")
	if got := s.Calls()[0].Params.Get("InstanceId.1"); got != "i-0001" {
		t.Errorf("mutating the returned calls changed the record: %q", got)
	}

	// Concurrent use, for the race detector.
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			id := fmt.Sprintf("i-c%02d", i)
			s.AddInstance(Instance{ID: id})
			if _, err := client.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}}); err != nil {
				t.Error(err)
			}
			s.CallCount("ec2", "")
		})
	}
	wg.Wait()
	if n := s.CallCount("ec2", "DescribeInstances"); n != 18 {
		t.Errorf("DescribeInstances calls = %d, want 18", n)
	}
	if n := s.CallCount("", ""); n != 18 {
		t.Errorf("all calls = %d, want 18", n)
	}
}

// OnCall sees each request before it is answered or forwarded, with the SQS body recorded.
func TestOnCall(t *testing.T) {
	var mu sync.Mutex
	var seen []Call
	forwarded := 0
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if len(seen) == 0 {
			t.Error("the request reached the backend before OnCall saw it")
		}
		forwarded++
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		io.WriteString(w, `{}`)
	}))
	defer backend.Close()
	s := startFake(t, Options{SQSBackend: backend.URL})
	seedInstances(s)
	s.OnCall(func(c Call) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, c)
	})
	ctx := context.Background()
	if _, err := sqsClient(s).DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String("http://q/1/q"), ReceiptHandle: aws.String("m-1#r-1")}); err != nil {
		t.Fatal(err)
	}
	if _, err := ec2Client(s).DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{"i-0001"}}); err != nil {
		t.Fatal(err)
	}
	s.OnCall(nil)
	if _, err := ec2Client(s).DescribeInstances(ctx, &ec2.DescribeInstancesInput{}); err != nil {
		t.Fatal(err)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 || forwarded != 1 {
		t.Fatalf("OnCall saw %d calls (want 2), backend got %d (want 1)", len(seen), forwarded)
	}
	if seen[0].Action != "DeleteMessage" || !strings.Contains(seen[0].Body, `"ReceiptHandle":"m-1#r-1"`) {
		t.Errorf("first call %+v, want DeleteMessage with its receipt handle in the body", seen[0])
	}
	if seen[1].Action != "DescribeInstances" || seen[1].Params.Get("InstanceId.1") != "i-0001" || seen[1].Body != "" {
		t.Errorf("second call %+v", seen[1])
	}
	if got := s.Calls()[0].Body; got != seen[0].Body {
		t.Errorf("Calls() body %q, OnCall body %q", got, seen[0].Body)
	}
}

func TestServerLifecycle(t *testing.T) {
	s := New(Options{})
	if s.URL() != "" {
		t.Errorf("URL before Start = %q, want empty", s.URL())
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(s.URL())
	if err != nil || u.Hostname() != "127.0.0.1" || u.Port() == "" || u.Port() == "0" {
		t.Errorf("URL = %q, want http://127.0.0.1:<port>", s.URL())
	}
	if err := s.Start(); err == nil {
		t.Error("second Start succeeded")
	}
	s.Close()
	if _, err := http.Get(s.URL()); err == nil {
		t.Error("server still answers after Close")
	}

	if err := New(Options{SQSBackend: "not a url"}).Start(); err == nil {
		t.Error("Start with an invalid SQSBackend succeeded")
	}
}

// TestServeHTTPWithoutStart checks the fake also works as a plain handler.
func TestServeHTTPWithoutStart(t *testing.T) {
	s := New(Options{})
	s.AddInstance(Instance{ID: "i-1"})
	srv := httptest.NewServer(s)
	defer srv.Close()
	out, err := ec2.NewFromConfig(awsConfig(), func(o *ec2.Options) { o.BaseEndpoint = aws.String(srv.URL) }).
		DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{})
	if err != nil {
		t.Fatal(err)
	}
	if got := instanceIDs(out); !slices.Equal(got, []string{"i-1"}) {
		t.Errorf("instances = %v", got)
	}
}

func TestAddAndRemoveInstance(t *testing.T) {
	s := startFake(t, Options{})
	client := ec2Client(s)
	ctx := context.Background()
	nameTags := func() []string {
		t.Helper()
		out, err := client.DescribeTags(ctx, &ec2.DescribeTagsInput{})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, d := range out.Tags {
			got = append(got, aws.ToString(d.ResourceId)+"="+aws.ToString(d.Value))
		}
		return got
	}

	tags := map[string]string{"Name": "a"}
	s.AddInstance(Instance{ID: "i-1", Tags: tags})
	s.AddInstance(Instance{ID: "i-2", Tags: map[string]string{"Name": "b"}})
	tags["Name"] = "changed after add" // the fake must keep its own copy
	if got := nameTags(); !slices.Equal(got, []string{"i-1=a", "i-2=b"}) {
		t.Errorf("tags = %v, want [i-1=a i-2=b]", got)
	}

	s.AddInstance(Instance{ID: "i-1", State: "stopping"}) // replaces in place
	s.RemoveInstance("i-2")
	s.RemoveInstance("i-unknown")
	_, err := client.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{"i-2"}})
	if code := errCode(t, err); code != "InvalidInstanceID.NotFound" {
		t.Errorf("removed instance: code %q, want InvalidInstanceID.NotFound", code)
	}
	out, err := client.DescribeInstances(ctx, &ec2.DescribeInstancesInput{})
	if err != nil {
		t.Fatal(err)
	}
	if ids := instanceIDs(out); !slices.Equal(ids, []string{"i-1"}) {
		t.Fatalf("instances = %v, want [i-1]", ids)
	}
	if in := out.Reservations[0].Instances[0]; in.State.Name != ec2types.InstanceStateNameStopping || len(in.Tags) != 0 {
		t.Errorf("replaced instance: state %s, tags %v; want stopping, none", in.State.Name, in.Tags)
	}
	if got := nameTags(); len(got) != 0 {
		t.Errorf("tags after replace and remove = %v, want none", got)
	}
}

func TestEC2DescribeInstancesDryRun(t *testing.T) {
	s := startFake(t, Options{})
	s.AddInstance(Instance{ID: "i-1"})
	_, err := ec2Client(s).DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{DryRun: aws.Bool(true)})
	if code := errCode(t, err); code != "DryRunOperation" {
		t.Fatalf("dry run: error code %q (%v), want DryRunOperation", code, err)
	}
	var re *awshttp.ResponseError
	if !errors.As(err, &re) || re.HTTPStatusCode() != http.StatusPreconditionFailed {
		t.Errorf("dry run status: %v, want 412", err)
	}
	out, err := ec2Client(s).DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{DryRun: aws.Bool(false)})
	if err != nil || len(out.Reservations) != 1 {
		t.Errorf("DryRun=false: %v, %d reservations; want the instance", err, len(out.Reservations))
	}
}

func TestDeny(t *testing.T) {
	ctx := context.Background()
	dryRun := func(s *Server) error {
		_, err := ec2Client(s).DescribeInstances(ctx, &ec2.DescribeInstancesInput{DryRun: aws.Bool(true)})
		return err
	}
	complete := func(s *Server) error {
		_, err := asgClient(s).CompleteLifecycleAction(ctx, &autoscaling.CompleteLifecycleActionInput{
			AutoScalingGroupName: aws.String("g"), LifecycleHookName: aws.String("h"),
			LifecycleActionResult: aws.String("CONTINUE"), InstanceId: aws.String("i-1")})
		return err
	}
	queueAttributes := func(s *Server) error {
		_, err := sqsClient(s).GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(s.URL() + "/1/q")})
		return err
	}
	targetHealth := func(s *Server) error {
		_, err := elbClient(s).DescribeTargetHealth(ctx, &elb.DescribeTargetHealthInput{TargetGroupArn: aws.String("arn:aws:elasticloadbalancing:us-east-1:000000000000:targetgroup/gone/0000000000000000")})
		return err
	}
	tests := []struct {
		name            string
		service, action string
		call            func(*Server) error
		wantCode        string
		allowedCode     string // the error once ClearFaults lifts the denial
	}{
		{"ec2 dry run", "ec2", "DescribeInstances", dryRun, "UnauthorizedOperation", "DryRunOperation"},
		{"autoscaling", "autoscaling", "CompleteLifecycleAction", complete, "AccessDenied", "ValidationError"},
		{"sqs", "sqs", "GetQueueAttributes", queueAttributes, "AccessDenied", "NotImplemented"},
		{"elasticloadbalancing", "elasticloadbalancing", "DescribeTargetHealth", targetHealth, "AccessDenied", "TargetGroupNotFound"},
		{"whole service", "autoscaling", "", complete, "AccessDenied", "ValidationError"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := startFake(t, Options{})
			s.Deny(tt.service, tt.action)
			err := tt.call(s)
			if code := errCode(t, err); code != tt.wantCode {
				t.Fatalf("denied: error code %q (%v), want %q", code, err, tt.wantCode)
			}
			var re *awshttp.ResponseError
			if !errors.As(err, &re) || re.HTTPStatusCode() != http.StatusForbidden {
				t.Errorf("denied: status %v, want 403", err)
			}
			s.ClearFaults()
			if code := errCode(t, tt.call(s)); code != tt.allowedCode {
				t.Errorf("after ClearFaults: error code %q, want %q", code, tt.allowedCode)
			}
		})
	}
}

// A request whose sender dies mid-body (a SIGKILLed Lifeboat) is refused and never forwarded;
// the OnCall function sees it failed from the start, so a check of deletes does not read a
// delete that never happened.
func TestSQSBodyCutShort(t *testing.T) {
	forwarded := make(chan string, 1)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		forwarded <- r.Header.Get("X-Amz-Target")
	}))
	defer backend.Close()
	s := startFake(t, Options{SQSBackend: backend.URL})
	seen := make(chan Call, 1)
	s.OnCall(func(c Call) { seen <- c })

	conn, err := net.Dial("tcp", strings.TrimPrefix(s.URL(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "POST / HTTP/1.1\r\nHost: sqs\r\nX-Amz-Target: AmazonSQS.DeleteMessage\r\nContent-Length: 200\r\n\r\n{\"QueueUrl\":")
	conn.Close()

	select {
	case c := <-seen:
		if c.Action != "DeleteMessage" || c.ErrorCode != "InvalidRequest" {
			t.Errorf("OnCall saw %+v, want a DeleteMessage failed with InvalidRequest", c)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the cut request never reached OnCall")
	}
	select {
	case target := <-forwarded:
		t.Errorf("the cut request %s was forwarded", target)
	case <-time.After(200 * time.Millisecond):
	}
	if c := s.Calls(); len(c) != 1 || c[0].ErrorCode != "InvalidRequest" {
		t.Errorf("calls = %+v", c)
	}
}
