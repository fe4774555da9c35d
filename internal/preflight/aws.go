// SPDX-License-Identifier: Apache-2.0

package preflight

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/cloud/controlleronly"
)

// The AWS calls the checks make. Each is satisfied by the SDK's client for its service.
type (
	SQSAPI interface {
		GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
		DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
		ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
	}
	EC2API interface {
		DescribeInstances(ctx context.Context, in *ec2.DescribeInstancesInput, optFns ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error)
		DescribeInstanceStatus(ctx context.Context, in *ec2.DescribeInstanceStatusInput, optFns ...func(*ec2.Options)) (*ec2.DescribeInstanceStatusOutput, error)
		DescribeCapacityReservations(ctx context.Context, in *ec2.DescribeCapacityReservationsInput, optFns ...func(*ec2.Options)) (*ec2.DescribeCapacityReservationsOutput, error)
	}
	LoadBalancingAPI interface {
		DescribeTargetGroups(ctx context.Context, in *elbv2.DescribeTargetGroupsInput, optFns ...func(*elbv2.Options)) (*elbv2.DescribeTargetGroupsOutput, error)
	}
	AutoScalingAPI interface {
		DescribeAutoScalingInstances(ctx context.Context, in *autoscaling.DescribeAutoScalingInstancesInput, optFns ...func(*autoscaling.Options)) (*autoscaling.DescribeAutoScalingInstancesOutput, error)
		CompleteLifecycleAction(ctx context.Context, in *autoscaling.CompleteLifecycleActionInput, optFns ...func(*autoscaling.Options)) (*autoscaling.CompleteLifecycleActionOutput, error)
		DescribeLifecycleHooks(ctx context.Context, in *autoscaling.DescribeLifecycleHooksInput, optFns ...func(*autoscaling.Options)) (*autoscaling.DescribeLifecycleHooksOutput, error)
		DescribeAutoScalingGroups(ctx context.Context, in *autoscaling.DescribeAutoScalingGroupsInput, optFns ...func(*autoscaling.Options)) (*autoscaling.DescribeAutoScalingGroupsOutput, error)
		TerminateInstanceInAutoScalingGroup(ctx context.Context, in *autoscaling.TerminateInstanceInAutoScalingGroupInput, optFns ...func(*autoscaling.Options)) (*autoscaling.TerminateInstanceInAutoScalingGroupOutput, error)
		SetInstanceHealth(ctx context.Context, in *autoscaling.SetInstanceHealthInput, optFns ...func(*autoscaling.Options)) (*autoscaling.SetInstanceHealthOutput, error)
	}
)

// AWS holds the clients the AWS checks use (the controller's, and the agent's when it
// completes lifecycle hooks).
type AWS struct {
	SQS         SQSAPI
	EC2         EC2API
	AutoScaling AutoScalingAPI
	// LoadBalancing is nil when the mode does not wait for load-balancer targets.
	LoadBalancing LoadBalancingAPI
	// Setup reads the set-up that feeds the queue (EventBridge rules, the queue's policy).
	Setup cloud.Setup
}

// NewAWS builds the clients from an SDK configuration (see cloud.LoadAWSConfig).
func NewAWS(cfg aws.Config) AWS {
	return AWS{SQS: sqs.NewFromConfig(cfg), EC2: ec2.NewFromConfig(cfg), AutoScaling: autoscaling.NewFromConfig(cfg), LoadBalancing: elbv2.NewFromConfig(cfg),
		Setup: controlleronly.NewAWSSetup(cfg)}
}

// outcome is what an AWS answer says about a permission.
type outcome int

const (
	allowed     outcome = iota // the request got past authorization (maybe failing later, harmlessly)
	denied                     // IAM refused the action
	badIdentity                // the credentials themselves were refused
	noAnswer                   // no usable answer: network, endpoint, region, missing credentials, throttling, a server error
)

