// SPDX-License-Identifier: Apache-2.0

package deploy_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"lifeboat.dev/lifeboat/deploy"
	"lifeboat.dev/lifeboat/internal/config"
)

// chartKey is a setting's key under config in values.yaml: its variable in lower camel case.
func chartKey(env string) string {
	words := strings.Split(strings.ToLower(env), "_")
	for i := 1; i < len(words); i++ {
		words[i] = strings.ToUpper(words[i][:1]) + words[i][1:]
	}
	return strings.Join(words, "")
}

// chartManaged are the settings the chart sets itself instead of from config, and why. want
// is the variable the chart must render for the component ("agent" or "controller").
var chartManaged = map[string]struct {
	why  string
	want func(component string) corev1.EnvVar
	// configurable: a config key overrides what the chart derives (its default is "").
	configurable bool
}{
	"NODE_NAME": {
		why:  "the node the pod runs on comes from the Downward API (agent: the node it protects)",
		want: func(string) corev1.EnvVar { return fieldRef("NODE_NAME", "spec.nodeName") },
	},
	"POD_NAME": {
		why:  "Lifeboat's own pod (never evicted, the leader-election identity) comes from the Downward API",
		want: func(string) corev1.EnvVar { return fieldRef("POD_NAME", "metadata.name") },
	},
	"NAMESPACE": {
		why: "the binary's default is kube-system; the chart gives the namespace the pod really runs in " +
			"(the release namespace), where the controller's Lease and Role are",
		want: func(string) corev1.EnvVar { return fieldRef("NAMESPACE", "metadata.namespace") },
	},
	"ENABLE_SQS_TERMINATION_DRAINING": {
		why: "the sub-command selects the mode; the variable matches it (agent false, the binary's default; " +
			"controller true) so that `lifeboat config` in the pod reports the mode it runs in",
		want: func(component string) corev1.EnvVar {
			return corev1.EnvVar{Name: "ENABLE_SQS_TERMINATION_DRAINING", Value: fmt.Sprint(component == "controller")}
		},
	},
	"LEADER_ELECTION_LEASE_NAME": {
		why: "the controller's Lease is named after the release, so that two releases in one namespace lead " +
			"independently; for a release named lifeboat (the test's) it is the binary's default. The agent holds no Lease",
		want: func(component string) corev1.EnvVar {
			if component != "controller" {
				return corev1.EnvVar{}
			}
			return corev1.EnvVar{Name: "LEADER_ELECTION_LEASE_NAME", Value: config.DefaultLeaseName}
		},
		configurable: true,
	},
}

// hostNetworkAddress are the settings the chart fills for a component on the host network,
// unless the user names an address: its servers would otherwise listen on every address of
// the node. The metrics server gets the node's IP (status.hostIP), the probes server the
// loopback address.
var hostNetworkAddress = map[string]corev1.EnvVar{
	"PROMETHEUS_SERVER_BIND_ADDRESS": fieldRef("PROMETHEUS_SERVER_BIND_ADDRESS", "status.hostIP"),
	"PROBES_SERVER_BIND_ADDRESS":     {Name: "PROBES_SERVER_BIND_ADDRESS", Value: "127.0.0.1"},
}

func fieldRef(name, path string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
}

// podSpecs returns the pod template of each rendered component.
func podSpecs(r rendered) map[string]corev1.PodSpec {
	out := map[string]corev1.PodSpec{}
	for _, ds := range r.daemonSets() {
		out["agent"] = ds.Spec.Template.Spec
	}
	for _, d := range r.deployments() {
		out["controller"] = d.Spec.Template.Spec
	}
	return out
}

