// SPDX-License-Identifier: Apache-2.0

package ownership

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/notice"
)

// Path is one way Lifeboat comes to act on an instance or a Node for a reason it read. Every
// path passes the same gate: EC2's description of the instance names the Node acted on
// (Resolver.Resolve for the paths that start from an instance, Confirm for those that start
// from a Node). Paths lists them all, and the test that attacks every path with a forged
// claim has a row for each: a path added here without its row fails that test.
type Path string

const (
	// PathQueue: a queue message names the instance.
	PathQueue Path = "queue"
	// PathInstanceMetadata: the agent's own instance metadata, on NODE_NAME's Node.
	PathInstanceMetadata Path = "instance_metadata"
	// PathStatusPoll: DescribeInstanceStatus reports the instance impaired or scheduled.
	PathStatusPoll Path = "status_poll"
	// PathNodeCondition: a Node's condition has held an unhealthy status (node repair).
	PathNodeCondition Path = "node_condition"
	// PathDeadInstance: a Node is Ready Unknown and EC2 says its instance is dead.
	PathDeadInstance Path = "dead_instance"
	// PathNodeCleanup: a Node not Ready whose instance EC2 says is terminated is deleted.
	PathNodeCleanup Path = "node_cleanup"
	// PathRetainedSweep: Auto Scaling retains the instance; it is terminated once its Node is drained.
	PathRetainedSweep Path = "retained_sweep"
	// PathCapacityBlock: a Capacity Block that names the instance is ending.
	PathCapacityBlock Path = "capacity_block"
)

// Paths is the registry of every path.
var Paths = []Path{PathQueue, PathInstanceMetadata, PathStatusPoll, PathNodeCondition, PathDeadInstance,
	PathNodeCleanup, PathRetainedSweep, PathCapacityBlock}

// PathNames are Paths as strings (metric label values).
func PathNames() []string {
	out := make([]string, len(Paths))
	for i, p := range Paths {
		out[i] = string(p)
	}
	return out
}

// PathOf is the path a notice came by.
func PathOf(n notice.Notice) Path {
	if r, _ := notice.RulesOf(n.Kind); n.Source == notice.SourceQueue && r.CheckedOn != "" {
		return Path(r.CheckedOn)
	}
	return PathOfSource(n.Source)
}

// PathOfSource is the path of a notice source's notices (a Capacity Block's are the queue's).
func PathOfSource(s notice.Source) Path {
	switch s {
	case notice.SourceIMDS:
		return PathInstanceMetadata
	case notice.SourceEC2Status:
		return PathStatusPoll
	case notice.SourceNodeCondition:
		return PathNodeCondition
	}
	return PathQueue
}

// Subject is what a path is about to act on: an instance and, when the path read its reason
// from a Node (a node condition, the Node's Ready status), that Node's name.
type Subject struct {
	Path       Path
	InstanceID string
	// Node is the Node the reason was read from, "" when the reason is about the instance
	// alone (a queue message, a status poll). When set, only that Node may be acted on.
	Node string
}

// Confirm is the gate for a path that read its reason from node: EC2's description of the
// instance its providerID names (inst; found false when EC2 does not describe it) must name
// the node. It returns nil when it does, or the refused claim. Reporting it is the caller's
// (through its ClaimReporter), because some callers repeat a check every few seconds.
func Confirm(path Path, node *corev1.Node, inst cloud.Instance, found bool) *Claim {
	claim := &Claim{Path: path, Claimant: node.DeepCopy(), InstanceID: inst.ID, Described: Describe(inst)}
	switch {
	case !found:
		claim.InstanceID = InstanceIDFromProviderID(node.Spec.ProviderID)
		claim.Described = "nothing: EC2 does not know the instance"
		return claim
	case inst.PrivateDNSName == "" && len(inst.PrivateIPs) == 0:
		claim.Described = fmt.Sprintf("no private DNS name or IP (state %q), so the claim cannot be checked", inst.State)
		return claim
	case InstanceIDFromProviderID(node.Spec.ProviderID) != inst.ID:
		return claim
	case DescribedAs(inst, node) == "":
		return claim
	}
	return nil
}
