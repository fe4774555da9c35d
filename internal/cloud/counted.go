// SPDX-License-Identifier: Apache-2.0

package cloud

import "context"

// CallCounter counts AWS calls by operation; notFound is the error that answers "no such
// thing" rather than a failure (metrics.Metrics fits it).
type CallCounter interface {
	AWSCall(operation string, err, notFound error)
}

// CountedEC2 is an EC2 client whose reads are counted.
type CountedEC2 struct {
	EC2
	Calls CallCounter
}

func (e CountedEC2) DescribeInstances(ctx context.Context, ids []string) (map[string]Instance, error) {
	out, err := e.EC2.DescribeInstances(ctx, ids)
	e.Calls.AWSCall("DescribeInstances", err, nil)
	return out, err
}

func (e CountedEC2) DescribeInstanceStatus(ctx context.Context, ids []string) ([]InstanceStatus, error) {
	out, err := e.EC2.DescribeInstanceStatus(ctx, ids)
	e.Calls.AWSCall("DescribeInstanceStatus", err, nil)
	return out, err
}

// CountedGroups is an Auto Scaling client whose group lookups are counted.
type CountedGroups struct {
	AutoScaling
	Calls CallCounter
}

func (a CountedGroups) GroupOf(ctx context.Context, instanceID string) (string, error) {
	group, err := a.AutoScaling.GroupOf(ctx, instanceID)
	a.Calls.AWSCall("DescribeAutoScalingInstances", err, nil)
	return group, err
}

// CountedEKS is an EKS client whose node group lookups are counted.
type CountedEKS struct {
	EKS
	Calls CallCounter
}

func (e CountedEKS) NodegroupAutoRepaired(ctx context.Context, cluster, nodegroup string) (bool, error) {
	on, err := e.EKS.NodegroupAutoRepaired(ctx, cluster, nodegroup)
	e.Calls.AWSCall("DescribeNodegroup", err, ErrNoSuchNodegroup)
	return on, err
}
