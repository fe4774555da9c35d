// SPDX-License-Identifier: Apache-2.0

package deploy_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/test/nth"
)

// nthSwitch is one way an NTH release is written, rendered by NTH's chart and by Lifeboat's
// with the same release name and values.
type nthSwitch struct {
	name, release string
	values        string   // a values file (testdata/nth/<values>), or empty
	args          []string // --set lines, as a shell script passes them
	// credential is the workload that needs AWS credentials: "controller" in queue mode, else
	// "agent"; it must run as NTH's ServiceAccount.
	credential string
	// refused: Lifeboat's chart refuses the values, saying this, until fix (--set lines, given
	// to both charts) settles what was silent.
	refused string
	fix     []string
}

var nthSwitches = []nthSwitch{
	{name: "Terraform helm_release", release: "aws-node-termination-handler", values: "terraform.yaml", credential: "controller",
		refused: "checkASGTagBeforeDraining: false had no effect in NTH", fix: []string{"--set", "checkASGTagBeforeDraining=true"}},
	{name: "Flux HelmRelease", release: "kube-system-aws-node-termination-handler", values: "flux.yaml", credential: "agent"},
	{name: "Argo CD Application", release: "node-termination", values: "argocd.yaml", credential: "agent"},
	{name: "shell --set", release: "nth", credential: "controller", args: []string{
		"--set", "enableSqsTerminationDraining=true",
		"--set", "queueURL=https://sqs.us-east-1.amazonaws.com/123456789012/nth",
		"--set", "awsRegion=us-east-1",
		"--set", `serviceAccount.annotations.eks\.amazonaws\.com/role-arn=arn:aws:iam::123456789012:role/nth`,
		"--set", "checkASGTagBeforeDraining=false",
		"--set", "enablePrometheusServer=true",
		"--set", "serviceMonitor.create=true",
	}, refused: "checkASGTagBeforeDraining: false had no effect in NTH", fix: []string{"--set", "checkTagBeforeDraining=false"}},
	{name: "queue mode", release: "nth-queue", values: "queue.yaml", credential: "controller"},
	{name: "IMDS mode", release: "spot-handler", values: "imds.yaml", credential: "agent"},
	{name: "serviceAccount.name", release: "nth", values: "serviceaccount-name.yaml", credential: "controller"},
	{name: "fullnameOverride", release: "infra", values: "fullname-override.yaml", credential: "agent"},
	{name: "nameOverride", release: "handler", values: "name-override.yaml", credential: "agent",
		refused: "enableASGLifecycleDraining: left out, NTH drains on the Auto Scaling target lifecycle state", fix: []string{"--set", "enableASGLifecycleDraining=true"}},
}

