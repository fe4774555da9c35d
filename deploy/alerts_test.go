// SPDX-License-Identifier: Apache-2.0

package deploy_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/rules"
	"sigs.k8s.io/yaml"
)

// alertTests is the rule unit-test file, in promtool's format (`promtool test rules`), over
// the chart's PrometheusRule rendered with every alert on.
const alertTests = "testdata/alerts.test.yaml"

// ruleTestFile is the part of promtool's rule-test format the runner reads.
type ruleTestFile struct {
	RuleFiles          []string       `json:"rule_files"` // promtool's; here the chart is rendered
	EvaluationInterval model.Duration `json:"evaluation_interval"`
	Tests              []ruleTest     `json:"tests"`
}

type ruleTest struct {
	Name        string         `json:"name"`
	Interval    model.Duration `json:"interval"`
	InputSeries []struct {
		Series string `json:"series"`
		Values string `json:"values"`
	} `json:"input_series"`
	AlertRuleTest []struct {
		EvalTime  model.Duration `json:"eval_time"`
		Alertname string         `json:"alertname"`
		ExpAlerts []struct {
			ExpLabels map[string]string `json:"exp_labels"`
		} `json:"exp_alerts"`
	} `json:"alert_rule_test"`
}

// TestAlertRules runs the rule unit tests with Prometheus's own rule evaluation (the rules
// and promqltest packages promtool's `test rules` is built on): each alert fires on the
// series that must page and stays silent on those that must not, its `for` included. Every
// alert of the chart has a test.
func TestAlertRules(t *testing.T) {
	runRuleFile(t, alertTests, chartAlerts(t), true)
}

// centralAlertTests are rule tests with several clusters' series side by side, as a central
// ruler sees them, over the chart rendered for cluster "b".
const centralAlertTests = "testdata/alerts-central.test.yaml"

// TestAlertRulesCentral: with prometheusRule.cluster, the absence alerts match this cluster's
// targets alone and carry its label: another cluster's healthy targets hide nothing.
func TestAlertRulesCentral(t *testing.T) {
	runRuleFile(t, centralAlertTests, chartAlerts(t, "--set", "prometheusRule.cluster=b"), false)
}

// runRuleFile runs a rule test file; with all, every alert must have a test in it.
func runRuleFile(t *testing.T, file string, alerting []*rules.AlertingRule, all bool) {
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var f ruleTestFile
	if err := yaml.UnmarshalStrict(raw, &f); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	tested := map[string]bool{}
	for _, tc := range f.Tests {
		for _, a := range tc.AlertRuleTest {
			tested[a.Alertname] = true
		}
		t.Run(tc.Name, func(t *testing.T) { runRuleTest(t, tc, time.Duration(f.EvaluationInterval), alerting) })
	}
	for _, r := range alerting {
		if all && !tested[r.Name()] {
			t.Errorf("%s has no test in %s", r.Name(), file)
		}
	}
}

// chartAlerts renders the chart's PrometheusRule with the controller, the agents and every
// alert on, as Prometheus's alerting rules.
func chartAlerts(t *testing.T, sets ...string) []*rules.AlertingRule {
	t.Helper()
	r := renderRule(t, newHelm(t), append([]string{"--set", "prometheusRule.enabled=true", "--set", "config.enablePrometheusServer=true",
		"--set", "controller.enabled=true", "--set", "agent.enabled=true"}, sets...)...)
	var out []*rules.AlertingRule
	for _, g := range r.Spec.Groups {
		for _, rule := range g.Rules {
			expr, err := promql.ParseExpr(rule.Expr)
			if err != nil {
				t.Fatalf("%s: %v", rule.Alert, err)
			}
			var hold model.Duration
			if rule.For != "" {
				if hold, err = model.ParseDuration(rule.For); err != nil {
					t.Fatalf("%s: for: %v", rule.Alert, err)
				}
			}
			out = append(out, rules.NewAlertingRule(rule.Alert, expr, time.Duration(hold), 0,
				labels.FromMap(rule.Labels), labels.FromMap(rule.Annotations), labels.EmptyLabels(), "", true,
				slog.New(slog.DiscardHandler)))
		}
	}
	return out
}

// runRuleTest loads a test's series and evaluates every rule at each evaluation interval,
// as promtool does, checking the firing alerts at each eval_time.
func runRuleTest(t *testing.T, tc ruleTest, every time.Duration, alerting []*rules.AlertingRule) {
	load := fmt.Sprintf("load %s\n", tc.Interval)
	for _, s := range tc.InputSeries {
		load += fmt.Sprintf("  %s %s\n", s.Series, s.Values)
	}
	ll, err := promqltest.NewLazyLoader(load, promqltest.LazyLoaderOpts{EnableAtModifier: true, EnableNegativeOffset: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ll.Close()
	// Each rule keeps its pending alerts between evaluations: the test's own copies.
	fresh := make([]*rules.AlertingRule, len(alerting))
	for i, r := range alerting {
		fresh[i] = rules.NewAlertingRule(r.Name(), r.Query(), r.HoldDuration(), 0, r.Labels(), r.Annotations(),
			labels.EmptyLabels(), "", true, slog.New(slog.DiscardHandler))
	}
	query := rules.EngineQueryFunc(ll.QueryEngine(), ll.Storage())
	var end time.Duration
	for _, a := range tc.AlertRuleTest {
		end = max(end, time.Duration(a.EvalTime))
	}
	for at := time.Duration(0); at <= end; at += every {
		ts := time.Unix(0, 0).UTC().Add(at)
		ll.WithSamplesTill(ts, func(err error) {
			if err != nil {
				t.Fatal(err)
			}
		})
		for _, r := range fresh {
			if _, err := r.Eval(context.Background(), 0, ts, query, nil, 0); err != nil {
				t.Fatalf("%s at %s: %v", r.Name(), at, err)
			}
		}
		for _, a := range tc.AlertRuleTest {
			if time.Duration(a.EvalTime) == at {
				var want []string
				for _, e := range a.ExpAlerts {
					want = append(want, labels.FromMap(withName(e.ExpLabels, a.Alertname)).String())
				}
				checkFiring(t, fresh, a.Alertname, at, want)
			}
		}
	}
}

func withName(ls map[string]string, name string) map[string]string {
	out := map[string]string{"alertname": name}
	for k, v := range ls {
		out[k] = v
	}
	return out
}

// checkFiring compares the alerts of a rule firing at a time with those wanted.
func checkFiring(t *testing.T, alerting []*rules.AlertingRule, name string, at time.Duration, want []string) {
	t.Helper()
	var got []string
	for _, r := range alerting {
		if r.Name() != name {
			continue
		}
		for _, a := range r.ActiveAlerts() {
			if a.State == rules.StateFiring {
				got = append(got, a.Labels.String())
			}
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("%s at %s: firing\n  %s\nwant\n  %s", name, at, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}
