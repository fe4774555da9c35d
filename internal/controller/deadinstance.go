// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"fmt"
	"log/slog"

	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/ownership"
)

// deadStates are the EC2 states of an instance that runs nothing any more. Stopping and
// shutting-down are not: the guest may still run its containers (and a hibernating one
// resumes them), so the fast path waits for the next state.
var deadStates = map[string]bool{"stopped": true, "terminated": true}

// deadInstances is the fast path's check (DEAD_INSTANCE_FAST_PATH): a node whose Ready
// condition the node lifecycle controller holds Unknown and whose instance EC2 describes as
// stopped or terminated. With DEAD_INSTANCE_FAST_PATH_UNREACHABLE, a node Ready Unknown whose
// instance EC2 says is running counts too. It asks EC2 only for a node whose Ready is Unknown,
// fresh (not from the ownership cache: the state is what matters), once per drain. The node's
// providerID is a claim: the instance counts only when EC2 describes it as this node
// (ownership.Confirm, the dead-instance path's gate).
type deadInstances struct {
	ec2         cloud.EC2
	unreachable bool
	claims      ownership.ClaimReporter
	log         *slog.Logger
}

func (d deadInstances) Dead(ctx context.Context, node *corev1.Node) string {
	if readyStatus(node) != corev1.ConditionUnknown {
		return ""
	}
	id := ownership.InstanceIDFromProviderID(node.Spec.ProviderID)
	if id == "" {
		return ""
	}
	got, err := d.ec2.DescribeInstances(ctx, []string{id})
	if err != nil {
		d.log.Warn("the node is Ready Unknown, but EC2 cannot say whether its instance is dead: drained as usual", "node", node.Name, "instance", id, "err", err)
		return ""
	}
	inst, found := got[id]
	switch {
	case !found:
		return ""
	case inst.PrivateDNSName == "" && len(inst.PrivateIPs) == 0:
		d.log.Info("the node is Ready Unknown, but EC2 describes its instance without a private DNS name or IP, so the node's claim to it cannot be checked: drained as usual",
			"node", node.Name, "instance", id, "state", inst.State)
		return ""
	}
	if claim := ownership.Confirm(ownership.PathDeadInstance, node, inst, found); claim != nil {
		if d.claims != nil {
			d.claims.ClaimRefused(*claim)
		}
		return ""
	}
	switch {
	case deadStates[inst.State]:
		return fmt.Sprintf("Ready is Unknown and EC2 says instance %s is %s", id, inst.State)
	case d.unreachable && (inst.State == "running" || inst.State == "pending"):
		return fmt.Sprintf("Ready is Unknown while EC2 says instance %s is %s: unreachable, taken as dead (DEAD_INSTANCE_FAST_PATH_UNREACHABLE=true)", id, inst.State)
	}
	return ""
}

// readyStatus is the node's Ready condition's status ("" when it has none).
func readyStatus(n *corev1.Node) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return ""
}