// classify reads an AWS error. An API error other than an authorization one means the
// request was authorized and then refused for what it asked, which is how the probes below
// test a permission without changing anything.
func classify(err error) (outcome, string) {
	if err == nil {
		return allowed, ""
	}
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) {
		return noAnswer, ""
	}
	code := apiErr.ErrorCode()
	var resp *awshttp.ResponseError
	if errors.As(err, &resp) && resp.HTTPStatusCode() >= 500 {
		return noAnswer, code // the service failed; the permission is unknown
	}
	switch code {
	case "Throttling", "ThrottlingException", "RequestLimitExceeded", "RequestThrottled":
		return noAnswer, code
	case "AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "UnauthorizedAccess":
		return denied, code
	case "InvalidClientTokenId", "AuthFailure", "SignatureDoesNotMatch", "ExpiredToken", "ExpiredTokenException",
		"UnrecognizedClientException", "InvalidAccessKeyId", "MissingAuthenticationToken":
		return badIdentity, code
	}
	return allowed, code
}

const (
	identityFix = "the AWS credentials were refused: check the role Lifeboat runs as (IRSA or EKS Pod Identity annotation on its service account, or the instance profile)"
	reachFix    = "check AWS_REGION and AWS_ENDPOINT, that the pod can reach the AWS endpoints (proxy, VPC endpoints), and that credentials are available to it"
)

// awsRow turns a probe's error into a row for the IAM action it tested.
func awsRow(action, okDetail string, err error) Row {
	row := Row{Check: action}
	switch kind, code := classify(err); kind {
	case allowed:
		row.Status, row.Detail = StatusOK, okDetail
	case denied:
		row.Status, row.Detail = StatusFail, code+": "+shortError(err)
		row.Fix = fmt.Sprintf("allow %s in the IAM policy of the role Lifeboat runs as", action)
	case badIdentity:
		row.Status, row.Detail, row.Fix = StatusFail, code+": "+shortError(err), identityFix
	default:
		row.Status, row.Detail, row.Fix = StatusFail, shortError(err), reachFix
		if code != "" {
			row.Detail = code + ": " + row.Detail
		}
	}
	return row
}

// shortError keeps the SDK's innermost explanation, without the operation preamble.
func shortError(err error) string {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		if msg := apiErr.ErrorMessage(); msg != "" {
			return msg
		}
		return apiErr.ErrorCode()
	}
	return err.Error()
}

// probeHandle is a receipt handle no message has: deleting it or changing its visibility
// can only fail, after authorization.
const probeHandle = "lifeboat-preflight-probe"

// CheckQueue reads the queue's attributes (it exists, it answers) and then probes the
// actions the controller needs on it without touching a message: DeleteMessage and
// ChangeMessageVisibility with a receipt handle no message has. ReceiveMessage cannot be
// tested this way (receiving counts towards a message's maxReceiveCount) and is not checked.
func CheckQueue(ctx context.Context, api SQSAPI, queueURL string) []Row {
	row := Row{Check: "sqs queue"}
	out, err := api.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(queueURL),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages},
	})
	kind, code := classify(err)
	switch {
	case err == nil:
		row.Status = StatusOK
		row.Detail = fmt.Sprintf("%s answers, %s message(s) waiting", queueURL, out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)])
	case isNoQueue(code):
		row.Status, row.Detail = StatusFail, fmt.Sprintf("%s: %s: %s", queueURL, code, shortError(err))
		row.Fix = "QUEUE_URL must name an existing queue in AWS_REGION (the queue the EventBridge rules and lifecycle hooks send to)"
		return []Row{row}
	case kind == denied:
		// Lifeboat itself never reads queue attributes: the probes below decide.
		row.Status, row.Detail = StatusWarn, "sqs:GetQueueAttributes denied, so the queue's existence is not confirmed ("+code+")"
		row.Fix = "optional: allow sqs:GetQueueAttributes on the queue so preflight can confirm it exists"
	case kind == badIdentity || kind == noAnswer:
		return []Row{awsRow(row.Check, "", err)}
	default:
		row.Status, row.Detail = StatusFail, fmt.Sprintf("%s: %s: %s", queueURL, code, shortError(err))
		row.Fix = "check QUEUE_URL: the queue's full URL, as the SQS console shows it"
		return []Row{row}
	}
	_, delErr := api.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(queueURL), ReceiptHandle: aws.String(probeHandle)})
	_, visErr := api.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
		QueueUrl: aws.String(queueURL), ReceiptHandle: aws.String(probeHandle), VisibilityTimeout: 0,
	})
	return []Row{row,
		queueProbeRow("sqs:DeleteMessage", "delete handled messages", delErr),
		queueProbeRow("sqs:ChangeMessageVisibility", "keep a message hidden while its drain runs", visErr),
	}
}

