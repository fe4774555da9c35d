// SPDX-License-Identifier: Apache-2.0

package deploy_test

import (
	"slices"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"

	"lifeboat.dev/lifeboat/deploy"
	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/preflight"
)

// TestChartGrantsWhatTheBinaryChecks holds the chart's RBAC to the list the binary checks at
// start, per mode: everything a mode can need (with every optional feature on) is granted to
// it, and nothing it does not need.
func TestChartGrantsWhatTheBinaryChecks(t *testing.T) {
	cfg := &config.Config{ForceDeleteBeforeDeadline: 30, EmitKubernetesEvents: true, WaitForVolumeDetachment: true, NodeCondition: true, PodNamespace: "kube-system",
		ReadinessReportInterval: time.Minute}
	key := func(group, resource, sub, verb, name string) string {
		return group + "/" + resource + "/" + sub + ":" + verb + "@" + name
	}
	for mode, granted := range map[config.Mode][]authorizationv1.ResourceAttributes{
		config.ModeAgent: deploy.AgentPermissions,
		// The periodic readiness check is granted by the reader role the chart binds to it.
		config.ModeController: slices.Concat(deploy.ControllerPermissions, deploy.LeasePermissions, deploy.ReaderPermissions),
	} {
		needed := map[string]bool{}
		for _, p := range preflight.Permissions(mode, cfg) {
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