func TestLintAndTemplate(t *testing.T) {
	h := newHelm(t)
	for _, tc := range []struct {
		name string
		set  []string
		want map[string]int // kinds and counts
	}{
		// The agent's node restriction is part of every render (TestNodeRestrictionInEveryRender),
		// and so is flow control offline (TestOfflineRender).
		{"defaults", nil, map[string]int{
			"ServiceAccount": 1, "ClusterRole": 1, "ClusterRoleBinding": 1, "DaemonSet": 1,
			"ValidatingAdmissionPolicy": 1, "ValidatingAdmissionPolicyBinding": 1, "FlowSchema": 1, "PriorityLevelConfiguration": 1,
		}},
		{"agent only", []string{"agent.enabled=true", "controller.enabled=false"}, map[string]int{
			"ServiceAccount": 1, "ClusterRole": 1, "ClusterRoleBinding": 1, "DaemonSet": 1,
			"ValidatingAdmissionPolicy": 1, "ValidatingAdmissionPolicyBinding": 1, "FlowSchema": 1, "PriorityLevelConfiguration": 1,
		}},
		{"controller only", []string{"agent.enabled=false", "controller.enabled=true", "config.queueUrl=https://sqs.us-east-1.amazonaws.com/123456789012/q"}, map[string]int{
			"ServiceAccount": 1, "ClusterRole": 1, "ClusterRoleBinding": 1, "Role": 1, "RoleBinding": 1,
			"Deployment": 1, "PodDisruptionBudget": 1, "FlowSchema": 1, "PriorityLevelConfiguration": 1,
		}},
		{"both, host network, metrics and probes", []string{"controller.enabled=true", "agent.hostNetwork=true", "controller.hostNetwork=true",
			"config.enablePrometheusServer=true", "config.enableProbesServer=true"}, map[string]int{
			"ServiceAccount": 2, "ClusterRole": 2, "ClusterRoleBinding": 2, "Role": 1, "RoleBinding": 1,
			"DaemonSet": 1, "Deployment": 1, "PodDisruptionBudget": 1,
			"ValidatingAdmissionPolicy": 1, "ValidatingAdmissionPolicyBinding": 1, "FlowSchema": 1, "PriorityLevelConfiguration": 1,
		}},
		{"nothing enabled", []string{"agent.enabled=false"}, map[string]int{}},
		{"agent, node restriction off", []string{"agent.nodeRestriction.enabled=false"}, map[string]int{
			"ServiceAccount": 1, "ClusterRole": 1, "ClusterRoleBinding": 1, "DaemonSet": 1, "FlowSchema": 1, "PriorityLevelConfiguration": 1,
		}},
		{"no RBAC, own service accounts", []string{"controller.enabled=true", "rbac.create=false",
			"agent.serviceAccount.create=false", "agent.serviceAccount.name=a", "controller.serviceAccount.create=false", "controller.serviceAccount.name=c"}, map[string]int{
			"DaemonSet": 1, "Deployment": 1, "PodDisruptionBudget": 1,
			"ValidatingAdmissionPolicy": 1, "ValidatingAdmissionPolicyBinding": 1, "FlowSchema": 1, "PriorityLevelConfiguration": 1,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sets []string
			for _, s := range tc.set {
				sets = append(sets, "--set", s)
			}
			if _, err := h.run(append([]string{"lint", "--strict", chartDir}, sets...)...); err != nil {
				t.Fatal(err)
			}
			got := h.template(t, sets...).kinds()
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("rendered kinds %v, want %v", got, tc.want)
			}
		})
	}
}

// TestChartDefaultsEqualBinaryDefaults renders the chart with its default values and holds
// every container's environment to the binary's defaults (invariant 2: risky features default
// off identically in binary and chart).
func TestChartDefaultsEqualBinaryDefaults(t *testing.T) {
	r := newHelm(t).template(t, "--set", "controller.enabled=true")
	specs := podSpecs(r)
	if len(specs) != 2 {
		t.Fatalf("rendered components %v, want agent and controller", specs)
	}
	settings := config.Settings()
	known := map[string]bool{}
	for _, s := range settings {
		known[s.Env] = true
	}
	for component, spec := range specs {
		env := envOf(t, container(t, spec))
		for _, s := range settings {
			got, set := env[s.Env]
			if m, ok := chartManaged[s.Env]; ok {
				if want := m.want(component); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("%s: %s = %+v, want %+v (%s)", component, s.Env, got, want, m.why)
				}
				continue
			}
			if want, ok := hostNetworkAddress[s.Env]; ok && spec.HostNetwork {
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("%s on the host network: %s = %+v, want %+v", component, s.Env, got, want)
				}
				continue
			}
			switch {
			case s.Default == "" && set:
				t.Errorf("%s: %s = %+v, want it unset (the binary's default is unset)", component, s.Env, got)
			case s.Default != "" && !set:
				t.Errorf("%s: %s is not rendered, want the binary's default %q", component, s.Env, s.Default)
			case s.Default != "" && (got.Value != s.Default || got.ValueFrom != nil):
				t.Errorf("%s: %s = %q, binary default %q", component, s.Env, got.Value, s.Default)
			}
		}
		for name := range env {
			if !known[name] {
				t.Errorf("%s: renders %s, which is not a Lifeboat setting", component, name)
			}
		}
	}
}

