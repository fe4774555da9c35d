// SPDX-License-Identifier: Apache-2.0

package deploy_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	corev1 "k8s.io/api/core/v1"
)

// dashboard is the part of Grafana's dashboard JSON the tests read.
type dashboard struct {
	Title      string `json:"title"`
	UID        string `json:"uid"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		Title       string `json:"title"`
		Type        string `json:"type"`
		FieldConfig struct {
			Defaults struct {
				Unit string `json:"unit"`
			} `json:"defaults"`
			Overrides []struct {
				Properties []struct {
					ID string `json:"id"`
				} `json:"properties"`
			} `json:"overrides"`
		} `json:"fieldConfig"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

func readDashboard(t *testing.T, raw []byte) dashboard {
	t.Helper()
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("the dashboard is not valid JSON: %v", err)
	}
	if d.UID == "" || len(d.Panels) == 0 {
		t.Fatalf("the dashboard has no uid or no panels: %+v", d)
	}
	return d
}

func chartDashboard(t *testing.T) dashboard {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(chartDir, "dashboards", "lifeboat.json"))
	if err != nil {
		t.Fatal(err)
	}
	return readDashboard(t, raw)
}

// grafanaVariable is a reference to a dashboard variable in a query ($job, ${job}).
var grafanaVariable = regexp.MustCompile(`\$\{?(\w+)\}?`)

// asPromQL turns a panel's query into PromQL as Grafana would send it: its interval variables
// become a duration, and every other variable VAR_<name>, so that the matchers that use them
// can be found.
func asPromQL(expr string) string {
	return grafanaVariable.ReplaceAllStringFunc(expr, func(v string) string {
		name := grafanaVariable.FindStringSubmatch(v)[1]
		if strings.HasPrefix(name, "__") { // $__rate_interval, $__interval, $__range
			return "5m"
		}
		return "VAR_" + name
	})
}

// TestDashboardQueriesLifeboatsMetrics: every panel's query parses as PromQL and selects only
// metrics (and labels) Lifeboat registers, so a renamed metric cannot leave a panel silently
// empty; each selects by the cluster and job variables; each panel has one unit for all its
// series; and the panels answer the questions the dashboard is for.
func TestDashboardQueriesLifeboatsMetrics(t *testing.T) {
	d := chartDashboard(t)
	known := registeredSeries(t)
	var queried []string
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		if p.FieldConfig.Defaults.Unit == "" {
			t.Errorf("panel %q has no unit", p.Title)
		}
		for _, o := range p.FieldConfig.Overrides {
			for _, prop := range o.Properties {
				if prop.ID == "unit" {
					t.Errorf("panel %q gives some series another unit: one unit per panel", p.Title)
				}
			}
		}
		for _, target := range p.Targets {
			expr := asPromQL(target.Expr)
			for _, problem := range checkQuery(expr, known) {
				t.Errorf("panel %q: %s: %s", p.Title, problem, target.Expr)
			}
			sels, _ := selectors(expr)
			for _, s := range sels {
				queried = append(queried, s.name)
				for _, v := range []string{"cluster", "job"} {
					if !slices.ContainsFunc(s.matchers, func(m *labels.Matcher) bool {
						return m.Name == v && m.Type == labels.MatchRegexp && m.Value == "VAR_"+v
					}) {
						t.Errorf("panel %q: %s is not selected by %s=~\"$%s\": %s", p.Title, s.name, v, v, target.Expr)
					}
				}
			}
		}
	}
	// The questions the dashboard is for.
	for _, want := range []string{"lifeboat_notices_total", "lifeboat_queue_messages_total", "lifeboat_drain_duration_seconds_bucket",
		"lifeboat_drain_deadline_used_ratio_bucket", "lifeboat_drain_blocked_pods", "lifeboat_actions_total", "lifeboat_evictions_total",
		"lifeboat_handback_wait_seconds_bucket", "lifeboat_readiness_findings", "lifeboat_kube_requests_throttled_total", "lifeboat_leader"} {
		if !slices.Contains(queried, want) {
			t.Errorf("no panel queries %s", want)
		}
	}
}

// TestDashboardVariables: the dashboard has cluster and job variables, and each query variable
// asks for the label values of a Lifeboat metric every process serves from its start, so the
// variables list every Lifeboat before its first notice.
func TestDashboardVariables(t *testing.T) {
	d := chartDashboard(t)
	fromStart := presentFromStart(t)
	labelValues := regexp.MustCompile(`^label_values\((.+),\s*(\w+)\)$`)
	var names []string
	for _, v := range d.Templating.List {
		names = append(names, v.Name)
		if v.Type != "query" {
			continue
		}
		q, ok := v.Query.(string)
		m := labelValues.FindStringSubmatch(q)
		if !ok || m == nil {
			t.Errorf("variable %s: query %v is not label_values(<selector>, <label>)", v.Name, v.Query)
			continue
		}
		if m[2] != v.Name {
			t.Errorf("variable %s lists the values of label %s", v.Name, m[2])
		}
		sels, err := selectors(asPromQL(m[1]))
		if err != nil || len(sels) != 1 {
			t.Errorf("variable %s: %q is not one series selector (%v)", v.Name, m[1], err)
			continue
		}
		if name := sels[0].name; !strings.HasPrefix(name, "lifeboat_") || !slices.Contains(fromStart, name) {
			t.Errorf("variable %s reads %s, which a Lifeboat process does not serve from its start (those: %v)", v.Name, name, fromStart)
		}
	}
	for _, want := range []string{"datasource", "cluster", "job"} {
		if !slices.Contains(names, want) {
			t.Errorf("no %s variable (variables: %v)", want, names)
		}
	}
}

// TestDashboardConfigMap: with dashboard.enabled the chart renders the dashboard as a
// ConfigMap with the sidecar's label and the JSON as it is in the chart.
func TestDashboardConfigMap(t *testing.T) {
	h := newHelm(t)
	cm := only[*corev1.ConfigMap](t, h.template(t, "--set", "dashboard.enabled=true", "--set", "config.enablePrometheusServer=true"))
	if cm.Labels["grafana_dashboard"] != "1" {
		t.Errorf("labels %v, want the sidecar's grafana_dashboard=1", cm.Labels)
	}
	raw, err := os.ReadFile(filepath.Join(chartDir, "dashboards", "lifeboat.json"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(cm.Data["lifeboat.json"]) != strings.TrimSpace(string(raw)) {
		t.Error("the ConfigMap's lifeboat.json differs from dashboards/lifeboat.json")
	}
	readDashboard(t, []byte(cm.Data["lifeboat.json"]))
	if objs := objectsOf[*corev1.ConfigMap](h.template(t)); len(objs) != 0 {
		t.Errorf("the dashboard is rendered by default; it must be asked for")
	}
}
