// SPDX-License-Identifier: Apache-2.0

package cloud

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
)

// SetUnhealthy marks an instance Unhealthy in its Auto Scaling group, which then replaces it
// (terminating it, after any termination hook). The group's grace period is respected: an
// instance still within it is left alone by Auto Scaling.
func (a *AWSAutoScaling) SetUnhealthy(ctx context.Context, instanceID string) error {
	_, err := a.client.SetInstanceHealth(ctx, &autoscaling.SetInstanceHealthInput{
		InstanceId: aws.String(instanceID), HealthStatus: aws.String("Unhealthy"), ShouldRespectGracePeriod: aws.Bool(true),
	})
	if err != nil {
		return fmt.Errorf("SetInstanceHealth Unhealthy for %s: %w", instanceID, err)
	}
	return nil
}
