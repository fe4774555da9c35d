// Package deploy holds Lifeboat's install artefacts: the Helm chart (chart/lifeboat), the
// plain manifests rendered from it (manifests/), and, as data, the Kubernetes permissions the
// chart grants, so that tests can hold the chart, the manifests and the binary's own start-up
// permission check to one list.
package deploy

import authorizationv1 "k8s.io/api/authorization/v1"

// LeaseName is the controller's leader-election Lease (internal/controller.LeaseName).
const LeaseName = "lifeboat-controller"

// ClusterPermissions are what both modes need across the cluster, and all the ClusterRole
// grants: read and patch nodes (taints, labels, annotations, cordon), list and watch pods and
// evict them, delete pods (the optional deadline force-delete, and a grace period cut when a
// running drain's deadline moves earlier), and write Events
// (client-go's recorder creates an Event and patches it to count repeats).
var ClusterPermissions = []authorizationv1.ResourceAttributes{
	{Resource: "nodes", Verb: "get"},
	{Resource: "nodes", Verb: "list"},
	{Resource: "nodes", Verb: "watch"},
	{Resource: "nodes", Verb: "patch"},
	{Resource: "pods", Verb: "list"},
	{Resource: "pods", Verb: "watch"},
	{Resource: "pods", Verb: "delete"},
	{Resource: "pods", Subresource: "eviction", Verb: "create"},
	{Resource: "events", Verb: "create"},
	{Resource: "events", Verb: "patch"},
}

// LeasePermissions are the controller's leader-election permissions, granted by a Role in
// Lifeboat's namespace (NAMESPACE); the Namespace field is left for the caller to fill in.
// create cannot be limited to a name, get and update are limited to LeaseName.
var LeasePermissions = []authorizationv1.ResourceAttributes{
	{Group: "coordination.k8s.io", Resource: "leases", Verb: "create"},
	{Group: "coordination.k8s.io", Resource: "leases", Verb: "get", Name: LeaseName},
	{Group: "coordination.k8s.io", Resource: "leases", Verb: "update", Name: LeaseName},
}
