// SPDX-License-Identifier: Apache-2.0

package nodecondition

import corev1 "k8s.io/api/core/v1"

// Labels of the systems that repair their own nodes.
const (
	LabelKarpenterNodePool = "karpenter.sh/nodepool"
	LabelEKSNodegroup      = "eks.amazonaws.com/nodegroup"
)

// LeftTo names the system that repairs the node itself ("" when none does): Karpenter for a
// node of a NodePool, when karpenter says Karpenter's node repair is on; EKS for a node of a
// managed node group that autoRepaired says has node auto repair on. Two repairers on one node
// would drain it twice and replace it twice; none would leave it sick.
func LeftTo(n *corev1.Node, karpenter bool, autoRepaired func(nodegroup string) bool) string {
	if pool := n.Labels[LabelKarpenterNodePool]; pool != "" && karpenter {
		return "Karpenter (NodePool " + pool + ")"
	}
	if g := n.Labels[LabelEKSNodegroup]; g != "" && autoRepaired != nil && autoRepaired(g) {
		return "EKS node auto repair (managed node group " + g + ")"
	}
	return ""
}
