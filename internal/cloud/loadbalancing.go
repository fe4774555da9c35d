// SPDX-License-Identifier: Apache-2.0

package cloud

import (
	"context"
	"errors"

	"github.com/aws/aws-sdk-go-v2/aws"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	"github.com/aws/smithy-go"
)

// TargetGroup is an Elastic Load Balancing (v2) target group.
type TargetGroup struct {
	ARN  string
	Name string
	// TargetType is "instance" (targets are instance ids) or "ip" (pod or host IPs, as the
	// AWS Load Balancer Controller registers pods); "lambda" and "alb" groups hold neither.
	TargetType string
}

// Target is one registration in a target group and its state: initial, healthy, unhealthy,
// unused, draining or unavailable.
type Target struct {
	ID     string
	Port   int32
	State  string
	Reason string
}

// LoadBalancing is what Lifeboat reads from the Elastic Load Balancing (v2) API: which target
// groups exist and which targets each one still holds.
type LoadBalancing interface {
	TargetGroups(ctx context.Context) ([]TargetGroup, error)
	TargetHealth(ctx context.Context, groupARN string) ([]Target, error)
}

// ErrAccessDenied is returned when the credentials lack the permission for the call.
var ErrAccessDenied = errors.New("access denied")

// AWSLoadBalancing implements LoadBalancing with aws-sdk-go-v2.
type AWSLoadBalancing struct {
	client interface {
		elbv2.DescribeTargetGroupsAPIClient
		DescribeTargetHealth(context.Context, *elbv2.DescribeTargetHealthInput, ...func(*elbv2.Options)) (*elbv2.DescribeTargetHealthOutput, error)
	}
}

// NewAWSLoadBalancing uses cfg (see LoadAWSConfig).
func NewAWSLoadBalancing(cfg aws.Config) *AWSLoadBalancing {
	return &AWSLoadBalancing{client: elbv2.NewFromConfig(cfg)}
}

// TargetGroups lists every target group of the account in the region, page by page.
func (a *AWSLoadBalancing) TargetGroups(ctx context.Context) ([]TargetGroup, error) {
	var out []TargetGroup
	pages := elbv2.NewDescribeTargetGroupsPaginator(a.client, &elbv2.DescribeTargetGroupsInput{})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, denied(err)
		}
		for _, g := range page.TargetGroups {
			out = append(out, TargetGroup{ARN: aws.ToString(g.TargetGroupArn), Name: aws.ToString(g.TargetGroupName), TargetType: string(g.TargetType)})
		}
	}
	return out, nil
}

// TargetHealth lists the group's targets (registered or draining) and their states.
func (a *AWSLoadBalancing) TargetHealth(ctx context.Context, groupARN string) ([]Target, error) {
	res, err := a.client.DescribeTargetHealth(ctx, &elbv2.DescribeTargetHealthInput{TargetGroupArn: aws.String(groupARN)})
	if err != nil {
		return nil, denied(err)
	}
	out := make([]Target, 0, len(res.TargetHealthDescriptions))
	for _, d := range res.TargetHealthDescriptions {
		t := Target{}
		if d.Target != nil {
			t.ID, t.Port = aws.ToString(d.Target.Id), aws.ToInt32(d.Target.Port)
		}
		if d.TargetHealth != nil {
			t.State, t.Reason = string(d.TargetHealth.State), string(d.TargetHealth.Reason)
		}
		out = append(out, t)
	}
	return out, nil
}

// denied wraps an authorization failure in ErrAccessDenied, keeping AWS's message.
func denied(err error) error {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "AccessDenied", "AccessDeniedException", "UnauthorizedOperation":
			return errors.Join(ErrAccessDenied, err)
		}
	}
	return err
}