// TestEverySettingHasChartValue reads values.yaml: every setting the chart does not manage
// itself has a key under config, with the binary's default where that is empty, and config
// has no other keys.
func TestEverySettingHasChartValue(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values struct {
		Config map[string]any `json:"config"`
	}
	if err := utilyaml.Unmarshal(raw, &values); err != nil {
		t.Fatalf("values.yaml: %v", err)
	}
	want := map[string]bool{}
	for _, s := range config.Settings() {
		key := chartKey(s.Env)
		if m, managed := chartManaged[s.Env]; managed {
			v, ok := values.Config[key]
			switch {
			case m.configurable && v != "":
				t.Errorf("values.yaml config.%s = %v, want \"\" (the chart derives %s unless it is set)", key, v, s.Env)
			case m.configurable:
				want[key] = true
			case ok:
				t.Errorf("values.yaml config.%s: %s is set by the chart, not by config", key, s.Env)
			}
			continue
		}
		want[key] = true
		v, ok := values.Config[key]
		switch {
		case !ok:
			t.Errorf("values.yaml has no config.%s for %s (default %q)", key, s.Env, s.Default)
		case s.Default == "" && v != "":
			t.Errorf("values.yaml config.%s = %v, want \"\" (%s is unset by default)", key, v, s.Env)
		}
	}
	for key := range values.Config {
		if !want[key] {
			t.Errorf("values.yaml config.%s is not a Lifeboat setting", key)
		}
	}
}

// TestEveryKeyRendersItsVariable sets every config key to a value of its own and checks that
// each lands in the variable of the same name (the chart's key table is hand-written).
func TestEveryKeyRendersItsVariable(t *testing.T) {
	want := map[string]string{}
	var args []string
	for _, s := range config.Settings() {
		if _, managed := chartManaged[s.Env]; managed {
			continue
		}
		key := chartKey(s.Env)
		want[s.Env] = "value-of-" + key
		args = append(args, "--set-string", "config."+key+"="+want[s.Env])
	}
	r := newHelm(t).template(t, append(args, "--set", "controller.enabled=true")...)
	for component, spec := range podSpecs(r) {
		env := envOf(t, container(t, spec))
		for name, value := range want {
			if got := env[name].Value; got != value {
				t.Errorf("%s: %s = %q, want %q", component, name, got, value)
			}
		}
	}
}

func TestComponentConfigAndSecrets(t *testing.T) {
	r := newHelm(t).template(t,
		"--set", "controller.enabled=true",
		"--set", "config.dryRun=true", "--set", "agent.config.dryRun=false", // a false override must win
		"--set", "controller.config.workers=25",
		"--set", "config.heartbeatUntil=172800", // a large number must not print as 1.728e+05
		"--set", "config.webhookUrl=https://hooks.example/plain", // replaced by the Secret below
		"--set", "configFromSecret.webhookUrl.name=lifeboat-webhook", "--set", "configFromSecret.webhookUrl.key=url",
	)
	specs := podSpecs(r)
	for _, tc := range []struct{ component, env, want string }{
		{"agent", "DRY_RUN", "false"},
		{"controller", "DRY_RUN", "true"},
		{"agent", "WORKERS", "10"},
		{"controller", "WORKERS", "25"},
		{"agent", "HEARTBEAT_UNTIL", "172800"},
	} {
		if got := envOf(t, container(t, specs[tc.component]))[tc.env]; got.Value != tc.want {
			t.Errorf("%s: %s = %+v, want %q", tc.component, tc.env, got, tc.want)
		}
	}
	for component, spec := range specs {
		got := envOf(t, container(t, spec))["WEBHOOK_URL"]
		if got.Value != "" || got.ValueFrom == nil || got.ValueFrom.SecretKeyRef == nil ||
			got.ValueFrom.SecretKeyRef.Name != "lifeboat-webhook" || got.ValueFrom.SecretKeyRef.Key != "url" {
			t.Errorf("%s: WEBHOOK_URL = %+v, want only a reference to Secret lifeboat-webhook key url", component, got)
		}
	}
}

func TestBadValuesFailWithTheirName(t *testing.T) {
	h := newHelm(t)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown setting", []string{"--set", "config.wokers=3"}, `config.wokers: no such value`},
		{"unknown setting for one component", []string{"--set", "controller.enabled=true", "--set", "controller.config.qeueUrl=x"}, `controller.config.qeueUrl: no such value`},
		{"unknown top-level value", []string{"--set", "queueUrl=x"}, `queueUrl: no such value`},
		{"unknown value of the controller", []string{"--set", "controller.replcas=2"}, `controller.replcas: no such value`},
		{"unknown key in an NTH object", []string{"--set", "serviceAccount.anotations.a=b"}, `serviceAccount.anotations: no such value`},
		{"setting the chart manages", []string{"--set", "agent.config.nodeName=n1"}, `setting "nodeName" is set by the chart`},
		{"mode setting", []string{"--set", "config.enableSqsTerminationDraining=true"}, `setting "enableSqsTerminationDraining" is set by the chart`},
		{"map value", []string{"--set-json", `config.workers={"a":"b"}`}, `config.workers: object given, where string, number, boolean or null is wanted`},
		{"boolean value", []string{"--set", "controller.enabled=yes"}, `controller.enabled: string given, where boolean is wanted`},
		{"secret reference without key", []string{"--set", "configFromSecret.webhookUrl.name=s"}, "configFromSecret.webhookUrl: key is required"},
		{"secret reference to unknown setting", []string{"--set", "configFromSecret.webhook.name=s", "--set", "configFromSecret.webhook.key=k"}, "configFromSecret.webhook: no such value"},
		{"service account without name", []string{"--set", "agent.serviceAccount.create=false"}, "agent.serviceAccount.name is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := h.run(append([]string{"template", "lifeboat", chartDir}, tc.args...)...)
			if err == nil {
				t.Fatalf("rendered without error:\n%.300s", out)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error does not say %q:\n%v", tc.want, err)
			}
		})
	}
}

