// SPDX-License-Identifier: Apache-2.0

package deploy_test

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"

	"lifeboat.dev/lifeboat/internal/metrics"
)

// promql is Prometheus's own PromQL parser, with its default (non-experimental) features:
// what a Prometheus server accepts in a rule or a query.
var promql = parser.NewParser(parser.Options{})

// Labels a scrape adds to every series (Prometheus's job and instance, and what the
// Prometheus Operator's monitors and a multi-cluster setup add), which rules and panels may
// match on besides a metric's own.
var targetLabels = []string{"job", "instance", "namespace", "pod", "container", "service", "endpoint", "cluster"}

// series is a metric name Lifeboat's registry serves, with the labels its samples carry.
type series struct {
	labels []string
}

// registeredSeries maps every series name Lifeboat's registry can serve (a histogram's
// _bucket, _sum and _count) to its labels.
func registeredSeries(t *testing.T) map[string]series {
	t.Helper()
	descs := make(chan *prometheus.Desc)
	go func() { metrics.New().Registry.Describe(descs); close(descs) }()
	desc := regexp.MustCompile(`^Desc\{fqName: "([^"]+)", .*constLabels: \{([^}]*)\}, variableLabels: \{([^}]*)\}\}$`)
	constName := regexp.MustCompile(`(\w+)=`)
	out := map[string]series{}
	for d := range descs {
		m := desc.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot read %s", d)
		}
		var ls []string
		for _, c := range constName.FindAllStringSubmatch(m[2], -1) {
			ls = append(ls, c[1])
		}
		if m[3] != "" {
			ls = append(ls, strings.Split(m[3], ",")...)
		}
		out[m[1]] = series{labels: ls}
		for _, suffix := range []string{"_sum", "_count"} {
			out[m[1]+suffix] = series{labels: ls}
		}
		out[m[1]+"_bucket"] = series{labels: append(slices.Clone(ls), "le")}
	}
	if len(out) == 0 {
		t.Fatal("the registry describes nothing")
	}
	return out
}

// presentFromStart lists the metrics a Lifeboat process serves as soon as it starts, before
// any notice: what a fresh registry gathers.
func presentFromStart(t *testing.T) []string {
	t.Helper()
	families, err := metrics.New().Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range families {
		names = append(names, f.GetName())
	}
	return names
}

// selector is one series selector of a query.
type selector struct {
	name     string
	matchers []*labels.Matcher
}

// selectors parses a PromQL expression and returns its series selectors.
func selectors(expr string) ([]selector, error) {
	node, err := promql.ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	var out []selector
	parser.Inspect(node, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			var ms []*labels.Matcher
			for _, m := range vs.LabelMatchers {
				if m.Name != labels.MetricName {
					ms = append(ms, m)
				}
			}
			out = append(out, selector{name: vs.Name, matchers: ms})
		}
		return nil
	})
	return out, nil
}

// checkQuery lists what is wrong with a PromQL expression: it does not parse, selects no
// Lifeboat metric, or selects a metric Lifeboat does not register or matches a label its
// series do not carry. known may name series from elsewhere (up) that an expression may use.
func checkQuery(expr string, known map[string]series) []string {
	sels, err := selectors(expr)
	if err != nil {
		return []string{fmt.Sprintf("does not parse: %v", err)}
	}
	var problems []string
	ours := 0
	for _, s := range sels {
		reg, ok := known[s.name]
		if !ok && !strings.HasPrefix(s.name, "lifeboat_") {
			problems = append(problems, fmt.Sprintf("selects %q, not a Lifeboat metric", s.name))
			continue
		}
		ours++
		if !ok {
			problems = append(problems, fmt.Sprintf("selects %s, which Lifeboat does not register", s.name))
			continue
		}
		for _, m := range s.matchers {
			if !slices.Contains(reg.labels, m.Name) && !slices.Contains(targetLabels, m.Name) {
				problems = append(problems, fmt.Sprintf("matches label %s of %s, which has only %v", m.Name, s.name, reg.labels))
			}
		}
	}
	if ours == 0 {
		problems = append(problems, "selects no Lifeboat metric")
	}
	return problems
}

// The checks catch what they are for: a query that does not parse, an unknown metric or
// label, and no Lifeboat metric at all.
func TestCheckQuery(t *testing.T) {
	known := registeredSeries(t)
	for _, tt := range []struct{ expr, want string }{
		{`sum(rate(lifeboat_evictions_total{result="refused"}[5m]))`, ""},
		{`histogram_quantile(0.9, sum by (le) (rate(lifeboat_drain_duration_seconds_bucket{job="x",le!=""}[5m])))`, ""},
		{`sum(rate(lifeboat_evictions_total[5m]) > 0`, "does not parse"},
		{`rate(lifeboat_evictions_total)`, "does not parse"},
		{`sum(lifeboat_drain_deadline_share_bucket)`, "lifeboat_drain_deadline_share_bucket, which Lifeboat does not register"},
		{`sum(lifeboat_evictions_total{reason="refused"})`, "matches label reason of lifeboat_evictions_total"},
		{`up{job="lifeboat"}`, `selects "up", not a Lifeboat metric`},
		{`vector(1)`, "selects no Lifeboat metric"},
	} {
		got := strings.Join(checkQuery(tt.expr, known), "; ")
		if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
			t.Errorf("%s: problems %q, want %q", tt.expr, got, tt.want)
		}
	}
}