// TestNTHReleaseSwitches renders NTH's chart (its pinned module) and Lifeboat's with the same
// release names and values, as Terraform, Flux, Argo CD and a shell script pass them, and holds
// Lifeboat's release to what NTH's gave: the workload that needs AWS credentials runs as the
// ServiceAccount NTH's did (with the same annotations, so IRSA and Pod Identity still match) and
// the other workload under another name; the monitors NTH renders are rendered, for the same
// namespace, labels, interval and sample limit; and every setting NTH's container sets has the
// same value in Lifeboat's, but for the deliberate differences the settings table documents.
func TestNTHReleaseSwitches(t *testing.T) {
	h := newHelm(t)
	nthChart := nth.ChartDir(t)
	settings := map[string]*config.Setting{}
	for _, s := range config.Settings() {
		settings[s.Env] = s
		for _, a := range s.Aliases {
			settings[a] = s
		}
	}
	for _, sw := range nthSwitches {
		t.Run(sw.name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{}, sw.args...)
			if sw.values != "" {
				args = append(args, "--values", filepath.Join("testdata", "nth", sw.values))
			}
			if sw.refused != "" {
				_, err := h.run(append([]string{"template", sw.release, chartDir, "--namespace", "kube-system"}, args...)...)
				if err == nil || !strings.Contains(err.Error(), sw.refused) {
					t.Fatalf("Lifeboat's chart: %v, want a refusal saying %q", err, sw.refused)
				}
				args = append(args, sw.fix...)
			}
			render := func(chart string) []map[string]any {
				out, err := h.run(append([]string{"template", sw.release, chart, "--namespace", "kube-system"}, args...)...)
				if err != nil {
					t.Fatal(err)
				}
				return decodeMaps(t, out)
			}
			theirs, ours := render(nthChart), render(chartDir)

			// Identity.
			nthPods := podSpecsOf(t, theirs)
			if len(nthPods) != 1 {
				t.Fatalf("NTH's chart rendered %d workloads, want 1", len(nthPods))
			}
			var nthPod corev1.PodSpec
			for _, p := range nthPods {
				nthPod = p
			}
			ourPods := podSpecsOf(t, ours)
			cred, ok := ourPods[sw.credential]
			if !ok {
				t.Fatalf("Lifeboat rendered no %s (have %v)", sw.credential, keysOf(ourPods))
			}
			if cred.ServiceAccountName != nthPod.ServiceAccountName {
				t.Errorf("%s runs as ServiceAccount %q, NTH's release ran as %q", sw.credential, cred.ServiceAccountName, nthPod.ServiceAccountName)
			}
			for component, p := range ourPods {
				if component != sw.credential && p.ServiceAccountName == cred.ServiceAccountName {
					t.Errorf("%s shares ServiceAccount %q with the %s", component, p.ServiceAccountName, sw.credential)
				}
			}
			nthSA, ourSA := objectNamed(theirs, "ServiceAccount", nthPod.ServiceAccountName), objectNamed(ours, "ServiceAccount", cred.ServiceAccountName)
			if (nthSA == nil) != (ourSA == nil) {
				t.Errorf("ServiceAccount %s: NTH's chart creates it: %v, Lifeboat's: %v", nthPod.ServiceAccountName, nthSA != nil, ourSA != nil)
			} else if nthSA != nil && asJSON(lookupOr(nthSA, "metadata.annotations")) != asJSON(lookupOr(ourSA, "metadata.annotations")) {
				t.Errorf("ServiceAccount %s annotations %s, NTH's %s", cred.ServiceAccountName, asJSON(lookupOr(ourSA, "metadata.annotations")), asJSON(lookupOr(nthSA, "metadata.annotations")))
			}

			// Monitors.
			for _, kind := range []string{"PodMonitor", "ServiceMonitor"} {
				n, o := objectsOfKind(theirs, kind), objectsOfKind(ours, kind)
				if len(n) != len(o) {
					t.Errorf("NTH's chart renders %d %s, Lifeboat's %d", len(n), kind, len(o))
					continue
				}
				if len(n) == 0 {
					continue
				}
				endpoints := map[string]string{"PodMonitor": "spec.podMetricsEndpoints", "ServiceMonitor": "spec.endpoints"}[kind]
				for _, path := range []string{"metadata.namespace", "spec.jobLabel", "spec.sampleLimit", "spec.namespaceSelector"} {
					if a, b := asJSON(lookupOr(n[0], path)), asJSON(lookupOr(o[0], path)); a != b {
						t.Errorf("%s %s = %s, NTH's %s", kind, path, b, a)
					}
				}
				ne, _ := lookupOr(n[0], endpoints).([]any)
				oe, _ := lookupOr(o[0], endpoints).([]any)
				if len(ne) != 1 || len(oe) != 1 {
					t.Errorf("%s endpoints %s, NTH's %s", kind, asJSON(oe), asJSON(ne))
				} else {
					for _, f := range []string{"interval", "path"} {
						if a, b := asJSON(ne[0].(map[string]any)[f]), asJSON(oe[0].(map[string]any)[f]); a != b {
							t.Errorf("%s endpoint %s = %s, NTH's %s", kind, f, b, a)
						}
					}
				}
				ourLabels, _ := lookupOr(o[0], "metadata.labels").(map[string]any)
				for k, v := range lookupOr(n[0], "metadata.labels").(map[string]any) {
					if strings.HasPrefix(k, "app.kubernetes.io/") || k == "helm.sh/chart" {
						continue // the chart's own labels
					}
					if ourLabels[k] != v {
						t.Errorf("%s label %s = %v, NTH's %v", kind, k, ourLabels[k], v)
					}
				}
				// It selects the workload whose metrics it scrapes.
				component := map[string]string{"PodMonitor": "agent", "ServiceMonitor": "controller"}[kind]
				if kind == "ServiceMonitor" {
					if svc := objectNamed(ours, "Service", fmt.Sprint(lookupOr(o[0], "metadata.name"))+"-metrics"); svc == nil {
						t.Errorf("no metrics Service for the ServiceMonitor")
					}
				} else {
					sel, _ := lookupOr(o[0], "spec.selector.matchLabels").(map[string]any)
					var pods map[string]any
					for _, w := range objectsOfKind(ours, "DaemonSet") {
						pods, _ = lookupOr(w, "spec.template.metadata.labels").(map[string]any)
					}
					for k, v := range sel {
						if pods[k] != v {
							t.Errorf("PodMonitor selects %v, not the %s's pods %v", sel, component, pods)
							break
						}
					}
				}
			}

			// Environment: every setting NTH's container sets, Lifeboat's container has.
			nthEnv := envOf(t, container0(t, nthPod))
			ourEnv := envOf(t, container(t, cred))
			for name, ne := range nthEnv {
				s := settings[name]
				if s != nil && s.Env != name {
					if _, both := nthEnv[s.Env]; both {
						continue // NTH's chart passes a deprecated variable beside its replacement, which NTH takes
					}
				}
				if s == nil {
					if _, ok := ourEnv[name]; !ok && name != "ENABLE_SQS_TERMINATION_DRAINING" {
						t.Errorf("NTH's container sets %s, which Lifeboat neither knows nor sets", name)
					}
					continue
				}
				oe, set := ourEnv[s.Env]
				if ne.ValueFrom != nil {
					if !set || asJSON(oe.ValueFrom) != asJSON(ne.ValueFrom) {
						t.Errorf("%s: NTH's container takes it from %s, Lifeboat's %+v", name, asJSON(ne.ValueFrom), oe)
					}
					continue
				}
				ours := s.Default
				if name == "UPTIME_FROM_FILE" {
					ours = "/proc/uptime" // what the agent reads when the setting is empty
				}
				if set {
					ours = oe.Value
				}
				theirs := ne.Value
				if theirs == "" {
					continue // unset: each binary's own default, compared by the settings table's test
				}
				if sameSetting(theirs, ours) {
					continue
				}
				if s.NTHDefault != "" && sameSetting(theirs, s.NTHDefault) {
					continue // left at NTH's default where Lifeboat deliberately differs (docs list why)
				}
				t.Errorf("%s: NTH's release runs with %q, Lifeboat's with %q", name, theirs, ours)
			}
		})
	}
}

