// SPDX-License-Identifier: Apache-2.0

// Package permissions is the one list of Kubernetes permissions each mode needs (Permissions),
// the RBAC rules that grant them (PolicyRules; the Helm chart's must grant exactly these), and
// the SelfSubjectAccessReviews that say which of them a process holds. The daemon checks them
// at start and preflight reports them; both binaries link it.
package permissions

import (
	"context"
	"fmt"
	"slices"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"lifeboat.dev/lifeboat/internal/config"
)

// Permission is one Kubernetes verb on one resource that Lifeboat needs.
type Permission struct {
	Group       string // API group; "" is the core group
	Resource    string
	Subresource string
	Verb        string
	Namespace   string // "" = every namespace or a cluster-scoped resource (a ClusterRole)
	Name        string // "" = any object; else only this one is needed
	Why         string // what Lifeboat does with it
	// Extra, when set, names the setting of an extra that is on by default (NODE_CONDITION,
	// EMIT_KUBERNETES_EVENTS): without the permission and with the setting left at its
	// default, Lifeboat starts without the extra and says so, rather than not protecting
	// anything (see Soft).
	Extra string
}

// Soft reports whether the permission's absence is not a reason to refuse to start under cfg:
// it serves an extra the user did not turn on explicitly.
func (p Permission) Soft(cfg *config.Config) bool {
	return p.Extra != "" && cfg.Defaulted(p.Extra)
}

// ResourceName is the resource as RBAC rules spell it: "nodes", "pods/eviction".
func (p Permission) ResourceName() string {
	if p.Subresource != "" {
		return p.Resource + "/" + p.Subresource
	}
	return p.Resource
}

// String reads like the arguments of kubectl auth can-i: "patch nodes", "create
// pods/eviction", "get leases.coordination.k8s.io lifeboat-controller in kube-system".
func (p Permission) String() string {
	var b strings.Builder
	b.WriteString(p.Verb + " " + p.Resource)
	if p.Group != "" {
		b.WriteString("." + p.Group)
	}
	if p.Subresource != "" {
		b.WriteString("/" + p.Subresource)
	}
	if p.Name != "" {
		b.WriteString(" " + p.Name)
	}
	if p.Namespace != "" {
		b.WriteString(" in " + p.Namespace)
	}
	return b.String()
}

// Permissions lists what mode needs under cfg, in a stable order.
//
// Both modes read and patch Nodes (every node write is a merge patch with a resourceVersion
// precondition, never an Update), list the drained node's pods and watch them go, and evict
// through pods/eviction. Deleting pods is needed only with FORCE_DELETE_BEFORE_DEADLINE_SECONDS
// > 0, Events only with EMIT_KUBERNETES_EVENTS. The controller also lists and watches Nodes
// (its informer maps instances to nodes) and holds a Lease in NAMESPACE. DRY_RUN does not
// shrink the list: a dry run must be able to become a real run by flipping one setting.
func Permissions(mode config.Mode, cfg *config.Config) []Permission {
	perms := nodePermissions(mode, cfg)
	perms = append(perms,
		Permission{Resource: "pods", Verb: "list", Why: "find the pods to drain on the node"},
		Permission{Resource: "pods", Verb: "watch", Why: "see evicted pods go"},
		Permission{Resource: "pods", Subresource: "eviction", Verb: "create", Why: "evict pods, honouring PodDisruptionBudgets"},
	)
	why := "cut the grace period of pods already leaving when a more urgent notice brings the drain's deadline forward"
	if cfg.ForceDeleteBeforeDeadline > 0 {
		why += "; FORCE_DELETE_BEFORE_DEADLINE_SECONDS: delete pods a budget still protects near the deadline"
	}
	perms = append(perms, Permission{Resource: "pods", Verb: "delete", Why: why})
	if cfg.WaitForVolumeDetachment {
		const why = "WAIT_FOR_VOLUME_DETACHMENT: wait for the evicted pods' volumes to detach before the hand-back"
		perms = append(perms,
			Permission{Resource: "persistentvolumeclaims", Verb: "get", Why: why},
			Permission{Group: "storage.k8s.io", Resource: "volumeattachments", Verb: "list", Why: why},
			Permission{Group: "storage.k8s.io", Resource: "volumeattachments", Verb: "watch", Why: why},
		)
	}
	if cfg.EmitKubernetesEvents {
		perms = append(perms,
			Permission{Resource: "events", Verb: "create", Why: "EMIT_KUBERNETES_EVENTS: Events on the node", Extra: "EMIT_KUBERNETES_EVENTS"},
			Permission{Resource: "events", Verb: "patch", Why: "EMIT_KUBERNETES_EVENTS: count repeated Events", Extra: "EMIT_KUBERNETES_EVENTS"},
		)
	}
	if mode == config.ModeController {
		perms = append(perms, controllerPermissions(cfg)...)
	}
	return perms
}

