package deploy_test

import (
	"slices"
	"testing"

	"lifeboat.dev/lifeboat/deploy"
	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/preflight"
)

// TestChartGrantsWhatTheBinaryChecks holds the chart's RBAC to the list the binary checks at
// start: everything either mode can need (with every optional feature on) is granted, and
// nothing is granted that no mode needs.
func TestChartGrantsWhatTheBinaryChecks(t *testing.T) {
	cfg := &config.Config{ForceDeleteBeforeDeadline: 30, EmitKubernetesEvents: true, PodNamespace: "kube-system"}
	key := func(group, resource, sub, verb, name string) string {
		return group + "/" + resource + "/" + sub + ":" + verb + "@" + name
	}
	needed := map[string]bool{}
	for _, mode := range []config.Mode{config.ModeAgent, config.ModeController} {
		for _, p := range preflight.Permissions(mode, cfg) {
			needed[key(p.Group, p.Resource, p.Subresource, p.Verb, p.Name)] = true
		}
	}
	granted := map[string]bool{}
	for _, p := range slices.Concat(deploy.ClusterPermissions, deploy.LeasePermissions) {
		granted[key(p.Group, p.Resource, p.Subresource, p.Verb, p.Name)] = true
	}
	for k := range needed {
		if !granted[k] {
			t.Errorf("the binary needs %s; the chart does not grant it", k)
		}
	}
	for k := range granted {
		if !needed[k] {
			t.Errorf("the chart grants %s; no mode of the binary needs it", k)
		}
	}
}