// TestUpgradeSafety checks the rendered workloads against invariant 3 (upgrades never
// deadlock on a single eligible node) and the pod hardening, with and without host networking.
func TestUpgradeSafety(t *testing.T) {
	h := newHelm(t)
	for _, hostNetwork := range []bool{false, true} {
		t.Run(fmt.Sprintf("hostNetwork=%v", hostNetwork), func(t *testing.T) {
			r := h.template(t, "--set", "controller.enabled=true",
				"--set", fmt.Sprintf("agent.hostNetwork=%v", hostNetwork), "--set", fmt.Sprintf("controller.hostNetwork=%v", hostNetwork),
				"--set", "config.enablePrometheusServer=true", "--set", "config.enableProbesServer=true",
				"--set", "controller.replicas=2")

			ds := only[*appsv1.DaemonSet](t, r)
			if s := ds.Spec.UpdateStrategy; s.Type != appsv1.RollingUpdateDaemonSetStrategyType || s.RollingUpdate == nil ||
				!intOrStringIs(s.RollingUpdate.MaxUnavailable, 1) || !intOrStringIs(s.RollingUpdate.MaxSurge, 0) {
				t.Errorf("DaemonSet updateStrategy %+v, want RollingUpdate maxUnavailable 1, maxSurge 0", s)
			}
			d := only[*appsv1.Deployment](t, r)
			wantSurge := 1
			if hostNetwork {
				wantSurge = 0 // the new pod needs the old pod's host ports
			}
			if s := d.Spec.Strategy; s.Type != appsv1.RollingUpdateDeploymentStrategyType || s.RollingUpdate == nil ||
				!intOrStringIs(s.RollingUpdate.MaxUnavailable, 1) || !intOrStringIs(s.RollingUpdate.MaxSurge, wantSurge) {
				t.Errorf("Deployment strategy %+v, want RollingUpdate maxUnavailable 1, maxSurge %d", s, wantSurge)
			}
			pdb := only[*policyv1.PodDisruptionBudget](t, r)
			if pdb.Spec.MinAvailable != nil || !intOrStringIs(pdb.Spec.MaxUnavailable, 1) {
				t.Errorf("PodDisruptionBudget %+v, want maxUnavailable 1 and no minAvailable", pdb.Spec)
			}
			if got, want := pdb.Spec.Selector.MatchLabels, d.Spec.Selector.MatchLabels; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("PodDisruptionBudget selects %v, the Deployment's pods are %v", got, want)
			}

			for component, spec := range map[string]corev1.PodSpec{"agent": ds.Spec.Template.Spec, "controller": d.Spec.Template.Spec} {
				checkPodSpec(t, component, spec, hostNetwork)
			}
		})
	}
}

func intOrStringIs(v *intstr.IntOrString, n int) bool {
	return v != nil && v.Type == intstr.Int && v.IntValue() == n
}

