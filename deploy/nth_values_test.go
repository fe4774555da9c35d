// SPDX-License-Identifier: Apache-2.0

package deploy_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/test/nth"
)

// nthEntry is one key of nth/keys.yaml.
type nthEntry struct {
	Default any      `json:"default"`
	To      []string `json:"to"`
	Same    bool     `json:"same"`
	Ignored string   `json:"ignored"`
	Refuse  string   `json:"refuse"`
	Mode    string   `json:"mode"`
	Note    string   `json:"note"`
	Legacy  string   `json:"legacy"`
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func nthTable(t *testing.T) map[string]nthEntry {
	t.Helper()
	var table map[string]nthEntry
	readYAML(t, filepath.Join(chartDir, "nth", "keys.yaml"), &table)
	return table
}

// nthValues is NTH's own values.yaml, from its pinned module.
func nthValues(t *testing.T) map[string]any {
	t.Helper()
	var values map[string]any
	readYAML(t, filepath.Join(nth.ChartDir(t), "values.yaml"), &values)
	return values
}

// lookup is the value at a dotted path, and whether the path exists.
func lookup(m map[string]any, path string) (any, bool) {
	var v any = m
	for _, part := range strings.Split(path, ".") {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = mm[part]; !ok {
			return nil, false
		}
	}
	return v, true
}

func asJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestEveryNTHValueIsMappedOrRefused reads NTH's values.yaml from its module: every key NTH
// has is in nth/keys.yaml (mapped, shared, ignored with a reason, or refused with one), every
// key there is NTH's with NTH's default, and what a key maps to is one of Lifeboat's values.
// When NTH gains a key, this fails until the chart says what to do with it.
func TestEveryNTHValueIsMappedOrRefused(t *testing.T) {
	table := nthTable(t)
	values := nthValues(t)
	var lifeboat map[string]any
	readYAML(t, filepath.Join(chartDir, "values.yaml"), &lifeboat)

	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			path := prefix + k
			if _, ok := table[path]; ok {
				continue
			}
			if sub, ok := v.(map[string]any); ok && len(sub) > 0 {
				walk(path+".", sub)
				continue
			}
			t.Errorf("NTH's value %s (default %s) is neither mapped nor refused: add it to nth/keys.yaml", path, asJSON(v))
		}
	}
	walk("", values)

	for key, e := range table {
		got, ok := lookup(values, key)
		if e.Legacy != "" {
			if ok {
				t.Errorf("nth/keys.yaml: %s is marked legacy (from NTH's chart %s), but NTH's values.yaml still has it", key, e.Legacy)
			}
			if e.Refuse == "" && len(e.To) == 0 && e.Ignored == "" {
				t.Errorf("nth/keys.yaml: legacy %s must map, be ignored, or be refused naming its replacement", key)
			}
			continue
		}
		if !ok {
			t.Errorf("nth/keys.yaml: %s is not a value of NTH's chart", key)
			continue
		}
		if asJSON(got) != asJSON(e.Default) {
			t.Errorf("nth/keys.yaml: %s has default %s, NTH's is %s", key, asJSON(e.Default), asJSON(got))
		}
		kinds := 0
		for _, set := range []bool{len(e.To) > 0, e.Same, e.Ignored != "", e.Refuse != ""} {
			if set {
				kinds++
			}
		}
		if kinds != 1 {
			t.Errorf("nth/keys.yaml: %s needs exactly one of to, same, ignored, refuse", key)
		}
		if e.Same {
			if _, ok := lookup(lifeboat, strings.Split(key, ".")[0]); !ok {
				t.Errorf("nth/keys.yaml: %s is marked same, but Lifeboat's values have no %s", key, strings.Split(key, ".")[0])
			}
		}
		for _, to := range e.To {
			if _, ok := lookup(lifeboat, to); !ok && !strings.HasPrefix(to, "configFromSecret.") {
				t.Errorf("nth/keys.yaml: %s maps to %s, which is not one of Lifeboat's values", key, to)
			}
		}
		// A setting keeps NTH's name (its variable's), but for NTH's deprecated spellings.
		renamed := map[string]string{"checkASGTagBeforeDraining": "checkTagBeforeDraining", "managedAsgTag": "managedTag", "gracePeriod": "podTerminationGracePeriod"}
		if len(e.To) == 1 && strings.HasPrefix(e.To[0], "config.") {
			want := key
			if r, ok := renamed[key]; ok {
				want = r
			}
			if !strings.EqualFold(strings.TrimPrefix(e.To[0], "config."), want) {
				t.Errorf("nth/keys.yaml: %s maps to %s, a setting of another name", key, e.To[0])
			}
		}
	}

	// A key's mode names the mode whose workload reads the setting it maps to (NOTES say it is
	// not used in the other): a setting of the agent's group for imds, of the controller's for
	// queue.
	groups := map[string]string{}
	for _, st := range config.Settings() {
		groups[chartKey(st.Env)] = st.Group
	}
	for key, e := range table {
		want := map[string]string{"imds": "Agent mode", "queue": "Controller mode"}[e.Mode]
		switch {
		case e.Mode == "":
		case want == "":
			t.Errorf("nth/keys.yaml: %s has mode %q, want imds or queue", key, e.Mode)
		case len(e.To) != 1 || !strings.HasPrefix(e.To[0], "config."):
			t.Errorf("nth/keys.yaml: %s has a mode but maps to %v, not one setting", key, e.To)
		case !strings.HasPrefix(groups[strings.TrimPrefix(e.To[0], "config.")], want):
			t.Errorf("nth/keys.yaml: %s has mode %s, and %s is a setting of %q", key, e.Mode, e.To[0], groups[strings.TrimPrefix(e.To[0], "config.")])
		}
	}

	// Lifeboat's image replaces NTH's: the chart names it in _nth.tpl, and it must be the default.
	tpl, err := os.ReadFile(filepath.Join(chartDir, "templates", "_nth.tpl"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`define "lifeboat.nth.defaultRepository" -}}([^{]+){{`).FindSubmatch(tpl)
	if repo, _ := lookup(lifeboat, "image.repository"); m == nil || string(m[1]) != repo {
		t.Errorf("_nth.tpl names Lifeboat's image %q; values.yaml's image.repository is %v", m, repo)
	}
}

