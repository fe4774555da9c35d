// SPDX-License-Identifier: Apache-2.0

package deploy_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"lifeboat.dev/lifeboat/internal/status"
)

// valuesFile writes values (as JSON, which is YAML) into a test's directory.
func valuesFile(t *testing.T, values string) string {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(values), &v); err != nil {
		t.Fatalf("test values %s: %v", values, err)
	}
	f := filepath.Join(t.TempDir(), "values.json")
	if err := os.WriteFile(f, []byte(values), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// notes renders the chart's install notes offline: helm template leaves them out and helm
// install needs a cluster, so a copy of the chart renders NOTES.txt into a ConfigMap, with
// the same values and the same named templates.
func notes(t *testing.T, h helm, args ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "lifeboat")
	if err := os.CopyFS(dir, os.DirFS(chartDir)); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "templates", "NOTES.txt"), filepath.Join(dir, "notes-under-test.txt")); err != nil {
		t.Fatal(err)
	}
	const tpl = `apiVersion: v1
kind: ConfigMap
metadata:
  name: notes-under-test
data:
  notes: {{ tpl (.Files.Get "notes-under-test.txt") . | toJson }}
`
	if err := os.WriteFile(filepath.Join(dir, "templates", "notes-under-test.yaml"), []byte(tpl), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := h.run(append([]string{"template", "lifeboat", dir, "--namespace", "kube-system", "--show-only", "templates/notes-under-test.yaml"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeAll(out)
	if err != nil || len(objs) != 1 {
		t.Fatalf("notes: %v\n%s", err, out)
	}
	return objs[0].(*corev1.ConfigMap).Data["notes"]
}

// TestValuesKeptAsWritten: a value an NTH values file sets is taken as written, even at NTH's
// default (a copied NTH values file gets what NTH gave it); what the file leaves out keeps
// Lifeboat's defaults.
func TestValuesKeptAsWritten(t *testing.T) {
	h := newHelm(t)
	r := h.template(t, "--values", valuesFile(t, `{
		"enableASGLifecycleDraining": false,
		"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%"}},
		"podSecurityContext": {"fsGroup": 1000},
		"securityContext": {"runAsUser": 1000},
		"emitKubernetesEvents": false}`))
	ds := only[*appsv1.DaemonSet](t, r)
	if u := ds.Spec.UpdateStrategy.RollingUpdate; u == nil || u.MaxUnavailable == nil || u.MaxUnavailable.String() != "25%" {
		t.Errorf("updateStrategy at NTH's default (25%%): the DaemonSet's is %+v", ds.Spec.UpdateStrategy)
	}
	spec := ds.Spec.Template.Spec
	if psc := spec.SecurityContext; psc == nil || psc.FSGroup == nil || *psc.FSGroup != 1000 {
		t.Errorf("podSecurityContext.fsGroup 1000 (NTH's default): the pod's securityContext is %+v", psc)
	} else if psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.SeccompProfile == nil {
		t.Errorf("the pod's securityContext lost Lifeboat's defaults beside fsGroup: %+v", psc)
	}
	c := container(t, spec)
	if sc := c.SecurityContext; sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != 1000 {
		t.Errorf("securityContext.runAsUser 1000 (NTH's default): the container's securityContext is %+v", sc)
	}
	if got := envOf(t, c)["EMIT_KUBERNETES_EVENTS"].Value; got != "false" {
		t.Errorf("emitKubernetesEvents false (NTH's default): EMIT_KUBERNETES_EVENTS = %q", got)
	}

	// Left out, Lifeboat's defaults stay.
	r = h.template(t, "--set", "enableASGLifecycleDraining=false")
	ds = only[*appsv1.DaemonSet](t, r)
	if u := ds.Spec.UpdateStrategy.RollingUpdate; u == nil || u.MaxUnavailable.String() != "1" || u.MaxSurge.String() != "0" {
		t.Errorf("updateStrategy left out: %+v, want Lifeboat's (maxUnavailable 1, maxSurge 0)", ds.Spec.UpdateStrategy)
	}
	if psc := ds.Spec.Template.Spec.SecurityContext; psc.FSGroup != nil || psc.RunAsUser == nil || *psc.RunAsUser != 65532 {
		t.Errorf("podSecurityContext left out: %+v, want Lifeboat's (user 65532, no fsGroup)", psc)
	}
	if got := envOf(t, container(t, ds.Spec.Template.Spec))["EMIT_KUBERNETES_EVENTS"].Value; got != "true" {
		t.Errorf("emitKubernetesEvents left out: EMIT_KUBERNETES_EVENTS = %q, want Lifeboat's true", got)
	}
}

// TestResourcesBelowSizingAreSaid: NTH's resources are kept as written; a controller memory
// limit below what the controller is sized for is said on the Deployment (annotation and
// label, which GitOps tools and lifeboat status show) and in the notes.
func TestResourcesBelowSizingAreSaid(t *testing.T) {
	// The sizing the chart compares with is the controller's default limit.
	var values map[string]any
	readYAML(t, filepath.Join(chartDir, "values.yaml"), &values)
	tpl, _ := os.ReadFile(filepath.Join(chartDir, "templates", "_checks.tpl"))
	if limit, _ := lookup(values, "controller.resources.limits.memory"); !strings.Contains(string(tpl), `define "lifeboat.controllerMemorySizing" -}}`+fmt.Sprint(limit)+`{{`) {
		t.Errorf("lifeboat.controllerMemorySizing is not values.yaml's controller.resources.limits.memory (%v)", limit)
	}

	h := newHelm(t)
	queue := []string{"--set", "enableSqsTerminationDraining=true", "--set", "queueURL=https://sqs.eu-west-1.amazonaws.com/123456789012/q"}
	small := append(append([]string{}, queue...), "--set", "resources.limits.memory=256Mi", "--set", "resources.requests.memory=64Mi")
	d := only[*appsv1.Deployment](t, h.template(t, small...))
	if got := container(t, d.Spec.Template.Spec).Resources.Limits[corev1.ResourceMemory]; got.Cmp(resource.MustParse("256Mi")) != 0 {
		t.Errorf("NTH's resources (limit 256Mi): the controller's memory limit is %s", got.String())
	}
	why := d.Annotations[status.AnnotationBelowSizing]
	for _, want := range []string{"256Mi", "512Mi"} {
		if !strings.Contains(why, want) {
			t.Errorf("annotation %s = %q, want it to say %s", status.AnnotationBelowSizing, why, want)
		}
	}
	if d.Labels[status.AnnotationBelowSizing] != "true" {
		t.Errorf("Deployment labels %v, want %s=true (for lifeboat status to find it)", d.Labels, status.AnnotationBelowSizing)
	}
	if n := notes(t, h, small...); !strings.Contains(n, "256Mi") || !strings.Contains(n, "512Mi") {
		t.Errorf("the notes do not say the controller's limit is below its sizing:\n%s", n)
	}

	for _, tc := range []struct {
		name string
		args []string
	}{
		{"Lifeboat's default", queue},
		{"a larger limit", append(append([]string{}, queue...), "--set", "resources.limits.memory=1Gi")},
		{"the same limit, another spelling", append(append([]string{}, queue...), "--set", "resources.limits.memory=536870912")},
		{"no limit", append(append([]string{}, queue...), "--set-json", `resources={"requests":{"memory":"64Mi"}}`)},
	} {
		d := only[*appsv1.Deployment](t, h.template(t, tc.args...))
		if why, ok := d.Annotations[status.AnnotationBelowSizing]; ok {
			t.Errorf("%s: the Deployment says %q", tc.name, why)
		}
	}
}

// TestEveryRefusalInOneMessage: one render with several faults fails once, naming each.
func TestEveryRefusalInOneMessage(t *testing.T) {
	h := newHelm(t)
	_, err := h.run("template", "lifeboat", chartDir, "--values", valuesFile(t, `{
		"targetNodeOs": "linux windows",
		"config": {"wokers": 3},
		"podMonitor": {"create": true},
		"conditionWriterPolicy": {"enabled": true},
		"agent": {"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}}}`))
	if err == nil {
		t.Fatal("rendered")
	}
	for _, want := range []string{
		"wokers",                               // the schema
		"targetNodeOs",                         // NTH's keys
		"enableASGLifecycleDraining: left out", // lost protection
		"podMonitor.create needs the agents' metrics", // monitors
		"conditionWriterPolicy.enabled needs conditionWriterPolicy.serviceAccounts",
		"agent.updateStrategy: maxSurge 1 with hostNetwork",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q:\n%v", want, err)
		}
	}
}

// TestWrongModeMonitorSkipped: a monitor for the workload the mode leaves out is skipped, as
// NTH's chart skips it, and the notes say so; a shared base values file still renders.
func TestWrongModeMonitorSkipped(t *testing.T) {
	h := newHelm(t)
	for _, tc := range []struct {
		mode, kind, key string
		args            []string
	}{
		{"queue", "PodMonitor", "podMonitor.create", []string{"--set", "enableSqsTerminationDraining=true", "--set", "queueURL=https://sqs.eu-west-1.amazonaws.com/123456789012/q"}},
		{"IMDS", "ServiceMonitor", "serviceMonitor.create", []string{"--set", "enableSqsTerminationDraining=false", "--set", "enableASGLifecycleDraining=true"}},
	} {
		args := append(append([]string{}, tc.args...), "--set", "enablePrometheusServer=true", "--set", "podMonitor.create=true", "--set", "serviceMonitor.create=true")
		out, err := h.run(append([]string{"template", "lifeboat", chartDir, "--namespace", "kube-system"}, args...)...)
		if err != nil {
			t.Errorf("%s mode, both monitors asked for: %v", tc.mode, err)
			continue
		}
		if got := objectsOfKind(decodeMaps(t, out), tc.kind); len(got) != 0 {
			t.Errorf("%s mode: %d %s rendered, want none", tc.mode, len(got), tc.kind)
		}
		if n := notes(t, h, args...); !strings.Contains(n, tc.key+": skipped") {
			t.Errorf("%s mode: the notes do not say %s was skipped:\n%s", tc.mode, tc.key, n)
		}
	}
}

// TestGlobalAllowed: the chart renders as another chart's dependency, where helm passes the
// parent's global values.
func TestGlobalAllowed(t *testing.T) {
	h := newHelm(t)
	h.template(t, "--set", "global.imageRegistry=registry.example.com")

	parent := t.TempDir()
	if err := os.WriteFile(filepath.Join(parent, "Chart.yaml"), []byte("apiVersion: v2\nname: platform\nversion: 0.1.0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(parent, "values.yaml"), []byte("global:\n  imageRegistry: registry.example.com\nlifeboat:\n  enableASGLifecycleDraining: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(filepath.Join(parent, "charts", "lifeboat"), os.DirFS(chartDir)); err != nil {
		t.Fatal(err)
	}
	out, err := h.run("template", "platform", parent, "--namespace", "kube-system")
	if err != nil {
		t.Fatalf("as a dependency: %v", err)
	}
	if objs, err := decodeAll(out); err != nil || len(objectsOf[*appsv1.DaemonSet](objs)) != 1 {
		t.Errorf("as a dependency: %v, want the agent's DaemonSet", err)
	}
}

// TestOfflineRender: without a cluster (helm template, Argo CD, a CI check) the PrometheusRule
// and the FlowSchema render as the ServiceMonitor does; a cluster's API list without flow
// control v1 (Kubernetes before 1.29) leaves the FlowSchema out, and the notes say so.
func TestOfflineRender(t *testing.T) {
	h := newHelm(t)
	r := h.template(t)
	if len(objectsOf[*flowcontrolv1.FlowSchema](r)) != 1 || len(objectsOf[*flowcontrolv1.PriorityLevelConfiguration](r)) != 1 {
		t.Error("no FlowSchema and PriorityLevelConfiguration rendered offline")
	}
	out, err := h.run("template", "lifeboat", chartDir, "--set", "prometheusRule.enabled=true", "--set", "config.enablePrometheusServer=true")
	if err != nil {
		t.Fatal(err)
	}
	if len(objectsOfKind(decodeMaps(t, out), "PrometheusRule")) != 1 {
		t.Error("no PrometheusRule rendered offline")
	}
	// A cluster's API list (it names kinds, v1/Node among them) without flowcontrol v1.
	cluster := []string{"--api-versions", "v1/Node", "--api-versions", "flowcontrol.apiserver.k8s.io/v1beta3/FlowSchema",
		"--api-versions", "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy"}
	r = h.template(t, cluster...)
	if len(objectsOf[*flowcontrolv1.FlowSchema](r)) != 0 {
		t.Error("a flowcontrol.apiserver.k8s.io/v1 FlowSchema rendered for a cluster that serves v1beta3 only")
	}
	if n := notes(t, h, cluster...); !strings.Contains(n, "the cluster serves no flowcontrol.apiserver.k8s.io/v1 FlowSchema") {
		t.Errorf("the notes do not say the FlowSchema was left out:\n%s", n)
	}
}

// TestNTHSelectorLabels: with NTH's values the pods carry NTH's labels, so that a selector
// copied from NTH's values (topology spread, affinity) still matches them, and every selector
// of the chart matches its pods; nthLabels=false keeps Lifeboat's.
func TestNTHSelectorLabels(t *testing.T) {
	h := newHelm(t)
	spread := `[{"maxSkew":1,"topologyKey":"topology.kubernetes.io/zone","whenUnsatisfiable":"ScheduleAnyway","labelSelector":{"matchLabels":{"app.kubernetes.io/name":"aws-node-termination-handler","app.kubernetes.io/instance":"lifeboat"}}}]`
	queue := []string{"--set", "enableSqsTerminationDraining=true", "--set", "queueURL=https://sqs.eu-west-1.amazonaws.com/123456789012/q",
		"--set-json", "topologySpreadConstraints=" + spread, "--set", "enablePrometheusServer=true", "--set", "serviceMonitor.create=true"}
	out, err := h.run(append([]string{"template", "lifeboat", chartDir, "--namespace", "kube-system"}, queue...)...)
	if err != nil {
		t.Fatal(err)
	}
	maps := decodeMaps(t, out)
	d := typedOf[appsv1.Deployment](t, maps, "Deployment")
	pod := labels.Set(d.Spec.Template.Labels)
	for _, want := range []string{"app.kubernetes.io/name=aws-node-termination-handler", "k8s-app=aws-node-termination-handler", "app.kubernetes.io/component=deployment"} {
		kv := strings.SplitN(want, "=", 2)
		if pod[kv[0]] != kv[1] {
			t.Errorf("controller pod labels %v, want %s", pod, want)
		}
	}
	for _, c := range d.Spec.Template.Spec.TopologySpreadConstraints {
		if !selects(t, c.LabelSelector, pod) {
			t.Errorf("the copied topologySpreadConstraints selector %v does not match the pods' labels %v", c.LabelSelector, pod)
		}
	}
	if !selects(t, d.Spec.Selector, pod) {
		t.Errorf("the Deployment's selector %v does not match its pods %v", d.Spec.Selector, pod)
	}
	if pdb := typedOf[policyv1.PodDisruptionBudget](t, maps, "PodDisruptionBudget"); !selects(t, pdb.Spec.Selector, pod) {
		t.Errorf("the PodDisruptionBudget's selector %v does not match the pods %v", pdb.Spec.Selector, pod)
	}
	svc := typedOf[corev1.Service](t, maps, "Service")
	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(pod) {
		t.Errorf("the metrics Service's selector %v does not match the pods %v", svc.Spec.Selector, pod)
	}
	sm := objectsOfKind(maps, "ServiceMonitor")
	if len(sm) != 1 {
		t.Fatalf("%d ServiceMonitors", len(sm))
	}
	for k, v := range lookupOr(sm[0], "spec.selector.matchLabels").(map[string]any) {
		if svc.Labels[k] != v {
			t.Errorf("the ServiceMonitor selects %s=%v; the Service's labels are %v", k, v, svc.Labels)
		}
	}

	ds := only[*appsv1.DaemonSet](t, h.template(t, "--set", "enableASGLifecycleDraining=true"))
	pod = ds.Spec.Template.Labels
	if pod["app.kubernetes.io/name"] != "aws-node-termination-handler" || pod["k8s-app"] != "aws-node-termination-handler" || pod["kubernetes.io/os"] != "linux" {
		t.Errorf("agent pod labels %v, want NTH's", pod)
	}
	if !selects(t, ds.Spec.Selector, pod) {
		t.Errorf("the DaemonSet's selector %v does not match its pods %v", ds.Spec.Selector, pod)
	}

	// Opted out, or without NTH's values: Lifeboat's own labels.
	for _, args := range [][]string{{"--set", "enableASGLifecycleDraining=true", "--set", "nthLabels=false"}, nil} {
		ds := only[*appsv1.DaemonSet](t, h.template(t, args...))
		if got := ds.Spec.Selector.MatchLabels; got["app.kubernetes.io/name"] != "lifeboat" || got["app.kubernetes.io/component"] != "agent" {
			t.Errorf("%v: DaemonSet selector %v, want Lifeboat's", args, got)
		}
		if _, ok := ds.Spec.Template.Labels["k8s-app"]; ok {
			t.Errorf("%v: agent pod labels %v carry NTH's k8s-app", args, ds.Spec.Template.Labels)
		}
	}
}

// typedOf decodes the single object of a kind among decoded maps (the render holds kinds
// outside the client's scheme).
func typedOf[T any](t *testing.T, objs []map[string]any, kind string) *T {
	t.Helper()
	of := objectsOfKind(objs, kind)
	if len(of) != 1 {
		t.Fatalf("rendered %d %s, want 1", len(of), kind)
	}
	b, _ := json.Marshal(of[0])
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return &v
}

func selects(t *testing.T, s *metav1.LabelSelector, set labels.Set) bool {
	t.Helper()
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		t.Fatal(err)
	}
	return !sel.Empty() && sel.Matches(set)
}

// TestNotesSayOnlyWhatApplies: in queue mode the agent's drain switches and placement are
// not listed as applied (the agent is off), and in IMDS mode the controller's are not.
func TestNotesSayOnlyWhatApplies(t *testing.T) {
	h := newHelm(t)
	n := notes(t, h, "--set", "enableSqsTerminationDraining=true", "--set", "queueURL=https://sqs.eu-west-1.amazonaws.com/123456789012/q",
		"--set", "enableSpotInterruptionDraining=false", "--set", "enableScheduledEventDraining=false", "--set", "daemonsetPriorityClassName=x")
	for _, notApplied := range []string{"enableSpotInterruptionDraining ->", "enableScheduledEventDraining ->", "daemonsetPriorityClassName ->"} {
		if strings.Contains(n, notApplied) {
			t.Errorf("queue mode: the notes list %q as applied:\n%s", notApplied, n)
		}
	}
	if !strings.Contains(n, "not used in queue mode") || !strings.Contains(n, "enableSpotInterruptionDraining") {
		t.Errorf("queue mode: the notes do not say the agent's values are not used:\n%s", n)
	}
	if !strings.Contains(n, "queueURL -> config.queueUrl") {
		t.Errorf("queue mode: the notes do not list queueURL as applied:\n%s", n)
	}
	n = notes(t, h, "--set", "enableASGLifecycleDraining=true", "--set", "replicas=3", "--set", "queueURL=https://sqs.eu-west-1.amazonaws.com/123456789012/q")
	for _, notApplied := range []string{"replicas ->", "queueURL ->"} {
		if strings.Contains(n, notApplied) {
			t.Errorf("IMDS mode: the notes list %q as applied:\n%s", notApplied, n)
		}
	}
	if !strings.Contains(n, "enableASGLifecycleDraining -> config.enableAsgLifecycleDraining") {
		t.Errorf("IMDS mode: the notes do not list the drain switch as applied:\n%s", n)
	}
}