func checkPodSpec(t *testing.T, component string, spec corev1.PodSpec, hostNetwork bool) {
	t.Helper()
	c := container(t, spec)
	if got := strings.Join(c.Args, " "); got != component {
		t.Errorf("%s: args %q, want %q", component, got, component)
	}
	if spec.HostNetwork != hostNetwork {
		t.Errorf("%s: hostNetwork %v, want %v", component, spec.HostNetwork, hostNetwork)
	}
	if hostNetwork && spec.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
		t.Errorf("%s: dnsPolicy %q with host networking, want ClusterFirstWithHostNet", component, spec.DNSPolicy)
	}
	// Host ports only ever come from host networking (the API server then copies containerPort).
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
		if p.HostPort != 0 {
			t.Errorf("%s: port %s has hostPort %d", component, p.Name, p.HostPort)
		}
	}
	if ports["metrics"] != 9092 || ports["probes"] != 8080 {
		t.Errorf("%s: ports %v, want metrics 9092 and probes 8080", component, ports)
	}
	if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" || c.LivenessProbe.HTTPGet.Port.String() != "probes" {
		t.Errorf("%s: livenessProbe %+v, want GET /healthz on port probes", component, c.LivenessProbe)
	}
	if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" || c.ReadinessProbe.HTTPGet.Port.String() != "probes" {
		t.Errorf("%s: readinessProbe %+v, want GET /readyz on port probes", component, c.ReadinessProbe)
	}
	if a := spec.Affinity; a != nil && a.PodAntiAffinity != nil && len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
		t.Errorf("%s: required pod anti-affinity would leave a second pod Pending on a single eligible node", component)
	}

	wantPriority := map[string]string{"agent": "system-node-critical", "controller": "system-cluster-critical"}[component]
	if spec.PriorityClassName != wantPriority {
		t.Errorf("%s: priorityClassName %q, want %q", component, spec.PriorityClassName, wantPriority)
	}
	psc, sc := spec.SecurityContext, c.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 ||
		psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s: pod securityContext %+v, want non-root and seccomp RuntimeDefault", component, psc)
	}
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0 ||
		(sc.Privileged != nil && *sc.Privileged) {
		t.Errorf("%s: container securityContext %+v, want read-only root, no privilege escalation, all capabilities dropped", component, sc)
	}
}

