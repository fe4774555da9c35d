// SPDX-License-Identifier: Apache-2.0

package deploy_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"sigs.k8s.io/yaml"
)

// prometheusRule is the part of a PrometheusRule the tests read.
type prometheusRule struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace"`
		Labels    map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Alert       string            `json:"alert"`
				Expr        string            `json:"expr"`
				For         string            `json:"for"`
				Labels      map[string]string `json:"labels"`
				Annotations map[string]string `json:"annotations"`
			} `json:"rules"`
		} `json:"groups"`
	} `json:"spec"`
}

// renderRule renders only the chart's PrometheusRule, with the given --set arguments.
func renderRule(t *testing.T, h helm, args ...string) prometheusRule {
	t.Helper()
	out, err := h.run(append([]string{"template", "lifeboat", chartDir, "--namespace", "kube-system",
		"--api-versions", "monitoring.coreos.com/v1/PrometheusRule", "--show-only", "templates/prometheusrule.yaml"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	var r prometheusRule
	if err := yaml.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("the PrometheusRule is not YAML: %v\n%s", err, out)
	}
	return r
}

// TestPrometheusRule: prometheusRule.enabled renders a PrometheusRule whose alerts cover what
// an operator must hear of (a drain cut by its deadline, pods held at the deadline, lifecycle
// completions failing, queue receives failing, a recovered panic, no leader); every expression parses as PromQL
// and selects only metrics and labels Lifeboat registers; every alert has a severity, the
// chart's extra labels, a summary and a description; `for` durations parse. Off by default,
// and rendered offline when asked for.
func TestPrometheusRule(t *testing.T) {
	h := newHelm(t)
	r := renderRule(t, h, "--set", "prometheusRule.enabled=true", "--set", "prometheusRule.noLeaderFor=7m",
		"--set", "config.enablePrometheusServer=true", "--set", "controller.enabled=true", "--set", "agent.enabled=true",
		"--set", "prometheusRule.namespace=monitoring", "--set", "prometheusRule.labels.release=kube-prometheus-stack",
		"--set", "prometheusRule.ruleLabels.team=platform")
	if r.APIVersion != "monitoring.coreos.com/v1" || r.Kind != "PrometheusRule" {
		t.Fatalf("rendered %s %s, want monitoring.coreos.com/v1 PrometheusRule", r.APIVersion, r.Kind)
	}
	if r.Metadata.Namespace != "monitoring" || r.Metadata.Labels["release"] != "kube-prometheus-stack" || r.Metadata.Labels["app.kubernetes.io/name"] != "lifeboat" {
		t.Errorf("metadata %+v: want namespace monitoring, the chart's labels and release=kube-prometheus-stack", r.Metadata)
	}
	known := registeredSeries(t)
	for name, s := range seriesFromElsewhere {
		known[name] = s
	}
	var alerts []string
	for _, g := range r.Spec.Groups {
		for _, rule := range g.Rules {
			alerts = append(alerts, rule.Alert)
			for _, problem := range checkQuery(rule.Expr, known) {
				t.Errorf("%s: %s: %s", rule.Alert, problem, rule.Expr)
			}
			if rule.For != "" {
				if _, err := model.ParseDuration(rule.For); err != nil {
					t.Errorf("%s: for %q: %v", rule.Alert, rule.For, err)
				}
			}
			if !slices.Contains([]string{"critical", "warning", "info"}, rule.Labels["severity"]) || rule.Labels["team"] != "platform" {
				t.Errorf("%s: labels %v, want a severity and team=platform", rule.Alert, rule.Labels)
			}
			if rule.Annotations["summary"] == "" || rule.Annotations["description"] == "" {
				t.Errorf("%s: annotations %v, want a summary and a description", rule.Alert, rule.Annotations)
			}
			if rule.Alert == "LifeboatNoLeader" && rule.For != "7m" {
				t.Errorf("LifeboatNoLeader fires after %q, want prometheusRule.noLeaderFor (7m)", rule.For)
			}
		}
	}
	for _, want := range []string{"LifeboatDrainCutByDeadline", "LifeboatDrainPastDeadlineMargin", "LifeboatPodsHeldAtDeadline", "LifeboatLifecycleCompletionFailing",
		"LifeboatLifecycleCompletionLost", "LifeboatQueueReceiveFailing", "LifeboatPanicRecovered", "LifeboatNoLeader", "LifeboatSourceUnhealthy",
		"LifeboatControllerDown", "LifeboatAgentDown", "LifeboatAgentsAbsent", "LifeboatAgentsUnavailable", "LifeboatEventsRefused"} {
		if !slices.Contains(alerts, want) {
			t.Errorf("no alert %s (alerts: %v)", want, alerts)
		}
	}

	out, err := h.run("template", "lifeboat", chartDir, "--namespace", "kube-system")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "kind: PrometheusRule") {
		t.Error("a PrometheusRule is rendered by default; it must be asked for")
	}
	// Offline (helm template without --api-versions), as the ServiceMonitor: rendered
	// (TestNTHValuesFilesInstall: an install into a cluster without the kind is refused).
	out, err = h.run("template", "lifeboat", chartDir, "--namespace", "kube-system", "--set", "prometheusRule.enabled=true",
		"--set", "config.enablePrometheusServer=true")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "kind: PrometheusRule") {
		t.Error("no PrometheusRule rendered offline")
	}
}

// seriesFromElsewhere are the series alerts may select besides Lifeboat's: the scrape's up,
// to see a Lifeboat that serves nothing, and kube-state-metrics' DaemonSet status, to see
// nodes with no agent pod at all.
var seriesFromElsewhere = map[string]series{
	"up": {labels: targetLabels},
	"kube_daemonset_status_desired_number_scheduled": {labels: []string{"namespace", "daemonset"}},
	"kube_daemonset_status_number_ready":             {labels: []string{"namespace", "daemonset"}},
}

// TestRulesAndDashboardNeedMetrics: the PrometheusRule and the dashboard refuse to render
// while the metrics server is off, naming their key and the metrics server's.
func TestRulesAndDashboardNeedMetrics(t *testing.T) {
	h := newHelm(t)
	for _, key := range []string{"prometheusRule.enabled", "dashboard.enabled"} {
		_, err := h.run("template", "lifeboat", chartDir, "--namespace", "kube-system", "--set", key+"=true",
			"--api-versions", "monitoring.coreos.com/v1/PrometheusRule")
		if err == nil || !strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), "config.enablePrometheusServer") {
			t.Errorf("%s with the metrics server off: err %v, want a failure naming %s and config.enablePrometheusServer", key, err, key)
		}
		if _, err := h.run("template", "lifeboat", chartDir, "--namespace", "kube-system", "--set", key+"=true",
			"--set", "agent.config.enablePrometheusServer=true"); err != nil {
			t.Errorf("%s with the agents' metrics server on: %v", key, err)
		}
	}
}
