// SPDX-License-Identifier: Apache-2.0

package cloud

import "context"

// Terminator terminates an instance outright (TerminateInstances): a repaired node's
// instance with NODE_REPAIR_ACTION=terminate. controlleronly.AWSEC2 implements it.
type Terminator interface {
	TerminateInstance(ctx context.Context, instanceID string) error
}

// Rebooter reboots an instance (RebootInstances): the reboot step of a node repair policy.
// controlleronly.AWSEC2 implements it.
type Rebooter interface {
	RebootInstance(ctx context.Context, instanceID string) error
}
