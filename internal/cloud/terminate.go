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

// Rebooter reboots an instance (RebootInstances): the reboot step of a node repair policy.
// AWSEC2 implements it.
type Rebooter interface {
	RebootInstance(ctx context.Context, instanceID string) error
}

// RebootInstance asks EC2 to reboot one instance. The instance keeps its id, its volumes and
// its Node; EC2 reboots it within minutes, or stops and starts it if it does not shut down.
func (e *AWSEC2) RebootInstance(ctx context.Context, instanceID string) error {
	_, err := e.client.RebootInstances(ctx, &ec2.RebootInstancesInput{InstanceIds: []string{instanceID}})
	if err != nil {
		return fmt.Errorf("RebootInstances %s: %w", instanceID, err)
	}
	return nil
}
