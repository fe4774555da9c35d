// SPDX-License-Identifier: Apache-2.0

package preflight

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	rbacv1 "k8s.io/api/rbac/v1"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/permissions"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

func permissionStrings(perms []permissions.Permission) []string {
	out := make([]string, len(perms))
	for i, p := range perms {
		out[i] = p.String()
	}
	return out
}

func TestPermissions(t *testing.T) {
	// delete pods always: a drain whose deadline moves earlier cuts the grace of leaving pods.
	agentBase := []string{"get nodes", "patch nodes", "patch nodes/status", "list pods", "watch pods", "create pods/eviction", "delete pods", "get persistentvolumeclaims", "list volumeattachments.storage.k8s.io", "watch volumeattachments.storage.k8s.io"}
	controllerBase := []string{"get nodes", "patch nodes", "patch nodes/status", "list nodes", "watch nodes", "list pods", "watch pods", "create pods/eviction", "delete pods",
		"get persistentvolumeclaims", "list volumeattachments.storage.k8s.io", "watch volumeattachments.storage.k8s.io"}
	events := []string{"create events", "patch events"} // EMIT_KUBERNETES_EVENTS, on by default
	leases := func(ns string) []string {
		return []string{
			"get leases.coordination.k8s.io lifeboat-controller in " + ns,
			"create leases.coordination.k8s.io in " + ns,
			"update leases.coordination.k8s.io lifeboat-controller in " + ns,
		}
	}
	controllerEnv := []string{"ENABLE_SQS_TERMINATION_DRAINING", "true", "QUEUE_URL", "https://sqs.us-east-1.amazonaws.com/1/q"}
	tests := []struct {
		name string
		mode config.Mode
		env  []string
		want []string
	}{
		{"agent defaults: Events on", config.ModeAgent, []string{"NODE_NAME", "n"}, slices.Concat(agentBase, events)},
		{"agent: force delete, Events off", config.ModeAgent,
			[]string{"NODE_NAME", "n", "FORCE_DELETE_BEFORE_DEADLINE_SECONDS", "20", "EMIT_KUBERNETES_EVENTS", "false"}, agentBase},
		{"agent: DRY_RUN keeps every permission", config.ModeAgent, []string{"NODE_NAME", "n", "DRY_RUN", "true"}, slices.Concat(agentBase, events)},
		{"agent: no volume wait, no volume reads", config.ModeAgent, []string{"NODE_NAME", "n", "WAIT_FOR_VOLUME_DETACHMENT", "false"},
			slices.Concat(agentBase[:7], events)},
		{"agent: no node condition, no status writes", config.ModeAgent, []string{"NODE_NAME", "n", "NODE_CONDITION", "false"},
			slices.Concat(agentBase[:2], agentBase[3:], events)},
		{"controller defaults: Lease in kube-system", config.ModeController, controllerEnv,
			slices.Concat(controllerBase, events, leases("kube-system"))},
		{"controller: NAMESPACE moves the Lease; Events off", config.ModeController,
			append(slices.Clone(controllerEnv), "NAMESPACE", "lifeboat", "EMIT_KUBERNETES_EVENTS", "false"),
			slices.Concat(controllerBase, leases("lifeboat"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := sandboxtest.Config(t, tt.mode, tt.env...)
			perms := permissions.Permissions(tt.mode, cfg)
			if got := permissionStrings(perms); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("permissions:\n got %q\nwant %q", got, tt.want)
			}
			for _, p := range perms {
				if p.Why == "" {
					t.Errorf("%s: no reason given", p)
				}
			}
		})
	}
}

func TestPolicyRules(t *testing.T) {
	cfg := sandboxtest.Config(t, config.ModeController, "QUEUE_URL", "https://sqs.us-east-1.amazonaws.com/1/q",
		"FORCE_DELETE_BEFORE_DEADLINE_SECONDS", "10", "EMIT_KUBERNETES_EVENTS", "true")
	got := permissions.PolicyRules(permissions.Permissions(config.ModeController, cfg))
	want := map[string][]rbacv1.PolicyRule{
		"": {
			{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
			{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "patch", "watch"}},
			{APIGroups: []string{""}, Resources: []string{"nodes/status"}, Verbs: []string{"patch"}},
			{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"}, Verbs: []string{"get"}},
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"delete", "list", "watch"}},
			{APIGroups: []string{""}, Resources: []string{"pods/eviction"}, Verbs: []string{"create"}},
			{APIGroups: []string{"storage.k8s.io"}, Resources: []string{"volumeattachments"}, Verbs: []string{"list", "watch"}},
		},
		"kube-system": {
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}},
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "update"}, ResourceNames: []string{"lifeboat-controller"}},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("rules:\n got %+v\nwant %+v", got, want)
	}
}