func queueProbeRow(action, why string, err error) Row {
	if _, code := classify(err); isNoQueue(code) {
		return Row{Check: action, Status: StatusFail, Detail: code + ": " + shortError(err),
			Fix: "QUEUE_URL must name an existing queue in AWS_REGION"}
	}
	return awsRow(action, why, err)
}

func isNoQueue(code string) bool {
	return code == "AWS.SimpleQueueService.NonExistentQueue" || code == "QueueDoesNotExist" || strings.HasSuffix(code, "NonExistentQueue")
}

// CheckEC2 asks DescribeInstances with DryRun: EC2 answers DryRunOperation when the call
// would be allowed and UnauthorizedOperation when not, and describes nothing either way.
func CheckEC2(ctx context.Context, api EC2API) Row {
	_, err := api.DescribeInstances(ctx, &ec2.DescribeInstancesInput{DryRun: aws.Bool(true)})
	const action, why = "ec2:DescribeInstances", "read instance tags and private DNS names to decide which instances are this cluster's"
	var apiErr smithy.APIError
	switch {
	case err == nil:
		// Only a server that ignores DryRun answers with data; the call was allowed all the same.
		return Row{Check: action, Status: StatusOK, Detail: why}
	case errors.As(err, &apiErr) && apiErr.ErrorCode() == "DryRunOperation":
		return Row{Check: action, Status: StatusOK, Detail: why}
	case errors.As(err, &apiErr) && apiErr.ErrorCode() != "UnauthorizedOperation" && apiErr.ErrorCode() != "AuthFailure":
		// Anything else from EC2 (throttling, a server error) leaves the answer unknown.
		return Row{Check: action, Status: StatusFail, Detail: apiErr.ErrorCode() + ": " + shortError(err),
			Fix: "EC2 did not answer the dry run; run preflight again, and check AWS_ENDPOINT"}
	}
	return awsRow(action, why, err)
}

// probeGroup names an Auto Scaling group and hook that do not exist, and probeInstance an
// instance id no instance has, so the probe can complete nothing.
const (
	probeGroup    = "lifeboat-preflight-probe"
	probeInstance = "i-00000000000000000"
)

// CheckAutoScaling calls CompleteLifecycleAction for a group that does not exist: an
// authorized call fails with ValidationError, a denied one with AccessDenied. A policy that
// allows the action only on tagged groups also denies this probe, which is why a denial is
// a warning here rather than a failure.
func CheckAutoScaling(ctx context.Context, api AutoScalingAPI) Row {
	_, err := api.CompleteLifecycleAction(ctx, &autoscaling.CompleteLifecycleActionInput{
		AutoScalingGroupName: aws.String(probeGroup), LifecycleHookName: aws.String(probeGroup),
		InstanceId: aws.String(probeInstance), LifecycleActionResult: aws.String("CONTINUE"),
	})
	const action = "autoscaling:CompleteLifecycleAction"
	return warnIfDenied(awsRow(action, "complete lifecycle hooks once a node is drained (or, on launch, Ready)", err), err,
		func(why string) string { return "denied for a group that does not exist (" + why + ")" },
		"allow "+action+" for the cluster's Auto Scaling groups; if the policy already allows it only on tagged groups, this probe cannot tell and the warning can be ignored")
}

// warnIfDenied turns a probe's failure for lack of permission into a warning, with detail
// built from the denial and fix, for actions Lifeboat can work without.
func warnIfDenied(row Row, err error, detail func(why string) string, fix string) Row {
	if kind, _ := classify(err); kind == denied {
		row.Status, row.Detail, row.Fix = StatusWarn, detail(row.Detail), fix
	}
	return row
}

