// SPDX-License-Identifier: Apache-2.0

package cloud

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
)

// Terminator terminates an instance outright (TerminateInstances): a repaired node's
// instance with NODE_REPAIR_ACTION=terminate. AWSEC2 implements it.
type Terminator interface {
	TerminateInstance(ctx context.Context, instanceID string) error
}

// TerminateInstance terminates one instance. A group that holds it sees it terminated and
// replaces it; an instance in no group is simply gone.
func (e *AWSEC2) TerminateInstance(ctx context.Context, instanceID string) error {
	_, err := e.client.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{instanceID}})
	if err != nil {
		return fmt.Errorf("TerminateInstances %s: %w", instanceID, err)
	}
	return nil
}