func TestCheckIdentity(t *testing.T) {
	queue := []string{"QUEUE_URL", "https://sqs.us-east-1.amazonaws.com/1/q"}
	tests := []struct {
		name string
		env  []string
		want map[string]Status // by check
		fix  string            // a fix must mention this
	}{
		{"NTH defaults: no cluster name", queue,
			map[string]Status{"identity: CLUSTER_NAME": StatusWarn, "identity: CHECK_TAG_BEFORE_DRAINING": StatusOK, "identity: USE_PROVIDER_ID": StatusOK},
			"set CLUSTER_NAME"},
		{"all set", append(slices.Clone(queue), "CLUSTER_NAME", "prod", "USE_PROVIDER_ID", "true"),
			map[string]Status{"identity: CLUSTER_NAME": StatusOK, "identity: CHECK_TAG_BEFORE_DRAINING": StatusOK, "identity: USE_PROVIDER_ID": StatusOK}, ""},
		{"tag check off", append(slices.Clone(queue), "CLUSTER_NAME", "prod", "CHECK_TAG_BEFORE_DRAINING", "false"),
			map[string]Status{"identity: CLUSTER_NAME": StatusOK, "identity: CHECK_TAG_BEFORE_DRAINING": StatusWarn, "identity: USE_PROVIDER_ID": StatusOK},
			"CHECK_TAG_BEFORE_DRAINING=true"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rows := CheckIdentity(sandboxtest.Config(t, config.ModeController, tt.env...))
			got := map[string]Status{}
			fixes := ""
			for _, r := range rows {
				got[r.Check] = r.Status
				if r.Status != StatusOK && r.Fix == "" {
					t.Errorf("%s is %s without a fix", r.Check, r.Status)
				}
				fixes += r.Fix
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("statuses %v, want %v", got, tt.want)
			}
			if !strings.Contains(fixes, tt.fix) {
				t.Errorf("fixes %q lack %q", fixes, tt.fix)
			}
		})
	}

	// Validation refuses this combination at start; the check still says why if asked.
	cfg := sandboxtest.Config(t, "", queue...)
	cfg.ManagedTag = " "
	rows := CheckIdentity(cfg)
	if i := slices.IndexFunc(rows, func(r Row) bool { return r.Check == "identity: CHECK_TAG_BEFORE_DRAINING" }); i < 0 ||
		rows[i].Status != StatusFail || !strings.Contains(rows[i].Fix, "MANAGED_TAG") {
		t.Errorf("empty MANAGED_TAG with the tag check on: %+v, want a failure naming MANAGED_TAG", rows)
	}
}

func apiErr(code string, status int) error {
	return &awshttp.ResponseError{
		ResponseError: &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}},
			Err: &smithy.GenericAPIError{Code: code, Message: "message for " + code}},
	}
}

func TestAWSRow(t *testing.T) {
	tests := []struct {
		name       string
		err        error
		want       Status
		fixMention string
	}{
		{"allowed", nil, StatusOK, ""},
		{"refused after authorization", apiErr("ReceiptHandleIsInvalid", 400), StatusOK, ""},
		{"denied", apiErr("AccessDenied", 403), StatusFail, "allow sqs:DeleteMessage"},
		{"EC2 denial", apiErr("UnauthorizedOperation", 403), StatusFail, "allow sqs:DeleteMessage"},
		{"bad credentials", apiErr("InvalidClientTokenId", 403), StatusFail, "credentials were refused"},
		{"server error: unknown", apiErr("InternalError", 500), StatusFail, "AWS_ENDPOINT"},
		{"throttled: unknown", apiErr("Throttling", 400), StatusFail, "AWS_ENDPOINT"},
		{"no answer", fmt.Errorf("send: %w", errors.New("connection refused")), StatusFail, "AWS_ENDPOINT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := awsRow("sqs:DeleteMessage", "why", tt.err)
			if r.Status != tt.want || !strings.Contains(r.Fix, tt.fixMention) {
				t.Errorf("row %+v, want status %s and a fix mentioning %q", r, tt.want, tt.fixMention)
			}
			if tt.err != nil && r.Status == StatusFail && r.Detail == "" {
				t.Error("a failure without detail")
			}
		})
	}
}

func TestPrint(t *testing.T) {
	rows := []Row{
		{Check: "kubernetes api", Status: StatusOK, Detail: "API server v1.35.0"},
		{Check: "rbac: patch nodes", Status: StatusFail, Detail: "taint the node", Fix: "add verb \"patch\""},
		{Check: "identity: CLUSTER_NAME", Status: StatusWarn, Detail: "unset,\n\tsee below", Fix: "set CLUSTER_NAME"},
	}
	var b strings.Builder
	if err := Print(&b, rows); err != nil {
		t.Fatal(err)
	}
	want := `STATUS  CHECK                   DETAIL
ok      kubernetes api          API server v1.35.0
FAIL    rbac: patch nodes       taint the node
                                fix: add verb "patch"
WARN    identity: CLUSTER_NAME  unset, see below
                                fix: set CLUSTER_NAME

preflight FAILED: 1 ok, 1 warning(s), 1 failed
`
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
	if !Failed(rows) || Failed(rows[:1]) || Failed([]Row{rows[0], rows[2]}) {
		t.Error("Failed: only a failing row fails a run; warnings do not")
	}

	b.Reset()
	Print(&b, rows[:1])
	if !strings.HasSuffix(b.String(), "preflight passed: 1 ok, 0 warning(s), 0 failed\n") {
		t.Errorf("passing summary:\n%s", b.String())
	}
}