// TestRBAC holds each rendered ClusterRole to its component's list (deploy.AgentPermissions,
// deploy.ControllerPermissions) and the leader-election Role to deploy.LeasePermissions,
// exactly: nothing missing, nothing more; each ServiceAccount is bound to its own.
func TestRBAC(t *testing.T) {
	if deploy.LeaseName != config.DefaultLeaseName {
		t.Errorf("deploy.LeaseName %q, the controller's default is %q", deploy.LeaseName, config.DefaultLeaseName)
	}
	r := newHelm(t).template(t, "--set", "controller.enabled=true")

	want := map[string][]authorizationv1.ResourceAttributes{"agent": deploy.AgentPermissions, "controller": deploy.ControllerPermissions}
	roles := map[string]*rbacv1.ClusterRole{}
	for _, cr := range objectsOf[*rbacv1.ClusterRole](r) {
		component := cr.Labels["app.kubernetes.io/component"]
		roles[component] = cr
		if got, want := ruleSet(cr.Rules), attributeSet(want[component]); !slices.Equal(got, want) {
			t.Errorf("ClusterRole %s grants\n  %s\nwant exactly\n  %s", cr.Name, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		}
	}
	if len(roles) != 2 || roles["agent"] == nil || roles["controller"] == nil {
		t.Fatalf("ClusterRoles %v, want one for the agent and one for the controller", roles)
	}
	role := only[*rbacv1.Role](t, r)
	if got, want := ruleSet(role.Rules), attributeSet(deploy.LeasePermissions); !slices.Equal(got, want) {
		t.Errorf("Role %s grants\n  %s\nwant exactly\n  %s", role.Name, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	if role.Namespace != "kube-system" {
		t.Errorf("Role in namespace %q, want the release namespace", role.Namespace)
	}

	// Each ServiceAccount is bound to its component's ClusterRole; only the controller's to
	// the Role.
	sas := map[string]string{}
	for component, spec := range podSpecs(r) {
		sas[component] = spec.ServiceAccountName
	}
	bindings := objectsOf[*rbacv1.ClusterRoleBinding](r)
	if len(bindings) != 2 {
		t.Errorf("%d ClusterRoleBindings, want 2", len(bindings))
	}
	for _, b := range bindings {
		component := b.Labels["app.kubernetes.io/component"]
		if b.RoleRef.Kind != "ClusterRole" || roles[component] == nil || b.RoleRef.Name != roles[component].Name {
			t.Errorf("ClusterRoleBinding %s refers to %s %s, want the %s's ClusterRole", b.Name, b.RoleRef.Kind, b.RoleRef.Name, component)
		}
		if len(b.Subjects) != 1 || b.Subjects[0].Name != sas[component] || b.Subjects[0].Namespace != "kube-system" {
			t.Errorf("ClusterRoleBinding %s binds %+v, want only the %s's ServiceAccount %s", b.Name, b.Subjects, component, sas[component])
		}
	}
	rb := only[*rbacv1.RoleBinding](t, r)
	if len(rb.Subjects) != 1 || rb.Subjects[0].Name != sas["controller"] || rb.RoleRef.Name != role.Name {
		t.Errorf("RoleBinding %s binds %+v to %s, want only the controller's ServiceAccount %s", rb.Name, rb.Subjects, rb.RoleRef.Name, sas["controller"])
	}
}

// ruleSet expands policy rules into sorted "group resource[/subresource] verb [name]" lines.
func ruleSet(rules []rbacv1.PolicyRule) []string {
	var out []string
	for _, r := range rules {
		names := r.ResourceNames
		if len(names) == 0 {
			names = []string{""}
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					for _, n := range names {
						out = append(out, permissionLine(g, res, v, n))
					}
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func attributeSet(attrs []authorizationv1.ResourceAttributes) []string {
	var out []string
	for _, a := range attrs {
		res := a.Resource
		if a.Subresource != "" {
			res += "/" + a.Subresource
		}
		out = append(out, permissionLine(a.Group, res, a.Verb, a.Name))
	}
	slices.Sort(out)
	return out
}

func permissionLine(group, resource, verb, name string) string {
	if group == "" {
		group = "core"
	}
	line := group + " " + resource + " " + verb
	if name != "" {
		line += " name=" + name
	}
	return line
}

// TestProbesFollowTheSetting: the pod gets probes and ports exactly when the binary will
// serve them, for every spelling of true the binary accepts, per workload.
func TestProbesFollowTheSetting(t *testing.T) {
	h := newHelm(t)
	t.Run("default", func(t *testing.T) {
		specs := podSpecs(h.template(t, "--set", "controller.enabled=true"))
		for _, component := range []string{"agent", "controller"} {
			c := container(t, specs[component])
			if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" || c.LivenessProbe == nil {
				t.Errorf("%s: probes are on by default, but the pod has readiness %+v, liveness %+v", component, c.ReadinessProbe, c.LivenessProbe)
			}
		}
	})
	for _, tc := range []struct {
		value string
		on    bool
	}{{"true", true}, {"True", true}, {"1", true}, {"false", false}, {"0", false}} {
		t.Run(tc.value, func(t *testing.T) {
			r := h.template(t, "--set", "controller.enabled=true",
				"--set-string", "agent.config.enableProbesServer="+tc.value,
				"--set-string", "controller.config.enableProbesServer=false",
				"--set-string", "controller.config.enablePrometheusServer="+tc.value)
			specs := podSpecs(r)
			agent, ctl := container(t, specs["agent"]), container(t, specs["controller"])
			if got := agent.LivenessProbe != nil && agent.ReadinessProbe != nil && len(agent.Ports) == 1 && agent.Ports[0].Name == "probes"; got != tc.on {
				t.Errorf("agent with ENABLE_PROBES_SERVER=%s: probes and port %v, want %v (ports %+v)", tc.value, got, tc.on, agent.Ports)
			}
			if ctl.LivenessProbe != nil || ctl.ReadinessProbe != nil {
				t.Errorf("controller has probes although its probes server is off")
			}
			if got := len(ctl.Ports) == 1 && ctl.Ports[0].Name == "metrics" && ctl.Ports[0].ContainerPort == 9092; got != tc.on {
				t.Errorf("controller with ENABLE_PROMETHEUS_SERVER=%s: metrics port %v, want %v (ports %+v)", tc.value, got, tc.on, ctl.Ports)
			}
		})
	}
}

// TestHostNetworkServerAddresses: on the host network the metrics server listens on the
// node's IP only (status.hostIP, the pod's IP there, so a scrape of the pod reaches it), and the
// probes server on the loopback address, which the probes name as their host: the kubelet runs
// in the host's network namespace and reaches it, nothing off the node does, so no neighbour can
// take the probes server's connection places. On the pod network the chart sets neither and the
// probes name no host (the kubelet probes the pod's IP; 127.0.0.1 would be the node's). An
// address the user gives (config, a Secret, extraEnv) wins; on the host network the probes
// follow it, unless it means every interface or the chart cannot read it.
func TestHostNetworkServerAddresses(t *testing.T) {
	const metricsEnv, probesEnv = "PROMETHEUS_SERVER_BIND_ADDRESS", "PROBES_SERVER_BIND_ADDRESS"
	nodeIP := func(env string) corev1.EnvVar { return fieldRef(env, "status.hostIP") }
	unset := func(string) corev1.EnvVar { return corev1.EnvVar{} }
	value := func(v string) func(string) corev1.EnvVar {
		return func(env string) corev1.EnvVar { return corev1.EnvVar{Name: env, Value: v} }
	}
	secret := func(env string) corev1.EnvVar {
		return corev1.EnvVar{Name: env, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "k"}}}
	}
	h := newHelm(t)
	for _, tc := range []struct {
		name      string
		args      []string
		component string
		metrics   func(string) corev1.EnvVar
		probes    func(string) corev1.EnvVar
		host      string // of both probes
	}{
		{"agent, host network by default", nil, "agent", nodeIP, value("127.0.0.1"), "127.0.0.1"},
		{"controller, pod network by default", nil, "controller", unset, unset, ""},
		{"agent on the pod network", []string{"--set", "agent.hostNetwork=false"}, "agent", unset, unset, ""},
		{"controller on the host network", []string{"--set", "controller.hostNetwork=true"}, "controller", nodeIP, value("127.0.0.1"), "127.0.0.1"},
		{"every address, asked for", []string{"--set-string", "config.probesServerBindAddress=::"}, "agent", nodeIP, value("::"), ""},
		{"every IPv4 address", []string{"--set-string", "agent.config.probesServerBindAddress=0.0.0.0"}, "agent", nodeIP, value("0.0.0.0"), ""},
		{"every address, IPv4-mapped", []string{"--set-string", "agent.config.probesServerBindAddress=::FFFF:0.0.0.0"}, "agent", nodeIP, value("::FFFF:0.0.0.0"), ""},
		{"a node address for the probes", []string{"--set-string", "agent.config.probesServerBindAddress=10.1.2.3"}, "agent", nodeIP, value("10.1.2.3"), "10.1.2.3"},
		{"IPv6 loopback for the probes", []string{"--set-string", "config.probesServerBindAddress=::1"}, "agent", nodeIP, value("::1"), "::1"},
		{"an address for the agent's metrics", []string{"--set-string", "agent.config.prometheusServerBindAddress=127.0.0.1"}, "agent", value("127.0.0.1"), value("127.0.0.1"), "127.0.0.1"},
		{"an address on the pod network", []string{"--set", "agent.hostNetwork=false", "--set-string", "agent.config.probesServerBindAddress=10.1.2.3"}, "agent", unset, value("10.1.2.3"), ""},
		{"from a Secret", []string{"--set", "configFromSecret.probesServerBindAddress.name=s", "--set", "configFromSecret.probesServerBindAddress.key=k"},
			"agent", nodeIP, secret, ""},
		{"in extraEnv", []string{"--set", "agent.extraEnv[0].name=" + probesEnv, "--set-string", "agent.extraEnv[0].value=10.9.9.9"},
			"agent", nodeIP, value("10.9.9.9"), "10.9.9.9"},
		{"in extraEnv, from a Secret", []string{"--set", "agent.extraEnv[0].name=" + probesEnv,
			"--set", "agent.extraEnv[0].valueFrom.secretKeyRef.name=s", "--set", "agent.extraEnv[0].valueFrom.secretKeyRef.key=k"},
			"agent", nodeIP, secret, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := podSpecs(h.template(t, append([]string{"--set", "controller.enabled=true"}, tc.args...)...))[tc.component]
			c := container(t, spec)
			env := envOf(t, c) // fails on a name set twice: the chart's default and the user's
			for name, want := range map[string]corev1.EnvVar{metricsEnv: tc.metrics(metricsEnv), probesEnv: tc.probes(probesEnv)} {
				if got := env[name]; fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("%s = %+v, want %+v", name, got, want)
				}
			}
			for kind, p := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
				if p == nil || p.HTTPGet == nil {
					t.Errorf("no %s probe (probes are on by default): %+v", kind, p)
				} else if p.HTTPGet.Host != tc.host {
					t.Errorf("%s probe names host %q, want %q", kind, p.HTTPGet.Host, tc.host)
				}
			}
		})
	}
}

