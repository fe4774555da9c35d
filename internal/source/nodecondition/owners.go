// SPDX-License-Identifier: Apache-2.0

package nodecondition

import (
	"context"

	corev1 "k8s.io/api/core/v1"
)

// Labels of the systems that repair their own nodes.
const (
	LabelKarpenterNodePool = "karpenter.sh/nodepool"
	LabelEKSNodegroup      = "eks.amazonaws.com/nodegroup"
)

// Owners say which systems repair their own nodes. Two repairers on one node would drain it
// twice and replace it twice; none would leave it sick.
type Owners struct {
	// Karpenter: Karpenter's node repair is on (NODE_REPAIR_KARPENTER_REPAIRS), so the nodes
	// of its NodePools are left to it.
	Karpenter bool
	// Listed says the managed node group is listed as auto repaired
	// (NODE_REPAIR_EKS_AUTO_REPAIRED_NODEGROUPS): left to EKS without asking.
	Listed func(nodegroup string) bool
	// Ask, when set, asks EKS whether the managed node group has node auto repair on
	// (NODE_REPAIR_EKS_LOOKUP); an error when that cannot be known now.
	Ask func(ctx context.Context, nodegroup string) (bool, error)
}

// LeftTo names the system that repairs the node itself ("" when none does): Karpenter for a
// node of a NodePool while Karpenter's repair is on; EKS for a node of a managed node group
// that is listed, or that EKS says has node auto repair on. EKS is asked only about a node
// of a managed node group that is not listed. An error says whether EKS repairs the node is
// not known: the caller repairs it neither now nor leaves it for good.
func (o Owners) LeftTo(ctx context.Context, n *corev1.Node) (string, error) {
	if pool := n.Labels[LabelKarpenterNodePool]; pool != "" && o.Karpenter {
		return "Karpenter (NodePool " + pool + ")", nil
	}
	g := n.Labels[LabelEKSNodegroup]
	if g == "" {
		return "", nil
	}
	auto := o.Listed != nil && o.Listed(g)
	if !auto && o.Ask != nil {
		var err error
		if auto, err = o.Ask(ctx, g); err != nil {
			return "", err
		}
	}
	if auto {
		return "EKS node auto repair (managed node group " + g + ")", nil
	}
	return "", nil
}