// fakeSQS answers every call with the error set for it, and counts the calls.
type fakeSQS struct {
	attributes, delete, visibility error
	calls                          int
}

func (f *fakeSQS) GetQueueAttributes(context.Context, *sqs.GetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	f.calls++
	if f.attributes != nil {
		return nil, f.attributes
	}
	return &sqs.GetQueueAttributesOutput{Attributes: map[string]string{"ApproximateNumberOfMessages": "7"}}, nil
}

func (f *fakeSQS) DeleteMessage(context.Context, *sqs.DeleteMessageInput, ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	f.calls++
	return nil, f.delete
}

func (f *fakeSQS) ChangeMessageVisibility(context.Context, *sqs.ChangeMessageVisibilityInput, ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	f.calls++
	return nil, f.visibility
}

func TestCheckQueueAnswers(t *testing.T) {
	const url = "https://sqs.us-east-1.amazonaws.com/1/q"
	invalidHandle := apiErr("ReceiptHandleIsInvalid", 400)
	tests := []struct {
		name      string
		api       fakeSQS
		want      []Status
		wantCalls int
		detail    string // the first row's detail mentions this
	}{
		{"probes refused after authorization", fakeSQS{delete: invalidHandle, visibility: invalidHandle},
			[]Status{StatusOK, StatusOK, StatusOK}, 3, "7 message(s) waiting"},
		// AWS's query-compatible code and the JSON protocol's name for a missing queue.
		{"no such queue (query code)", fakeSQS{attributes: apiErr("AWS.SimpleQueueService.NonExistentQueue", 400)}, []Status{StatusFail}, 1, url},
		{"no such queue (JSON code)", fakeSQS{attributes: apiErr("QueueDoesNotExist", 400)}, []Status{StatusFail}, 1, url},
		{"bad credentials stop the probes", fakeSQS{attributes: apiErr("InvalidClientTokenId", 403)}, []Status{StatusFail}, 1, "InvalidClientTokenId"},
		{"attributes denied, delete denied", fakeSQS{attributes: apiErr("AccessDenied", 403), delete: apiErr("AccessDenied", 403), visibility: invalidHandle},
			[]Status{StatusWarn, StatusFail, StatusOK}, 3, "not confirmed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := tt.api
			rows := CheckQueue(context.Background(), &api, url)
			var got []Status
			for _, r := range rows {
				got = append(got, r.Status)
			}
			if !slices.Equal(got, tt.want) || api.calls != tt.wantCalls {
				t.Errorf("statuses %v after %d calls, want %v after %d: %+v", got, api.calls, tt.want, tt.wantCalls, rows)
			}
			if !strings.Contains(rows[0].Detail, tt.detail) {
				t.Errorf("detail %q lacks %q", rows[0].Detail, tt.detail)
			}
		})
	}
}

type ec2Answer struct{ err error }

func (e ec2Answer) DescribeInstances(context.Context, *ec2.DescribeInstancesInput, ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error) {
	return &ec2.DescribeInstancesOutput{}, e.err
}

func (e ec2Answer) DescribeInstanceStatus(context.Context, *ec2.DescribeInstanceStatusInput, ...func(*ec2.Options)) (*ec2.DescribeInstanceStatusOutput, error) {
	return &ec2.DescribeInstanceStatusOutput{}, e.err
}

func (e ec2Answer) DescribeCapacityReservations(context.Context, *ec2.DescribeCapacityReservationsInput, ...func(*ec2.Options)) (*ec2.DescribeCapacityReservationsOutput, error) {
	return &ec2.DescribeCapacityReservationsOutput{}, e.err
}

func TestCheckEC2Answers(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want Status
	}{
		{"dry run would succeed", apiErr("DryRunOperation", 412), StatusOK},
		{"denied", apiErr("UnauthorizedOperation", 403), StatusFail},
		{"bad credentials", apiErr("AuthFailure", 401), StatusFail},
		{"another refusal leaves it unknown", apiErr("InvalidParameterValue", 400), StatusFail},
		{"throttled", apiErr("RequestLimitExceeded", 503), StatusFail},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if r := CheckEC2(context.Background(), ec2Answer{tt.err}); r.Status != tt.want || (r.Status == StatusFail && r.Fix == "") {
				t.Errorf("row %+v, want %s", r, tt.want)
			}
		})
	}
}