// sameSetting compares two values of a setting as the binary reads them: booleans by meaning.
func sameSetting(a, b string) bool {
	if a == b {
		return true
	}
	x, errA := strconv.ParseBool(a)
	y, errB := strconv.ParseBool(b)
	return errA == nil && errB == nil && x == y
}

// decodeMaps decodes every object of a rendered chart as a map (NTH's chart renders kinds
// outside the client's scheme).
func decodeMaps(t testing.TB, stream string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, doc := range strings.Split(stream, "\n---") {
		var o map[string]any
		if err := yaml.Unmarshal(stripComments([]byte(doc)), &o); err != nil {
			t.Fatalf("%v in\n%s", err, doc)
		}
		if o != nil {
			out = append(out, o)
		}
	}
	return out
}

func objectsOfKind(objs []map[string]any, kind string) []map[string]any {
	var out []map[string]any
	for _, o := range objs {
		if o["kind"] == kind {
			out = append(out, o)
		}
	}
	return out
}

func objectNamed(objs []map[string]any, kind, name string) map[string]any {
	for _, o := range objectsOfKind(objs, kind) {
		if lookupOr(o, "metadata.name") == name {
			return o
		}
	}
	return nil
}

// podSpecsOf is the pod spec of each DaemonSet and Deployment, keyed by its component (the
// suffix of Lifeboat's names), or its kind (NTH's).
func podSpecsOf(t testing.TB, objs []map[string]any) map[string]corev1.PodSpec {
	t.Helper()
	out := map[string]corev1.PodSpec{}
	for _, o := range objs {
		if o["kind"] != "DaemonSet" && o["kind"] != "Deployment" {
			continue
		}
		var spec corev1.PodSpec
		b, _ := json.Marshal(lookupOr(o, "spec.template.spec"))
		if err := json.Unmarshal(b, &spec); err != nil {
			t.Fatal(err)
		}
		key := fmt.Sprint(o["kind"])
		for _, c := range []string{"agent", "controller"} {
			if strings.HasSuffix(fmt.Sprint(lookupOr(o, "metadata.name")), "-"+c) {
				key = c
			}
		}
		out[key] = spec
	}
	return out
}

// container0 is the first container of a pod spec (NTH's has one).
func container0(t testing.TB, spec corev1.PodSpec) corev1.Container {
	t.Helper()
	if len(spec.Containers) == 0 {
		t.Fatal("pod template has no container")
	}
	return spec.Containers[0]
}

