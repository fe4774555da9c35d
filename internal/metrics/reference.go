// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// The reference is rendered from a registry on which every metric has a sample (a vector
// without one has no type or labels to show), which only this package's tests build; so the
// test writes it, and go generate runs that test.
//
//go:generate go test -count=1 -run ^TestReferenceUpToDate$ . -args -update

// ReferencePath is where the metrics reference lives, from the repository's root.
const ReferencePath = "docs/reference/metrics.md"

// ReferenceCommand is what regenerates the metrics reference; messages about a stale
// reference name it.
const ReferenceCommand = "make docs"

// Reference renders the metrics reference from g: every lifeboat_ metric it gathers, with its
// type, labels and help, so the documentation cannot list a metric the code does not register.
func Reference(g prometheus.Gatherer) ([]byte, error) {
	families, err := g.Gather()
	if err != nil {
		return nil, fmt.Errorf("gather the metrics: %w", err)
	}
	var b bytes.Buffer
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }

	p("# Metrics reference\n\n")
	p("<!-- Generated from the registry in internal/metrics by `%s`; do not edit by hand. -->\n\n", ReferenceCommand)
	p("With `ENABLE_PROMETHEUS_SERVER=true` both modes serve `/metrics` on `PROMETHEUS_SERVER_PORT`\n")
	p("(9092). The registry is Lifeboat's own; beside the metrics below it holds the Go runtime and\n")
	p("process collectors (`go_*`, `process_*`). No label carries a node name, an instance id or a\n")
	p("notice id. Names and label values follow Prometheus's conventions (base units, `_total`\n")
	p("counters, `_ratio` ratios, snake_case values), checked by `promlint` in the tests.\n\n")
	p("What the metrics mean in operation, with their label values, the dashboard and the alerts:\n")
	p("[monitoring](../operations/monitoring.md). Renamed metrics: [upgrading](../operations/upgrading.md#metric-renames).\n\n")
	p("| metric | type | labels | help |\n| --- | --- | --- | --- |\n")
	for _, f := range families {
		if !strings.HasPrefix(f.GetName(), "lifeboat_") {
			continue
		}
		labels := labelNames(f)
		shown := "none"
		if len(labels) > 0 {
			shown = "`" + strings.Join(labels, "`, `") + "`"
		}
		p("| `%s` | %s | %s | %s |\n", f.GetName(), strings.ToLower(f.GetType().String()), shown, tableCell(f.GetHelp()))
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// labelNames lists, sorted, the label names of f's samples; a histogram's le is its buckets',
// not a label of the metric's own.
func labelNames(f *dto.MetricFamily) []string {
	var names []string
	for _, m := range f.GetMetric() {
		for _, l := range m.GetLabel() {
			if !slices.Contains(names, l.GetName()) {
				names = append(names, l.GetName())
			}
		}
	}
	slices.Sort(names)
	return names
}

// tableCell keeps prose inside one Markdown table cell: a pipe would end it, a <name> would be
// read as an HTML tag.
func tableCell(s string) string {
	return strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;", "\n", " ").Replace(s)
}