// TestReaderRole: the optional reader ClusterRole grants exactly what `lifeboat status` and
// `lifeboat check` read, and binds the subjects given; it is off by default.
// The controller's periodic check (config.readinessReportInterval) is off by
// default; set, the reader ClusterRole is rendered and bound to the controller's service
// account, and the controller is given the setting.
func TestPeriodicCheckBindsTheReaderRole(t *testing.T) {
	h := newHelm(t)
	controller := []string{"--set", "controller.enabled=true", "--set", "config.queueUrl=https://sqs.us-east-1.amazonaws.com/123456789012/q"}
	for _, cr := range objectsOf[*rbacv1.ClusterRole](h.template(t, controller...)) {
		if strings.HasSuffix(cr.Name, "-reader") {
			t.Error("the reader role is rendered with the report off")
		}
	}
	r := h.template(t, append(controller, "--set", "controller.config.readinessReportInterval=10m")...)
	reader := false
	for _, cr := range objectsOf[*rbacv1.ClusterRole](r) {
		if strings.HasSuffix(cr.Name, "-reader") {
			reader = slices.Equal(ruleSet(cr.Rules), attributeSet(deploy.ReaderPermissions))
		}
	}
	if !reader {
		t.Error("no reader ClusterRole granting deploy.ReaderPermissions with the report on")
	}
	bound := false
	for _, b := range objectsOf[*rbacv1.ClusterRoleBinding](r) {
		if strings.HasSuffix(b.RoleRef.Name, "-reader") && len(b.Subjects) == 1 {
			bound = b.Subjects[0].Kind == "ServiceAccount" && strings.HasSuffix(b.Subjects[0].Name, "-controller")
		}
	}
	if !bound {
		t.Error("the reader role is not bound to the controller's service account")
	}
	set := false
	for _, d := range objectsOf[*appsv1.Deployment](r) {
		for _, e := range d.Spec.Template.Spec.Containers[0].Env {
			set = set || (e.Name == "READINESS_REPORT_INTERVAL" && e.Value == "10m")
		}
	}
	if !set {
		t.Error("the controller is not given READINESS_REPORT_INTERVAL=10m")
	}
}