// TestNTHSwitchValuesAreNTHs: the values files of TestNTHReleaseSwitches hold only keys NTH's
// chart (current or older) has, so they are what an NTH user has, not Lifeboat's values.
func TestNTHSwitchValuesAreNTHs(t *testing.T) {
	table := nthTable(t)
	for _, sw := range nthSwitches {
		if sw.values == "" {
			continue
		}
		var values map[string]any
		readYAML(t, filepath.Join("testdata", "nth", sw.values), &values)
		var walk func(prefix string, m map[string]any)
		walk = func(prefix string, m map[string]any) {
			for k, v := range m {
				path := prefix + k
				if _, ok := table[path]; ok {
					continue
				}
				if sub, ok := v.(map[string]any); ok {
					walk(path+".", sub)
					continue
				}
				t.Errorf("testdata/nth/%s: %s is not a value of NTH's chart", sw.values, path)
			}
		}
		walk("", values)
	}
	if _, err := os.Stat(filepath.Join("testdata", "nth")); err != nil {
		t.Fatal(err)
	}
}

// TestEnvNamesAreUnique renders the chart in many shapes (each workload alone and both, host
// network on and off, settings from config, a Secret and extraEnv, and every NTH release of
// TestNTHReleaseSwitches) and fails when any container of any workload names a variable twice,
// which server-side apply refuses. A name in extraEnv replaces the chart's variable of that name.
func TestEnvNamesAreUnique(t *testing.T) {
	h := newHelm(t)
	overrides := `[{"name":"TAINT_EFFECT","value":"NoExecute"},{"name":"NODE_NAME","value":"pinned"},` +
		`{"name":"WEBHOOK_URL","valueFrom":{"secretKeyRef":{"name":"mine","key":"url"}}},` +
		`{"name":"PROBES_SERVER_BIND_ADDRESS","value":"0.0.0.0"},{"name":"AWS_STS_REGIONAL_ENDPOINTS","value":"regional"}]`
	shapes := [][]string{
		nil,
		{"--set", "controller.enabled=true"},
		{"--set", "controller.enabled=true", "--set", "agent.enabled=false", "--set", "controller.hostNetwork=true"},
		{"--set", "controller.enabled=true", "--set", "config.taintEffect=NoSchedule", "--set", "config.enablePrometheusServer=true",
			"--set", "configFromSecret.webhookUrl.name=hook", "--set", "configFromSecret.webhookUrl.key=url",
			"--set-json", "agent.extraEnv=" + overrides, "--set-json", "controller.extraEnv=" + overrides,
			"--set", "config.probesServerBindAddress=127.0.0.2"},
		{"--set", "agent.hostNetwork=false", "--set-json", "agent.extraEnv=" + overrides},
	}
	for _, sw := range nthSwitches {
		args := append(append([]string{}, sw.args...), sw.fix...)
		if sw.values != "" {
			args = append(args, "--values", filepath.Join("testdata", "nth", sw.values))
		}
		shapes = append(shapes, args)
	}
	for i, args := range shapes {
		out, err := h.run(append([]string{"template", "lifeboat", chartDir, "--namespace", "kube-system"}, args...)...)
		if err != nil {
			t.Fatalf("shape %d: %v", i, err)
		}
		for component, spec := range podSpecsOf(t, decodeMaps(t, out)) {
			for _, c := range append(spec.InitContainers, spec.Containers...) {
				env := envOf(t, c) // fails on a name given twice
				if len(env) == 0 {
					t.Errorf("shape %d %s: container %s has no environment", i, component, c.Name)
				}
				if i == 3 || i == 4 {
					for name, want := range map[string]string{"TAINT_EFFECT": "NoExecute", "NODE_NAME": "pinned", "PROBES_SERVER_BIND_ADDRESS": "0.0.0.0"} {
						if got := env[name]; got.Value != want || got.ValueFrom != nil {
							t.Errorf("shape %d %s: %s = %+v, want extraEnv's %q", i, component, name, got, want)
						}
					}
					if got := env["WEBHOOK_URL"].ValueFrom; got == nil || got.SecretKeyRef == nil || got.SecretKeyRef.Name != "mine" {
						t.Errorf("shape %d %s: WEBHOOK_URL = %+v, want extraEnv's Secret", i, component, env["WEBHOOK_URL"])
					}
				}
			}
		}
	}
	_, err := h.run("template", "lifeboat", chartDir, "--set-json", `agent.extraEnv=[{"name":"A","value":"1"},{"name":"A","value":"2"}]`)
	if err == nil || !strings.Contains(err.Error(), "agent.extraEnv names A twice") {
		t.Errorf("extraEnv naming a variable twice: %v, want a refusal naming it", err)
	}
}