// nthTestValue is a value other than NTH's default for a key, and what the chart must do
// with it: "refused", "ignored" (the render is unchanged) or "mapped" (it changes).
func nthTestValue(key string, e nthEntry) (any, string) {
	switch key {
	case "targetNodeOs":
		return "linux windows", "refused"
	case "podDisruptionBudget":
		return map[string]any{"minAvailable": 1}, "refused"
	case "probes":
		return map[string]any{"httpGet": map[string]any{"path": "/nth", "port": 8081}, "periodSeconds": 7}, "mapped"
	case "updateStrategy", "strategy":
		return map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"maxUnavailable": 2, "maxSurge": 0}}, "mapped"
	case "dnsPolicy", "linuxDnsPolicy":
		return "Default", "mapped"
	case "webhookTemplateConfigMapName", "webhookTemplateConfigMapKey":
		return "nth-test", "refused" // one without the other
	case "enableProbesServer":
		return true, "ignored" // true is Lifeboat's default already
	case "useHostNetwork":
		return false, "mapped"
	case "enableASGLifecycleDraining":
		return false, "ignored" // false is Lifeboat's default: the release stays as it is
	case "checkASGTagBeforeDraining", "managedAsgTag":
		// Without its replacement it did nothing in NTH: refused, naming the replacement.
		v, _ := nthTestValue("", nthEntry{Default: e.Default})
		return v, "refused"
	case "serviceAccount.create":
		// As for Lifeboat's own value, an existing account must then be named.
		return false, "refused: serviceAccount.name is required"
	}
	outcome := "mapped"
	switch {
	case e.Refuse != "":
		outcome = "refused"
	case e.Ignored != "":
		outcome = "ignored"
	}
	switch d := e.Default.(type) {
	case bool:
		return !d, outcome
	case float64:
		return d + 7, outcome
	case map[string]any:
		return map[string]any{"nth-test": "v"}, outcome
	case []any:
		return []any{map[string]any{"name": "NTH_TEST", "value": "v"}}, outcome
	case nil:
		switch key {
		case "terminationGracePeriodSeconds", "gracePeriod":
			return 45, outcome
		case "securityContext.runAsUserID", "securityContext.runAsGroupID":
			return 1000, outcome
		case "linuxUpdateStrategy":
			return map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"maxUnavailable": 3, "maxSurge": 0}}, outcome
		case "windowsUpdateStrategy":
			return map[string]any{"type": "OnDelete"}, outcome
		}
	}
	return "nth-test", outcome
}

