// SPDX-License-Identifier: Apache-2.0

// Package deploy holds Lifeboat's install artefacts: the Helm chart (chart/lifeboat), the
// plain manifests rendered from it (manifests/), and, as data, the Kubernetes permissions the
// chart grants, so that tests can hold the chart, the manifests and the binary's own start-up
// permission check to one list.
package deploy

import authorizationv1 "k8s.io/api/authorization/v1"

// LeaseName is the controller's leader-election Lease as the chart names it for a release
// called "lifeboat" (LEADER_ELECTION_LEASE_NAME, internal/config.DefaultLeaseName).
const LeaseName = "lifeboat-controller"

// AgentPermissions are what the agent's ClusterRole grants, and all it grants: read and patch
// its node (taints, labels, annotations, cordon; the chart's node restriction holds both to
// its own node), list and watch pods and evict them, delete pods (a grace period cut when a
// running drain's deadline moves earlier, and the optional deadline force-delete), read the
// evicted pods' claims and watch VolumeAttachments (the wait for their volumes to detach
// before the hand-back), and write Events (client-go's recorder creates an Event and patches it to count repeats).
var AgentPermissions = []authorizationv1.ResourceAttributes{
	{Resource: "nodes", Verb: "get"},
	{Resource: "nodes", Verb: "patch"},
	{Resource: "nodes", Subresource: "status", Verb: "patch"},
	{Resource: "pods", Verb: "list"},
	{Resource: "pods", Verb: "watch"},
	{Resource: "pods", Verb: "delete"},
	{Resource: "pods", Subresource: "eviction", Verb: "create"},
	{Resource: "persistentvolumeclaims", Verb: "get"},
	{Group: "storage.k8s.io", Resource: "volumeattachments", Verb: "list"},
	{Group: "storage.k8s.io", Resource: "volumeattachments", Verb: "watch"},
	{Resource: "events", Verb: "create"},
	{Resource: "events", Verb: "patch"},
}

// ControllerPermissions are what the controller's ClusterRole grants: the agent's, and list
// and watch of nodes for its node informer (it finds the node of any instance).
var ControllerPermissions = append([]authorizationv1.ResourceAttributes{
	{Resource: "nodes", Verb: "list"},
	{Resource: "nodes", Verb: "watch"},
}, AgentPermissions...)

// LeasePermissions are the controller's leader-election permissions, granted by a Role in
// Lifeboat's namespace (NAMESPACE); the Namespace field is left for the caller to fill in.
// create cannot be limited to a name, get and update are limited to LeaseName.
var LeasePermissions = []authorizationv1.ResourceAttributes{
	{Group: "coordination.k8s.io", Resource: "leases", Verb: "create"},
	{Group: "coordination.k8s.io", Resource: "leases", Verb: "get", Name: LeaseName},
	{Group: "coordination.k8s.io", Resource: "leases", Verb: "update", Name: LeaseName},
}

// ReaderPermissions are what `lifeboat status` and `lifeboat check` read, all they read, and
// what the chart's optional reader ClusterRole (readerRole.create) grants: nodes (their
// episode records), pods, PodDisruptionBudgets, VolumeAttachments, and the workloads pods
// belong to.
var ReaderPermissions = []authorizationv1.ResourceAttributes{
	{Resource: "nodes", Verb: "list"},
	{Resource: "pods", Verb: "list"},
	{Group: "policy", Resource: "poddisruptionbudgets", Verb: "list"},
	{Group: "storage.k8s.io", Resource: "volumeattachments", Verb: "list"},
	{Group: "apps", Resource: "replicasets", Verb: "list"},
	{Group: "apps", Resource: "deployments", Verb: "list"},
	{Group: "apps", Resource: "statefulsets", Verb: "list"},
}

//go:generate go test -count=1 -run ^TestMigrationGuidePermissions$ . -args -update

// AWSPermission is one IAM action the binary needs: the policies under deploy/aws grant
// exactly these, and the IAM tables of the docs are generated from them.
type AWSPermission struct {
	Action string // service:Operation, as IAM spells it
	// Scope is the resource it is granted on: "queue" (the cluster's queue), "key" (the
	// queue's KMS key), "group" (Auto Scaling groups tagged for the cluster), "instance" (EC2
	// instances tagged for the cluster), "nodegroup" (the EKS cluster's managed node groups,
	// by ARN) or "*" (Describe and List calls, which take none).
	Scope string
	// Optional names the setting or command that makes the call; empty: always needed.
	Optional string
	// Grant is the input of the shipped set-up (deploy/aws, as Terraform spells it; the
	// CloudFormation parameter is the same in CamelCase) that grants the action: a switch,
	// or a value that grants it once set. Empty: always granted. An action only an opt-in
	// feature calls, and that acts on instances or reads beyond the cluster's own resources,
	// waits for its feature's input.
	Grant string
	// Via names the service that makes the call on the binary's behalf (SQS decrypts for the
	// reader with the queue's key); empty for the binary's own calls.
	Via string
	Why string
}

