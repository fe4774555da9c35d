// SPDX-License-Identifier: Apache-2.0

package preflight

import (
	"context"
	"errors"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/smithy-go"
)

// CheckCapacityBlockLookup is the ec2:DescribeInstances row when ownership does not need EC2
// (CHECK_TAG_BEFORE_DRAINING=false, CLUSTER_NAME unset, USE_PROVIDER_ID=true): a Capacity
// Block warning names a reservation, whose instances only DescribeInstances can tell, so a
// denial is a warning rather than a failure.
func CheckCapacityBlockLookup(ctx context.Context, api EC2API) Row {
	_, err := api.DescribeInstances(ctx, &ec2.DescribeInstancesInput{DryRun: aws.Bool(true)})
	return warnIfDenied(dryRunRow("ec2:DescribeInstances", "look up the instances of a Capacity Block whose end is announced", err), err,
		func(why string) string {
			return "denied (" + why + "): a Capacity Block expiration warning cannot be resolved to its instances, which are then not drained before the block ends"
		},
		"allow ec2:DescribeInstances if the cluster runs instances in Capacity Blocks")
}

// CheckCapacityReservations asks DescribeCapacityReservations with DryRun, as a Capacity
// Block expiration warning does without it: without the permission no warning can be checked
// against EC2, so none drains anything (the message comes back until it expires). A denial
// is a warning: only clusters that run in Capacity Blocks need it.
func CheckCapacityReservations(ctx context.Context, api EC2API) Row {
	_, err := api.DescribeCapacityReservations(ctx, &ec2.DescribeCapacityReservationsInput{DryRun: aws.Bool(true)})
	return warnIfDenied(dryRunRow("ec2:DescribeCapacityReservations", "read the reservation a Capacity Block expiration warning names (type, state, end date, instance type)", err), err,
		func(why string) string {
			return "denied (" + why + "): a Capacity Block expiration warning cannot be checked against EC2, so its instances are not drained before the block ends"
		},
		"allow ec2:DescribeCapacityReservations if the cluster runs instances in Capacity Blocks")
}

// CheckInstanceStatus asks DescribeInstanceStatus with DryRun, as the poll of
// ENABLE_INSTANCE_STATUS_DRAINING does without it: without the permission no failing instance
// is drained, so a denial fails.
func CheckInstanceStatus(ctx context.Context, api EC2API) Row {
	_, err := api.DescribeInstanceStatus(ctx, &ec2.DescribeInstanceStatusInput{DryRun: aws.Bool(true)})
	return dryRunRow("ec2:DescribeInstanceStatus", "read this cluster's instances' status checks and scheduled events (ENABLE_INSTANCE_STATUS_DRAINING)", err)
}

// dryRunRow reads EC2's answer to a dry run: DryRunOperation when the call would be allowed,
// UnauthorizedOperation when not; anything else leaves the permission unknown.
func dryRunRow(action, why string, err error) Row {
	var apiErr smithy.APIError
	switch {
	case err == nil, errors.As(err, &apiErr) && apiErr.ErrorCode() == "DryRunOperation":
		return Row{Check: action, Status: StatusOK, Detail: why}
	case errors.As(err, &apiErr) && apiErr.ErrorCode() != "UnauthorizedOperation" && apiErr.ErrorCode() != "AuthFailure":
		return Row{Check: action, Status: StatusFail, Detail: apiErr.ErrorCode() + ": " + shortError(err),
			Fix: "EC2 did not answer the dry run; run preflight again, and check AWS_ENDPOINT"}
	}
	return awsRow(action, why, err)
}

// CheckSetInstanceHealth marks an instance that does not exist Healthy: an authorized call
// fails with ValidationError, a denied one with AccessDenied. A policy that allows the action
// only on tagged groups also denies this probe, so a denial is a warning.
func CheckSetInstanceHealth(ctx context.Context, api AutoScalingAPI) Row {
	_, err := api.SetInstanceHealth(ctx, &autoscaling.SetInstanceHealthInput{InstanceId: aws.String(probeInstance), HealthStatus: aws.String("Healthy")})
	const action = "autoscaling:SetInstanceHealth"
	return warnIfDenied(awsRow(action, "mark a drained impaired instance Unhealthy so that its group replaces it (SET_IMPAIRED_INSTANCE_UNHEALTHY)", err), err,
		func(why string) string {
			return "denied for an instance that does not exist (" + why + "): impaired instances would stay drained, not replaced"
		},
		"allow "+action+" for the cluster's Auto Scaling groups; if the policy already allows it only on tagged groups, this probe cannot tell and the warning can be ignored")
}
