package deploy_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/metrics"
)

// dashboard is the part of Grafana's dashboard JSON the tests read.
type dashboard struct {
	Title  string `json:"title"`
	UID    string `json:"uid"`
	Panels []struct {
		Title   string `json:"title"`
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

// registered lists the metric names Lifeboat's registry serves, with a histogram's series.
func registered() map[string]bool {
	descs := make(chan *prometheus.Desc)
	go func() { metrics.New().Registry.Describe(descs); close(descs) }()
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	names := map[string]bool{}
	for d := range descs {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			for _, suffix := range []string{"", "_bucket", "_sum", "_count"} {
				names[m[1]+suffix] = true
			}
		}
	}
	return names
}

// TestDashboardQueriesLifeboatsMetrics: every metric a panel queries is one Lifeboat
// registers, so a renamed metric cannot leave a panel silently empty; and every panel queries
// something.
func TestDashboardQueriesLifeboatsMetrics(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(chartDir, "dashboards", "lifeboat.json"))
	if err != nil {
		t.Fatal(err)
	}
	d := readDashboard(t, raw)
	known := registered()
	metricName := regexp.MustCompile(`\blifeboat_[a-z_]+\b`)
	var queried []string
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, target := range p.Targets {
			names := metricName.FindAllString(target.Expr, -1)
			if len(names) == 0 {
				t.Errorf("panel %q queries no Lifeboat metric: %s", p.Title, target.Expr)
			}
			for _, n := range names {
				if !known[n] {
					t.Errorf("panel %q queries %s, which Lifeboat does not register", p.Title, n)
				}
				queried = append(queried, n)
			}
		}
	}
	// The questions the dashboard is for.
	for _, want := range []string{"lifeboat_notices_total", "lifeboat_drain_duration_seconds_bucket", "lifeboat_drain_blocked_pods",
		"lifeboat_actions_total", "lifeboat_handback_wait_seconds_bucket"} {
		if !slices.Contains(queried, want) {
			t.Errorf("no panel queries %s", want)
		}
	}
}

// TestDashboardConfigMap: with dashboard.enabled the chart renders the dashboard as a
// ConfigMap with the sidecar's label and the JSON as it is in the chart.
func TestDashboardConfigMap(t *testing.T) {
	h := newHelm(t)
	cm := only[*corev1.ConfigMap](t, h.template(t, "--set", "dashboard.enabled=true"))
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