// AWSPermissions are every AWS call of the binary (controller, and an agent that completes
// lifecycle actions), and nothing more. deploy/aws_test.go holds them to the calls in the
// code, and the CloudFormation template and Terraform module to them.
var AWSPermissions = []AWSPermission{
	{Action: "sqs:ReceiveMessage", Scope: "queue", Why: "read notices from the cluster's queue"},
	{Action: "sqs:DeleteMessage", Scope: "queue", Why: "delete a message once its notices are recorded on the Node"},
	{Action: "sqs:ChangeMessageVisibility", Scope: "queue", Why: "keep a message hidden while its drain runs, and bring it back later on a retry; NTH's policy lacks it"},
	{Action: "sqs:GetQueueAttributes", Scope: "queue", Optional: "lifeboat preflight", Why: "confirm the queue exists; the set-up check reads its ARN and its policy (that EventBridge may send)"},
	{Action: "kms:Decrypt", Scope: "key", Optional: "a queue encrypted with a KMS key", Grant: "kms_key_arn", Via: "sqs", Why: "SQS decrypts the messages it hands to the reader with the queue's key"},
	{Action: "events:ListRuleNamesByTarget", Scope: "*", Optional: "the set-up check", Grant: "setup_check", Why: "the EventBridge rules that send to the queue, checked at start and hourly (with events:DescribeRule); without them a deleted or disabled rule goes unsaid"},
	{Action: "events:DescribeRule", Scope: "*", Optional: "the set-up check", Grant: "setup_check", Why: "whether each rule that sends to the queue is enabled, and the notice kinds its pattern covers"},
	{Action: "ec2:DescribeInstances", Scope: "*", Why: "an instance's managed tag, cluster tag, private DNS name and IP (batched and cached); the instances of an expiring Capacity Block"},
	{Action: "ec2:DescribeCapacityReservations", Scope: "*", Why: "that a Capacity Block expiration warning names an active Capacity Block ending soon, and when it ends: the drain's deadline"},
	{Action: "ec2:DescribeInstanceStatus", Scope: "*", Optional: "ENABLE_INSTANCE_STATUS_DRAINING", Why: "failing status checks and listed scheduled events of this cluster's instances"},
	{Action: "ec2:TerminateInstances", Scope: "instance", Optional: "NODE_REPAIR_ACTION=terminate", Grant: "terminate_repaired_instances", Why: "terminate a repaired node's instance once drained, after the instance gate's check"},
	{Action: "ec2:RebootInstances", Scope: "instance", Optional: "a node repair policy with action reboot (NODE_REPAIR_POLICIES)", Grant: "reboot_repaired_instances", Why: "reboot a repaired node's instance once drained, after the instance gate's check, before replacing it"},
	{Action: "eks:DescribeNodegroup", Scope: "nodegroup", Optional: "NODE_REPAIR_EKS_LOOKUP", Grant: "describe_eks_nodegroups", Why: "whether a sick node's managed node group has node auto repair on (nodeRepairConfig), so that EKS and Lifeboat never both repair it; once per node group every 5 minutes, only when a node's repair comes due"},
	{Action: "autoscaling:DescribeAutoScalingInstances", Scope: "*", Why: "that an instance is in the group its record names, before a lifecycle completion or heartbeat"},
	{Action: "autoscaling:DescribeLifecycleHooks", Scope: "*", Why: "a terminate hook's heartbeat and global timeouts: the drain's deadline"},
	{Action: "autoscaling:CompleteLifecycleAction", Scope: "group", Why: "hand a terminating instance back once drained; complete a launch hook once the node is Ready"},
	{Action: "autoscaling:RecordLifecycleActionHeartbeat", Scope: "group", Optional: "HEARTBEAT_INTERVAL", Why: "extend a lifecycle action during a long drain"},
	{Action: "autoscaling:SetInstanceHealth", Scope: "group", Optional: "SET_IMPAIRED_INSTANCE_UNHEALTHY or ENABLE_NODE_REPAIR", Grant: "mark_instances_unhealthy", Why: "mark a drained impaired or repaired instance Unhealthy so that its group replaces it"},
	{Action: "autoscaling:DescribeAutoScalingGroups", Scope: "*", Optional: "ABANDON_LIFECYCLE_ACTION_ON_INCOMPLETE_DRAIN", Grant: "abandon_on_incomplete_drain", Why: "whether a group retains abandoned instances; the periodic sweep of the instances a group retained"},
	{Action: "autoscaling:TerminateInstanceInAutoScalingGroup", Scope: "group", Optional: "ABANDON_LIFECYCLE_ACTION_ON_INCOMPLETE_DRAIN", Grant: "abandon_on_incomplete_drain", Why: "terminate a retained instance once its node is drained"},
	{Action: "elasticloadbalancing:DescribeTargetGroups", Scope: "*", Optional: "WAIT_FOR_LOAD_BALANCER_TARGETS", Why: "the target groups an instance or its pods may be registered in"},
	{Action: "elasticloadbalancing:DescribeTargetHealth", Scope: "*", Optional: "WAIT_FOR_LOAD_BALANCER_TARGETS", Why: "wait until the instance and the evicted pods have left every target group"},
}
