// SPDX-License-Identifier: Apache-2.0

package cloud

import (
	"errors"
	"maps"
	"slices"

	"github.com/aws/smithy-go"
)

// deniedCodes are the error codes with which AWS refuses a call for want of permission.
var deniedCodes = map[string]bool{
	"AccessDenied": true, "AccessDeniedException": true, "UnauthorizedOperation": true,
	"UnauthorizedAccess": true, "AuthorizationError": true, "Client.UnauthorizedOperation": true,
}

// Denied reports whether err is AWS refusing a call for want of permission, with its code.
func Denied(err error) (code string, ok bool) {
	if errors.Is(err, ErrAccessDenied) {
		return "AccessDenied", true
	}
	var ae smithy.APIError
	if errors.As(err, &ae) && deniedCodes[ae.ErrorCode()] {
		return ae.ErrorCode(), true
	}
	return "", false
}

// operationService is the IAM service prefix of each operation Lifeboat calls.
var operationService = map[string]string{
	"DescribeInstances": "ec2", "DescribeInstanceStatus": "ec2", "DescribeCapacityReservations": "ec2",
	"TerminateInstances": "ec2", "RebootInstances": "ec2",
	"DescribeAutoScalingInstances": "autoscaling", "DescribeAutoScalingGroups": "autoscaling",
	"DescribeLifecycleHooks": "autoscaling", "CompleteLifecycleAction": "autoscaling",
	"RecordLifecycleActionHeartbeat": "autoscaling", "SetInstanceHealth": "autoscaling",
	"TerminateInstanceInAutoScalingGroup": "autoscaling",
	"ReceiveMessage":                      "sqs", "DeleteMessage": "sqs", "ChangeMessageVisibility": "sqs", "GetQueueAttributes": "sqs",
	"DescribeTargetGroups": "elasticloadbalancing", "DescribeTargetHealth": "elasticloadbalancing",
	"ListRuleNamesByTarget": "events", "DescribeRule": "events",
	"DescribeNodegroup": "eks",
}

// Operations are the AWS operations Lifeboat calls, sorted.
func Operations() []string {
	return slices.Sorted(maps.Keys(operationService))
}

// IAMAction is the IAM action that allows operation ("ec2:DescribeInstances"), or the
// operation itself when its service is not known.
func IAMAction(operation string) string {
	if s, ok := operationService[operation]; ok {
		return s + ":" + operation
	}
	return operation
}
