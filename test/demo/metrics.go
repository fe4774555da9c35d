// SPDX-License-Identifier: Apache-2.0

package demo

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// alwaysShown are the gauges whose 0 says something too: a replica that does not lead, a
// source that is not healthy.
var alwaysShown = []string{"lifeboat_leader", "lifeboat_source_healthy"}

// notShown are families that say nothing of the scenario: the build, a timestamp, and the
// Kubernetes clients' plumbing (every request by client, code, resource and verb).
var notShown = []string{"lifeboat_build_info", "lifeboat_readiness_last_run_timestamp_seconds", "lifeboat_kube_"}

// scrapeCounted reads what a process counted from its metrics, one line per sample, each
// prefixed with the process's name.
func scrapeCounted(ctx context.Context, p *process) []string {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.metrics, nil)
	if err != nil {
		return []string{p.name + ": metrics unavailable: " + err.Error()}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return []string{p.name + ": metrics unavailable: " + err.Error()}
	}
	defer resp.Body.Close()
	lines, err := counted(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return []string{p.name + ": metrics unreadable: " + err.Error()}
	}
	for i, l := range lines {
		lines[i] = p.name + ": " + l
	}
	return lines
}

// counted returns the samples of Lifeboat's metrics (text exposition) that say what the
// process did: counters and gauges not at 0, and for a histogram its count of observations
// when not 0. A series Lifeboat starts at 0 so that its first increase shows is left out while
// it is 0, except the gauges in alwaysShown. Sorted by name, then labels.
func counted(body io.Reader) ([]string, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(body)
	if err != nil {
		return nil, err
	}
	var out []string
	for name, f := range families {
		if !strings.HasPrefix(name, "lifeboat_") || slices.ContainsFunc(notShown, func(p string) bool { return strings.HasPrefix(name, p) }) {
			continue
		}
		for _, m := range f.GetMetric() {
			sample, value := name, 0.0
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				value = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				value = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				sample, value = name+"_count", float64(m.GetHistogram().GetSampleCount())
			default:
				continue
			}
			if value != 0 || slices.Contains(alwaysShown, name) {
				out = append(out, sample+labels(m)+" "+number(value))
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// labels writes a sample's labels as the exposition does: {a="x",b="y"}, or nothing.
func labels(m *dto.Metric) string {
	if len(m.GetLabel()) == 0 {
		return ""
	}
	parts := make([]string, 0, len(m.GetLabel()))
	for _, l := range m.GetLabel() {
		parts = append(parts, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// number writes a whole value without a fraction.
func number(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return fmt.Sprintf("%d", int64(v))
	}
	return fmt.Sprintf("%g", v)
}
