// SPDX-License-Identifier: Apache-2.0

package controlleronly

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"

	"lifeboat.dev/lifeboat/internal/cloud"
)

// eksAPI are the SDK calls AWSEKS makes.
type eksAPI interface {
	DescribeNodegroup(ctx context.Context, in *eks.DescribeNodegroupInput, optFns ...func(*eks.Options)) (*eks.DescribeNodegroupOutput, error)
}

// AWSEKS implements cloud.EKS with aws-sdk-go-v2.
type AWSEKS struct{ client eksAPI }

// NewAWSEKS uses cfg (see cloud.LoadAWSConfig).
func NewAWSEKS(cfg aws.Config) *AWSEKS {
	return &AWSEKS{client: eks.NewFromConfig(cfg)}
}

// NodegroupAutoRepaired asks DescribeNodegroup. A node group without a nodeRepairConfig has
// node auto repair off, as EKS has it by default.
func (e *AWSEKS) NodegroupAutoRepaired(ctx context.Context, cluster, nodegroup string) (bool, error) {
	out, err := e.client.DescribeNodegroup(ctx, &eks.DescribeNodegroupInput{ClusterName: aws.String(cluster), NodegroupName: aws.String(nodegroup)})
	var notFound *ekstypes.ResourceNotFoundException
	switch {
	case errors.As(err, &notFound):
		return false, fmt.Errorf("DescribeNodegroup %s in cluster %s: %w: %w", nodegroup, cluster, cloud.ErrNoSuchNodegroup, err)
	case err != nil:
		return false, fmt.Errorf("DescribeNodegroup %s in cluster %s: %w", nodegroup, cluster, err)
	case out.Nodegroup == nil:
		return false, fmt.Errorf("DescribeNodegroup %s in cluster %s: no node group in the answer", nodegroup, cluster)
	}
	rc := out.Nodegroup.NodeRepairConfig
	return rc != nil && aws.ToBool(rc.Enabled), nil
}