// TestEachNTHValueTakesEffect renders the chart with each NTH key of nth/keys.yaml set to
// another value than NTH's default: a key that sets one setting must land in its variable
// (those are checked together), any other mapped key, alone, changes the release (in queue
// mode for the controller's keys), an ignored one leaves it as it is, a refused one fails
// naming the key. The table and the templates that apply it cannot drift apart.
func TestEachNTHValueTakesEffect(t *testing.T) {
	if testing.Short() {
		t.Skip("renders the chart once per NTH key")
	}
	h := newHelm(t)
	table := nthTable(t)
	dir := t.TempDir()
	render := func(values map[string]any) (string, error) {
		f, err := os.CreateTemp(dir, "values-*.json")
		if err != nil {
			return "", err
		}
		if err := json.NewEncoder(f).Encode(values); err != nil {
			return "", err
		}
		f.Close()
		return h.run("template", "lifeboat", chartDir, "--namespace", "kube-system", "--values", f.Name())
	}
	queue := map[string]any{"enableSqsTerminationDraining": true, "queueURL": "https://sqs.eu-west-1.amazonaws.com/123456789012/q"}
	// In IMDS mode NTH's values must say whether the agent drains on the lifecycle state
	// (NTH's default is on, Lifeboat's off): the base says no, Lifeboat's default.
	imds := map[string]any{"enableASGLifecycleDraining": false}
	bases := map[string]string{}
	for name, values := range map[string]map[string]any{"imds": imds, "queue": queue} {
		out, err := render(values)
		if err != nil {
			t.Fatal(err)
		}
		bases[name] = out
	}
	// Keys that only set one setting (config.x) no other key sets are checked together, in one
	// render: each must land in its variable. The others are rendered one at a time.
	targets := map[string]int{}
	for _, e := range table {
		for _, to := range e.To {
			targets[to]++
		}
	}
	envOfKey := map[string]string{}
	for _, st := range config.Settings() {
		envOfKey[chartKey(st.Env)] = st.Env
	}
	batch := map[string]any{"enableASGLifecycleDraining": false}
	wantEnv := map[string]string{}
	keys := make([]string, 0, len(table))
	for k, e := range table {
		if e.Same {
			continue
		}
		if v, want := nthTestValue(k, e); want == "mapped" && len(e.To) == 1 && strings.HasPrefix(e.To[0], "config.") && targets[e.To[0]] == 1 {
			set(batch, k, v)
			if f, ok := v.(float64); ok {
				v = int64(f)
			}
			wantEnv[envOfKey[strings.TrimPrefix(e.To[0], "config.")]] = fmt.Sprint(v)
			continue
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	t.Run("settings", func(t *testing.T) {
		out, err := render(batch)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := decodeAll(out)
		if err != nil {
			t.Fatal(err)
		}
		env := envOf(t, container(t, only[*appsv1.DaemonSet](t, rendered(objs)).Spec.Template.Spec))
		for name, want := range wantEnv {
			if got := env[name].Value; got != want {
				t.Errorf("%s = %q, want %q", name, got, want)
			}
		}
		if len(wantEnv) < 30 {
			t.Errorf("only %d settings checked together", len(wantEnv))
		}
	})
	for _, key := range keys {
		e := table[key]
		t.Run(key, func(t *testing.T) {
			t.Parallel()
			value, want := nthTestValue(key, e)
			base, mode := imds, "imds"
			for _, to := range e.To {
				if strings.HasPrefix(to, "controller.") && len(e.To) == 1 {
					base, mode = queue, "queue"
				}
			}
			values := map[string]any{}
			for k, v := range base {
				values[k] = v
			}
			set(values, key, value)
			out, err := render(values)
			switch {
			case strings.HasPrefix(want, "refused: "):
				if err == nil || !strings.Contains(err.Error(), strings.TrimPrefix(want, "refused: ")) {
					t.Errorf("%s = %s: %v, want a refusal saying %q", key, asJSON(value), err, strings.TrimPrefix(want, "refused: "))
				}
			case want == "refused":
				if err == nil || !strings.Contains(err.Error(), key) {
					t.Errorf("%s = %s: %v, want a refusal naming it", key, asJSON(value), err)
				}
			case want == "ignored":
				if err != nil || out != bases[mode] {
					t.Errorf("%s = %s changed the release (%v)", key, asJSON(value), err)
				}
			default:
				if err != nil {
					t.Fatalf("%s = %s: %v", key, asJSON(value), err)
				}
				if out == bases[mode] {
					t.Errorf("%s = %s (%s mode) changed nothing; it maps to %v", key, asJSON(value), mode, e.To)
				}
			}
		})
	}
}

// set puts v at a dotted path, creating maps on the way.
func set(m map[string]any, path string, v any) {
	parts := strings.Split(path, ".")
	for _, p := range parts[:len(parts)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	m[parts[len(parts)-1]] = v
}

// TestNTHDefaultsGiveWhatNTHGave renders NTH's own values.yaml, and NTH's example values
// files, through the chart. Every value NTH's values.yaml sets is taken as written, NTH's
// defaults included, so it gives Lifeboat's release with what NTH gave: NTH's ServiceAccount
// name (so that its IAM role still trusts it), its labels, fsGroup, user and group, update
// strategy, liveness timings and DNS policy, Events and probes off, and draining on the Auto
// Scaling target lifecycle state. An example that leaves the lifecycle state out is refused,
// naming it.
func TestNTHDefaultsGiveWhatNTHGave(t *testing.T) {
	h := newHelm(t)
	base, err := h.run("template", "lifeboat", chartDir, "--namespace", "kube-system",
		"--set", "config.enableAsgLifecycleDraining=true", "--set", "agent.serviceAccount.name=lifeboat-aws-node-termination-handler",
		"--set", "nthLabels=true", "--set", "podSecurityContext.fsGroup=1000",
		"--set", "securityContext.runAsUser=1000", "--set", "securityContext.runAsGroup=1000",
		"--set-json", `agent.updateStrategy={"type":"RollingUpdate","rollingUpdate":{"maxUnavailable":"25%"}}`,
		"--set", "agent.livenessProbe.periodSeconds=5", "--set", "agent.dnsPolicy=ClusterFirstWithHostNet",
		"--set", "config.emitKubernetesEvents=false", "--set", "config.enableProbesServer=false")
	if err != nil {
		t.Fatal(err)
	}
	got, err := h.run("template", "lifeboat", chartDir, "--namespace", "kube-system", "--values", filepath.Join(nth.ChartDir(t), "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if got != base {
		t.Errorf("NTH's default values do not give Lifeboat's release with what NTH gave (first difference at line %d)", firstDifferentLine(got, base))
	}
	for _, tc := range []struct {
		file string
		args []string
		want string
	}{
		{"example-values-imds-linux.yaml", nil, "enableASGLifecycleDraining: left out"},
		{"example-values-imds-linux.yaml", []string{"--set", "enableASGLifecycleDraining=false"}, "kind: DaemonSet"},
		{"example-values-queue.yaml", nil, "kind: Deployment"},
		{"example-values-imds-windows.yaml", nil, "targetNodeOs: Lifeboat runs on Linux nodes only"},
	} {
		out, err := h.run(append([]string{"template", "lifeboat", chartDir, "--namespace", "kube-system", "--values", filepath.Join(nth.ChartDir(t), tc.file)}, tc.args...)...)
		if err != nil {
			out = err.Error()
		}
		if !strings.Contains(out, tc.want) {
			t.Errorf("NTH's %s %v: want %q in\n%.600s", tc.file, tc.args, tc.want, out)
		}
	}
}

// TestMonitorsRender checks the ServiceMonitor and PodMonitor where the cluster serves them
// (no CRD of the Prometheus Operator is pinned here, so they are checked rendered, not
// installed), and that a monitor without the metrics it scrapes is refused
// (TestWrongModeMonitorSkipped: one for a workload the release leaves out is skipped).
func TestMonitorsRender(t *testing.T) {
	h := newHelm(t)
	apis := []string{"--api-versions", "monitoring.coreos.com/v1/ServiceMonitor", "--api-versions", "monitoring.coreos.com/v1/PodMonitor"}
	out, err := h.run(append([]string{"template", "lifeboat", chartDir, "--namespace", "kube-system",
		"--set", "controller.enabled=true", "--set", "config.enablePrometheusServer=true", "--set", "config.prometheusServerPort=9100",
		"--set", "serviceMonitor.create=true", "--set", "serviceMonitor.labels.release=prom", "--set", "serviceMonitor.interval=15s",
		"--set", "serviceMonitor.namespace=monitoring", "--set", "podMonitor.create=true"}, apis...)...)
	if err != nil {
		t.Fatal(err)
	}
	objs := map[string]map[string]any{}
	for _, doc := range strings.Split(out, "\n---\n") {
		var o map[string]any
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil || o == nil {
			continue
		}
		objs[fmt.Sprint(o["kind"])+"/"+fmt.Sprint(lookupOr(o, "metadata.name"))] = o
	}
	for _, tc := range []struct{ obj, path, want string }{
		{"ServiceMonitor/lifeboat-controller", "metadata.namespace", "monitoring"},
		{"ServiceMonitor/lifeboat-controller", "metadata.labels.release", "prom"},
		{"ServiceMonitor/lifeboat-controller", "spec.selector.matchLabels", `{"app.kubernetes.io/component":"controller","app.kubernetes.io/instance":"lifeboat","app.kubernetes.io/name":"lifeboat"}`},
		{"ServiceMonitor/lifeboat-controller", "spec.endpoints", `[{"interval":"15s","path":"/metrics","port":"metrics"}]`},
		{"Service/lifeboat-controller-metrics", "spec.ports", `[{"name":"metrics","port":9100,"protocol":"TCP","targetPort":"metrics"}]`},
		{"Service/lifeboat-controller-metrics", "spec.selector", `{"app.kubernetes.io/component":"controller","app.kubernetes.io/instance":"lifeboat","app.kubernetes.io/name":"lifeboat"}`},
		{"PodMonitor/lifeboat-agent", "spec.selector.matchLabels", `{"app.kubernetes.io/component":"agent","app.kubernetes.io/instance":"lifeboat","app.kubernetes.io/name":"lifeboat"}`},
		{"PodMonitor/lifeboat-agent", "spec.podMetricsEndpoints", `[{"interval":"30s","path":"/metrics","port":"metrics"}]`},
		{"PodMonitor/lifeboat-agent", "spec.sampleLimit", "5000"},
	} {
		o, ok := objs[tc.obj]
		if !ok {
			t.Errorf("no %s rendered (have %v)", tc.obj, keysOf(objs))
			continue
		}
		got := lookupOr(o, tc.path)
		if s, ok := got.(string); !ok || s != tc.want {
			if asJSON(got) != tc.want {
				t.Errorf("%s %s = %s, want %s", tc.obj, tc.path, asJSON(got), tc.want)
			}
		}
	}
	// The Service selects the controller's pods, whose container port is named metrics.
	if !strings.Contains(out, "- name: metrics\n              containerPort: 9100") {
		t.Error("the controller's container has no port named metrics on 9100")
	}
	// Without --api-versions (helm template for Argo CD or a CI check), as NTH's chart does: a
	// requested monitor is rendered, not left out in silence.
	out, err = h.run("template", "lifeboat", chartDir, "--namespace", "kube-system",
		"--set", "controller.enabled=true", "--set", "config.enablePrometheusServer=true",
		"--set", "serviceMonitor.create=true", "--set", "podMonitor.create=true")
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"ServiceMonitor", "PodMonitor"} {
		if len(objectsOfKind(decodeMaps(t, out), kind)) != 1 {
			t.Errorf("no %s rendered without --api-versions", kind)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--set", "controller.enabled=true", "--set", "serviceMonitor.create=true"}, "serviceMonitor.create needs the controller's metrics"},
		{[]string{"--set", "podMonitor.create=true"}, "podMonitor.create needs the agents' metrics"},
	} {
		_, err := h.run(append([]string{"template", "lifeboat", chartDir}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error saying %q", tc.args, err, tc.want)
		}
	}
}

func lookupOr(m map[string]any, path string) any {
	v, _ := lookup(m, path)
	return v
}

func keysOf[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestChartAdditions renders what the chart took from NTH's: update strategies (refused where
// a surge pod would wait for host ports), topology spread, DNS settings, and the webhook
// template from a ConfigMap.
func TestChartAdditions(t *testing.T) {
	h := newHelm(t)
	r := h.template(t, "--set", "controller.enabled=true",
		"--set-json", `agent.updateStrategy={"type":"RollingUpdate","rollingUpdate":{"maxUnavailable":"20%","maxSurge":0}}`,
		"--set-json", `controller.strategy={"type":"Recreate"}`,
		"--set-json", `controller.topologySpreadConstraints=[{"maxSkew":1,"topologyKey":"topology.kubernetes.io/zone","whenUnsatisfiable":"ScheduleAnyway"}]`,
		"--set", "agent.dnsPolicy=Default", "--set-json", `controller.dnsConfig={"options":[{"name":"ndots","value":"2"}]}`,
		"--set", "webhookTemplateConfigMap.name=tmpl", "--set", "webhookTemplateConfigMap.key=body.json",
	)
	ds, d := only[*appsv1.DaemonSet](t, r), only[*appsv1.Deployment](t, r)
	if u := ds.Spec.UpdateStrategy.RollingUpdate; u == nil || u.MaxUnavailable.String() != "20%" {
		t.Errorf("agent update strategy %+v, want maxUnavailable 20%%", ds.Spec.UpdateStrategy)
	}
	if d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("controller strategy %+v, want Recreate", d.Spec.Strategy)
	}
	if c := d.Spec.Template.Spec.TopologySpreadConstraints; len(c) != 1 || c[0].TopologyKey != "topology.kubernetes.io/zone" {
		t.Errorf("controller topology spread %+v", c)
	}
	if p := ds.Spec.Template.Spec.DNSPolicy; p != corev1.DNSDefault {
		t.Errorf("agent DNS policy %q, want Default", p)
	}
	if c := d.Spec.Template.Spec.DNSConfig; c == nil || len(c.Options) != 1 || c.Options[0].Name != "ndots" {
		t.Errorf("controller DNS config %+v", c)
	}
	for component, spec := range podSpecs(r) {
		if got := envOf(t, container(t, spec))["WEBHOOK_TEMPLATE_FILE"].Value; got != "/etc/lifeboat/webhook-template/body.json" {
			t.Errorf("%s: WEBHOOK_TEMPLATE_FILE = %q", component, got)
		}
		if len(spec.Volumes) != 1 || spec.Volumes[0].ConfigMap == nil || spec.Volumes[0].ConfigMap.Name != "tmpl" {
			t.Errorf("%s: volumes %+v, want ConfigMap tmpl", component, spec.Volumes)
		}
	}
	// Defaults keep the chart's single-node-safe strategies.
	r = h.template(t, "--set", "controller.enabled=true", "--set", "controller.hostNetwork=true")
	if u := only[*appsv1.DaemonSet](t, r).Spec.UpdateStrategy.RollingUpdate; u == nil || u.MaxSurge.String() != "0" || u.MaxUnavailable.String() != "1" {
		t.Errorf("default agent update strategy %+v", u)
	}
	if u := only[*appsv1.Deployment](t, r).Spec.Strategy.RollingUpdate; u == nil || u.MaxSurge.String() != "0" {
		t.Errorf("default host-network controller strategy %+v", u)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--set-json", `agent.updateStrategy={"type":"RollingUpdate","rollingUpdate":{"maxSurge":1,"maxUnavailable":0}}`},
			"agent.updateStrategy: maxSurge 1 with hostNetwork"},
		// Kubernetes' default maxSurge for a Deployment is 25%: named or not, refused on the host network.
		{[]string{"--set", "controller.enabled=true", "--set", "controller.hostNetwork=true", "--set-json", `controller.strategy={"rollingUpdate":{"maxUnavailable":1}}`},
			"controller.strategy: maxSurge 25% with hostNetwork"},
		{[]string{"--set", "webhookTemplateConfigMap.name=t", "--set", "webhookTemplateConfigMap.key=k", "--set", "config.webhookTemplateFile=/x"},
			"webhookTemplateConfigMap and config.webhookTemplateFile both name the webhook template"},
		{[]string{"--set", "webhookTemplateConfigMap.name=t"}, "webhookTemplateConfigMap.key is required"},
	} {
		_, err := h.run(append([]string{"template", "lifeboat", chartDir}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error saying %q", tc.args, err, tc.want)
		}
	}
}

// TestNTHImageIsNotRun: NTH's image named in a values file gives way to Lifeboat's; a tag of
// NTH's image, or a mirror of it, is refused rather than run.
func TestNTHImageIsNotRun(t *testing.T) {
	h := newHelm(t)
	for _, tag := range []string{"0.2.0", "0.2.0-rc.1", "sha-0123abc", "0.2.0@sha256:" + strings.Repeat("ab", 32)} {
		r := h.template(t, "--set", "image.tag="+tag)
		if img := container(t, only[*appsv1.DaemonSet](t, r).Spec.Template.Spec).Image; img != "ghcr.io/lifeboat-dev/lifeboat:"+tag {
			t.Errorf("image.tag=%s: image %s", tag, img)
		}
	}
	r := h.template(t, "--set", "image.repository=public.ecr.aws/aws-ec2/aws-node-termination-handler")
	if img := container(t, only[*appsv1.DaemonSet](t, r).Spec.Template.Spec).Image; !strings.HasPrefix(img, "ghcr.io/lifeboat-dev/lifeboat:") {
		t.Errorf("image %s, want Lifeboat's", img)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--set", "image.repository=public.ecr.aws/aws-ec2/aws-node-termination-handler", "--set", "image.tag=v1.25.1"},
			`image.tag: "v1.25.1" is a tag of NTH's image`},
		{[]string{"--set", "image.repository=123456789012.dkr.ecr.eu-west-1.amazonaws.com/mirror/aws-node-termination-handler"},
			"looks like NTH's image"},
		// NTH's numbering with Lifeboat's image: a tag that does not exist.
		{[]string{"--set", "image.tag=v1.22.0"}, `image.tag: "v1.22.0" is a release of NTH (v1.x.y)`},
		{[]string{"--set", "image.tag=v1.25.1-linux-amd64"}, `image.tag: "v1.25.1-linux-amd64" is a release of NTH`},
	} {
		_, err := h.run(append([]string{"template", "lifeboat", chartDir}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error saying %q", tc.args, err, tc.want)
		}
	}
}