func TestReaderRole(t *testing.T) {
	h := newHelm(t)
	for _, cr := range objectsOf[*rbacv1.ClusterRole](h.template(t)) {
		if strings.HasSuffix(cr.Name, "-reader") {
			t.Errorf("the reader role is rendered by default")
		}
	}
	r := h.template(t, "--set", "readerRole.create=true", "--set", "readerRole.subjects[0].kind=Group",
		"--set", "readerRole.subjects[0].name=platform-oncall", "--set", "readerRole.subjects[0].apiGroup=rbac.authorization.k8s.io")
	var reader *rbacv1.ClusterRole
	for _, cr := range objectsOf[*rbacv1.ClusterRole](r) {
		if strings.HasSuffix(cr.Name, "-reader") {
			reader = cr
		}
	}
	if reader == nil {
		t.Fatal("no reader ClusterRole")
	}
	if got, want := ruleSet(reader.Rules), attributeSet(deploy.ReaderPermissions); !slices.Equal(got, want) {
		t.Errorf("the reader role grants\n  %s\nwant exactly\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	bound := false
	for _, b := range objectsOf[*rbacv1.ClusterRoleBinding](r) {
		if b.RoleRef.Name == reader.Name {
			bound = len(b.Subjects) == 1 && b.Subjects[0].Kind == "Group" && b.Subjects[0].Name == "platform-oncall"
		}
	}
	if !bound {
		t.Error("the reader role is not bound to the subjects given")
	}
}

// TestControllerStandbyByDefault: the controller runs with a warm standby (two replicas)
// unless it is on the host network, where each replica needs its own node; a number given is
// kept as written. Each release names its own Lease, and the Role grants exactly it.
func TestControllerStandbyByDefault(t *testing.T) {
	h := newHelm(t)
	for _, tc := range []struct {
		name     string
		sets     []string
		replicas int32
	}{
		{"default", nil, 2},
		{"host network", []string{"--set", "controller.hostNetwork=true"}, 1},
		{"one, as written", []string{"--set", "controller.replicas=1"}, 1},
		{"three, host network, as written", []string{"--set", "controller.replicas=3", "--set", "controller.hostNetwork=true"}, 3},
	} {
		r := h.template(t, append([]string{"--set", "controller.enabled=true"}, tc.sets...)...)
		d := only[*appsv1.Deployment](t, r)
		if d.Spec.Replicas == nil || *d.Spec.Replicas != tc.replicas {
			t.Errorf("%s: replicas %v, want %d", tc.name, d.Spec.Replicas, tc.replicas)
		}
	}
	for release, lease := range map[string]string{"lifeboat": "lifeboat-controller", "trial": "trial-lifeboat-controller"} {
		out, err := h.run("template", release, chartDir, "--namespace", "kube-system", "--set", "controller.enabled=true")
		if err != nil {
			t.Fatal(err)
		}
		objs, err := decodeAll(out)
		if err != nil {
			t.Fatal(err)
		}
		r := rendered(objs)
		env := envOf(t, container(t, only[*appsv1.Deployment](t, r).Spec.Template.Spec))
		if got := env["LEADER_ELECTION_LEASE_NAME"].Value; got != lease {
			t.Errorf("release %s: LEADER_ELECTION_LEASE_NAME %q, want %q", release, got, lease)
		}
		role := only[*rbacv1.Role](t, r)
		if !slices.ContainsFunc(role.Rules, func(rule rbacv1.PolicyRule) bool { return slices.Equal(rule.ResourceNames, []string{lease}) }) {
			t.Errorf("release %s: the leader-election Role does not name the Lease %s: %+v", release, lease, role.Rules)
		}
	}
	r := h.template(t, "--set", "controller.enabled=true", "--set", "config.leaderElectionLeaseName=shared-lease")
	if got := envOf(t, container(t, only[*appsv1.Deployment](t, r).Spec.Template.Spec))["LEADER_ELECTION_LEASE_NAME"].Value; got != "shared-lease" {
		t.Errorf("config.leaderElectionLeaseName set: the variable is %q, want it kept as written", got)
	}
}
