// SPDX-License-Identifier: Apache-2.0

package ownership

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/cloud"
)

// IndexInternalIP is the name of the node informer index added by NewResolver: each Node's
// InternalIP addresses.
const IndexInternalIP = "lifeboat.dev/internal-ip"

// A Node's spec.providerID is a claim, not a fact: its kubelet may set it once, to any
// instance. EC2's description of the instance is what ties it to a Node: its private DNS name
// is the Node's name (which the Node's credential cannot change), or else its private
// address is one of the Node's InternalIPs (which the kubelet reports itself, so the name
// wins when both match).

// DescribedAs says how EC2's description of inst names node: "private DNS name" or "private
// IP", or "" when it names another node.
func DescribedAs(inst cloud.Instance, node *corev1.Node) string {
	if inst.PrivateDNSName != "" && inst.PrivateDNSName == node.Name {
		return "private DNS name"
	}
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP && slices.Contains(inst.PrivateIPs, a.Address) {
			return "private IP"
		}
	}
	return ""
}

// Describe is EC2's description of an instance in words, for logs and Events.
func Describe(inst cloud.Instance) string {
	parts := []string{}
	if inst.PrivateDNSName != "" {
		parts = append(parts, "private DNS name "+inst.PrivateDNSName)
	}
	if len(inst.PrivateIPs) > 0 {
		parts = append(parts, "private IP "+strings.Join(inst.PrivateIPs, ", "))
	}
	if len(parts) == 0 {
		return "no private DNS name or IP"
	}
	return strings.Join(parts, ", ")
}

// Claim is a Node whose providerID names an instance that EC2 describes as another node (or
// as no node here). It is refused: nothing is done on the claimant for the instance's
// notices, and the notice is handled on the node EC2 describes, if any.
type Claim struct {
	// Path is how Lifeboat came to look at the claim (a queue notice, a node condition, ...).
	Path       Path
	Claimant   *corev1.Node // a copy
	InstanceID string
	// Holder is the node EC2 describes as the instance, "" when there is none here.
	Holder string
	// Described is how EC2 describes the instance (see Describe).
	Described string
}

func (c Claim) String() string {
	holder := "another node, or none of this cluster"
	if c.Holder != "" {
		holder = "node " + c.Holder
	}
	if named := InstanceIDFromProviderID(c.Claimant.Spec.ProviderID); named != c.InstanceID {
		// EC2 describes the instance as the claimant, whose providerID names another one.
		return fmt.Sprintf("EC2 describes instance %s (%s) as node %s, but the node's providerID %q names another instance",
			c.InstanceID, c.Described, c.Claimant.Name, c.Claimant.Spec.ProviderID)
	}
	return fmt.Sprintf("node %s names instance %s in its providerID %q, but EC2 describes the instance (%s) as %s",
		c.Claimant.Name, c.InstanceID, c.Claimant.Spec.ProviderID, c.Described, holder)
}

// ClaimReporter is told of each refused claim (an Event on the claimant, a metric, a log
// line naming both nodes).
type ClaimReporter interface {
	ClaimRefused(c Claim)
}

func indexByInternalIP(obj any) ([]string, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return nil, nil
	}
	var ips []string
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP && a.Address != "" && !slices.Contains(ips, a.Address) {
			ips = append(ips, a.Address)
		}
	}
	return ips, nil
}

// described finds the Nodes EC2's description of inst names: the Node named after its
// private DNS name, or, when there is none, the Nodes with one of its private IPs.
func (r *Resolver) described(inst cloud.Instance) ([]*corev1.Node, error) {
	if inst.PrivateDNSName != "" {
		obj, exists, err := r.nodes.GetByKey(inst.PrivateDNSName)
		if err != nil {
			return nil, fmt.Errorf("ownership of %s: node %s: %w", inst.ID, inst.PrivateDNSName, err)
		}
		if n, ok := obj.(*corev1.Node); exists && ok {
			return []*corev1.Node{n}, nil
		}
	}
	var found []*corev1.Node
	for _, ip := range inst.PrivateIPs {
		objs, err := r.nodes.ByIndex(IndexInternalIP, ip)
		if err != nil {
			return nil, fmt.Errorf("ownership of %s: node index: %w", inst.ID, err)
		}
		for _, o := range objs {
			if n, ok := o.(*corev1.Node); ok && !slices.ContainsFunc(found, func(f *corev1.Node) bool { return f.Name == n.Name }) {
				found = append(found, n)
			}
		}
	}
	return found, nil
}

// holder picks, among the nodes EC2 describes as the instance, the one that holds it: its
// providerID names the instance, or it has none and names may be matched (USE_PROVIDER_ID
// off, or another node's claim would otherwise silence the notice). It returns why there is
// none otherwise.
// A described node whose providerID names another instance is a claim refused too (misnamed):
// its own reasons are not acted on for this instance.
func (r *Resolver) holder(path Path, inst cloud.Instance, described []*corev1.Node, falseClaims bool) (*corev1.Node, string, []Claim) {
	instanceID := inst.ID
	var eligible []*corev1.Node
	var why []string
	var misnamed []Claim
	for _, n := range described {
		switch pid := n.Spec.ProviderID; {
		case InstanceIDFromProviderID(pid) == instanceID:
			eligible = append(eligible, n)
		case pid == "" && (!r.opts.UseProviderID || falseClaims):
			eligible = append(eligible, n)
		case pid == "":
			why = append(why, fmt.Sprintf("node %s is the instance as EC2 describes it but has no providerID (USE_PROVIDER_ID=true: private DNS names are not matched)", n.Name))
		default:
			why = append(why, fmt.Sprintf("node %s is the instance as EC2 describes it, but its providerID %q names another instance", n.Name, pid))
			if InstanceIDFromProviderID(pid) == "" {
				continue // not an EC2 providerID: no claim to another instance
			}
			misnamed = append(misnamed, Claim{Path: path, Claimant: n.DeepCopy(), InstanceID: instanceID, Described: Describe(inst)})
		}
	}
	switch len(eligible) {
	case 1:
		return eligible[0], "", misnamed
	case 0:
		if len(why) == 0 {
			return nil, fmt.Sprintf("no node in this cluster is instance %s as EC2 describes it (%s)", instanceID, Describe(inst)), misnamed
		}
		return nil, strings.Join(why, "; "), misnamed
	}
	names := make([]string, len(eligible))
	for i, n := range eligible {
		names[i] = n.Name
	}
	return nil, fmt.Sprintf("ambiguous: nodes %s all have a private IP of instance %s and none is named after its private DNS name", strings.Join(names, ", "), instanceID), misnamed
}
