// Package deploy holds Lifeboat's install artefacts: the Helm chart (chart/lifeboat), the
// plain manifests rendered from it (manifests/), and, as data, the Kubernetes permissions the
// chart grants, so that tests can hold the chart, the manifests and the binary's own start-up
// permission check to one list.
package deploy

import authorizationv1 "k8s.io/api/authorization/v1"

// LeaseName is the controller's leader-election Lease (internal/controller.LeaseName).
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