// CheckLifecycleHooks asks DescribeLifecycleHooks for a group that does not exist: an
// authorized call fails with ValidationError, a denied one with AccessDenied. Lifeboat reads a
// termination hook's heartbeat timeout to set its drain's deadline; without the permission it
// still works, with pods keeping their own grace periods, so a denial is a warning.
func CheckLifecycleHooks(ctx context.Context, api AutoScalingAPI) Row {
	_, err := api.DescribeLifecycleHooks(ctx, &autoscaling.DescribeLifecycleHooksInput{AutoScalingGroupName: aws.String(probeGroup)})
	const action = "autoscaling:DescribeLifecycleHooks"
	return warnIfDenied(awsRow(action, "read termination hooks' heartbeat timeouts: the drain's deadline", err), err,
		func(why string) string {
			return "denied (" + why + "): a termination hook's heartbeat timeout is unknown, so pods keep their own grace periods and a short hook may end before they do"
		},
		"allow "+action+" in the IAM policy of the role Lifeboat runs as")
}

// CheckTargetGroups reads one page of one target group, as the wait before the hand-back
// does (WAIT_FOR_LOAD_BALANCER_TARGETS). Without the permission Lifeboat still works, handing
// instances back without waiting for their targets to drain, so a denial is a warning.
func CheckTargetGroups(ctx context.Context, api LoadBalancingAPI) Row {
	_, err := api.DescribeTargetGroups(ctx, &elbv2.DescribeTargetGroupsInput{PageSize: aws.Int32(1)})
	const action = "elasticloadbalancing:DescribeTargetGroups"
	return warnIfDenied(awsRow(action, "wait until the instance and its pods' IPs have left every target group before the hand-back", err), err,
		func(why string) string {
			return "denied (" + why + "): the wait for load-balancer targets is skipped, so an instance may be terminated while a load balancer still sends it requests"
		},
		"allow "+action+" and elasticloadbalancing:DescribeTargetHealth in the IAM policy, or set WAIT_FOR_LOAD_BALANCER_TARGETS=false")
}

// CheckGroupLookup asks DescribeAutoScalingInstances about an instance that does not exist, as
// the controller does before every lifecycle call to confirm the instance is in the group a
// Node's record names: without the permission no lifecycle action is completed (each hook runs
// to its timeout), so a denial fails.
func CheckGroupLookup(ctx context.Context, api AutoScalingAPI) Row {
	_, err := api.DescribeAutoScalingInstances(ctx, &autoscaling.DescribeAutoScalingInstancesInput{InstanceIds: []string{probeInstance}})
	return awsRow("autoscaling:DescribeAutoScalingInstances", "confirm an instance's Auto Scaling group before completing or heartbeating its lifecycle action", err)
}

// CheckInstanceGroup asks which Auto Scaling group the instance is in, as the agent does
// before completing its termination hook (ASG_LIFECYCLE_HOOK_NAME).
func CheckInstanceGroup(ctx context.Context, api AutoScalingAPI, instanceID string) Row {
	const action = "autoscaling:DescribeAutoScalingInstances"
	out, err := api.DescribeAutoScalingInstances(ctx, &autoscaling.DescribeAutoScalingInstancesInput{InstanceIds: []string{instanceID}})
	if err != nil {
		if kind, _ := classify(err); kind == allowed {
			return Row{Check: action, Status: StatusFail, Detail: shortError(err), Fix: reachFix}
		}
		return awsRow(action, "", err)
	}
	for _, i := range out.AutoScalingInstances {
		if aws.ToString(i.InstanceId) == instanceID {
			return Row{Check: action, Status: StatusOK, Detail: fmt.Sprintf("instance %s is in group %s", instanceID, aws.ToString(i.AutoScalingGroupName))}
		}
	}
	return Row{Check: action, Status: StatusWarn, Detail: fmt.Sprintf("instance %s is in no Auto Scaling group: there is no lifecycle hook to complete", instanceID),
		Fix: "unset ASG_LIFECYCLE_HOOK_NAME on nodes outside Auto Scaling groups"}
}