// nodePermissions are what a mode does with Nodes.
func nodePermissions(mode config.Mode, cfg *config.Config) []Permission {
	perms := []Permission{
		{Resource: "nodes", Verb: "get", Why: "read the node afresh before each change"},
		{Resource: "nodes", Verb: "patch", Why: "taint, label and cordon the node and record progress on it"},
	}
	if cfg.NodeCondition {
		perms = append(perms, Permission{Resource: "nodes", Subresource: "status", Verb: "patch", Why: "NODE_CONDITION: the node's lifeboat.dev/Interruption condition",
			Extra: "NODE_CONDITION"})
	}
	if mode != config.ModeController {
		return perms
	}
	perms = append(perms,
		Permission{Resource: "nodes", Verb: "list", Why: "node informer: find the node of an instance"},
		Permission{Resource: "nodes", Verb: "watch", Why: "node informer: find the node of an instance"},
	)
	if cfg.DeleteNodeAfterTermination {
		perms = append(perms, Permission{Resource: "nodes", Verb: "delete", Why: "DELETE_NODE_AFTER_TERMINATION: delete the Node of a terminated instance"})
	}
	return perms
}

// controllerPermissions are the controller's own: leader election and the periodic check.
func controllerPermissions(cfg *config.Config) []Permission {
	const group = "coordination.k8s.io"
	ns := cfg.PodNamespace
	perms := []Permission{
		{Group: group, Resource: "leases", Verb: "get", Namespace: ns, Name: cfg.LeaseName, Why: "leader election"},
		{Group: group, Resource: "leases", Verb: "create", Namespace: ns, Why: "leader election: create the Lease the first time"},
		{Group: group, Resource: "leases", Verb: "update", Namespace: ns, Name: cfg.LeaseName, Why: "leader election: renew and release the Lease"},
	}
	if cfg.CheckInterval > 0 {
		// Pods are listed already; the check also reads budgets and the workloads pods
		// belong to. The chart's reader role grants these.
		const why = "READINESS_REPORT_INTERVAL: the periodic readiness check"
		perms = append(perms,
			Permission{Group: "policy", Resource: "poddisruptionbudgets", Verb: "list", Why: why},
			Permission{Group: "apps", Resource: "replicasets", Verb: "list", Why: why},
			Permission{Group: "apps", Resource: "deployments", Verb: "list", Why: why},
			Permission{Group: "apps", Resource: "statefulsets", Verb: "list", Why: why},
		)
	}
	return perms
}

// PolicyRules groups permissions into RBAC rules by namespace: "" holds the ClusterRole's
// rules, any other key a Role's in that namespace. Permissions that share an API group,
// resource and object name share a rule; verbs are sorted, and so are the rules.
func PolicyRules(perms []Permission) map[string][]rbacv1.PolicyRule {
	type key struct{ ns, group, resource, name string }
	verbs := map[key][]string{}
	var order []key
	for _, p := range perms {
		k := key{p.Namespace, p.Group, p.ResourceName(), p.Name}
		if _, ok := verbs[k]; !ok {
			order = append(order, k)
		}
		if !slices.Contains(verbs[k], p.Verb) {
			verbs[k] = append(verbs[k], p.Verb)
		}
	}
	slices.SortFunc(order, func(a, b key) int {
		return strings.Compare(a.group+"\x00"+a.resource+"\x00"+a.name, b.group+"\x00"+b.resource+"\x00"+b.name)
	})
	out := map[string][]rbacv1.PolicyRule{}
	for _, k := range order {
		r := rbacv1.PolicyRule{APIGroups: []string{k.group}, Resources: []string{k.resource}, Verbs: slices.Sorted(slices.Values(verbs[k]))}
		if k.name != "" {
			r.ResourceNames = []string{k.name}
		}
		out[k.ns] = append(out[k.ns], r)
	}
	return out
}

// Access is the API server's answer about one permission.
type Access struct {
	Permission
	Allowed bool
	Reason  string // the authorizer's explanation, when it gives one
}

// Review asks the API server, with one SelfSubjectAccessReview per permission, whether the
// client's own identity holds each of perms. An error means the answer is unknown.
func Review(ctx context.Context, client kubernetes.Interface, perms []Permission) ([]Access, error) {
	out := make([]Access, 0, len(perms))
	for _, p := range perms {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: p.Namespace, Verb: p.Verb, Group: p.Group, Resource: p.Resource, Subresource: p.Subresource, Name: p.Name,
			},
		}}
		res, err := client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("access review for %q: %w", p, err)
		}
		reason := res.Status.Reason
		if res.Status.EvaluationError != "" {
			reason = strings.TrimSpace(reason + " " + res.Status.EvaluationError)
		}
		out = append(out, Access{Permission: p, Allowed: res.Status.Allowed && !res.Status.Denied, Reason: reason})
	}
	return out, nil
}

// CheckRBAC returns the permissions among perms that the client's identity lacks.
func CheckRBAC(ctx context.Context, client kubernetes.Interface, perms []Permission) ([]Permission, error) {
	answers, err := Review(ctx, client, perms)
	if err != nil {
		return nil, err
	}
	var missing []Permission
	for _, a := range answers {
		if !a.Allowed {
			missing = append(missing, a.Permission)
		}
	}
	return missing, nil
}
