// SPDX-License-Identifier: Apache-2.0

package deploy_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"lifeboat.dev/lifeboat/deploy"
	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/permissions"
)

// TestChartGrantsWhatTheBinaryChecks holds the chart's RBAC to the list the binary checks at
// start, per mode: everything a mode can need (with every optional feature on) is granted to
// it, and nothing it does not need.
func TestChartGrantsWhatTheBinaryChecks(t *testing.T) {
	cfg := &config.Config{ForceDeleteBeforeDeadline: 30, EmitKubernetesEvents: true, WaitForVolumeDetachment: true, NodeCondition: true, PodNamespace: "kube-system", LeaseName: deploy.LeaseName,
		CheckInterval: time.Minute}
	key := func(group, resource, sub, verb, name string) string {
		return group + "/" + resource + "/" + sub + ":" + verb + "@" + name
	}
	for mode, granted := range map[config.Mode][]authorizationv1.ResourceAttributes{
		config.ModeAgent: deploy.AgentPermissions,
		// The periodic readiness check is granted by the reader role the chart binds to it.
		config.ModeController: slices.Concat(deploy.ControllerPermissions, deploy.LeasePermissions, deploy.ReaderPermissions),
	} {
		needed := map[string]bool{}
		for _, p := range permissions.Permissions(mode, cfg) {
			needed[key(p.Group, p.Resource, p.Subresource, p.Verb, p.Name)] = true
		}
		has := map[string]bool{}
		for _, p := range granted {
			has[key(p.Group, p.Resource, p.Subresource, p.Verb, p.Name)] = true
		}
		for k := range needed {
			if !has[k] {
				t.Errorf("%s: the binary needs %s; the chart does not grant it", mode, k)
			}
		}
		for k := range has {
			if !needed[k] {
				t.Errorf("%s: the chart grants %s; this mode does not need it", mode, k)
			}
		}
	}
}

// TestNodeStatusOnlyWithTheCondition: the ClusterRoles grant patch on nodes/status, which lets
// a token write any condition of a Node, only while the node condition (config.nodeCondition)
// is on: it is what the permission is for.
func TestNodeStatusOnlyWithTheCondition(t *testing.T) {
	h := newHelm(t)
	for _, on := range []bool{true, false} {
		r := h.template(t, "--set", "controller.enabled=true", "--set", "config.queueUrl=https://sqs.us-east-1.amazonaws.com/123456789012/q",
			"--set", fmt.Sprintf("config.nodeCondition=%v", on))
		roles := objectsOf[*rbacv1.ClusterRole](r)
		if len(roles) < 2 {
			t.Fatalf("nodeCondition=%v: %d ClusterRoles rendered, want the agent's and the controller's", on, len(roles))
		}
		for _, role := range roles {
			granted := slices.ContainsFunc(role.Rules, func(rule rbacv1.PolicyRule) bool { return slices.Contains(rule.Resources, "nodes/status") })
			if granted != on && strings.Contains(role.Name, "lifeboat-") && !strings.Contains(role.Name, "reader") {
				t.Errorf("nodeCondition=%v: ClusterRole %s grants nodes/status: %v", on, role.Name, granted)
			}
		}
	}
}
