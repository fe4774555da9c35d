// Package metrics holds Lifeboat's Prometheus metrics on a registry of its own (no global
// state, so tests and several instances in one process do not collide). Labels are bounded:
// never a node name, instance id or notice id.
package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are the collectors Lifeboat updates.
type Metrics struct {
	Registry *prometheus.Registry
	// IMDSPolls counts instance-metadata polls by path and result ("ok" or "error").
	IMDSPolls *prometheus.CounterVec
	// Notices counts notices received, by kind and source.
	Notices *prometheus.CounterVec
}

// New registers Lifeboat's metrics, plus the Go runtime and process collectors.
func New() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		IMDSPolls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lifeboat_imds_polls_total", Help: "Instance-metadata polls by path and result (ok, error).",
		}, []string{"path", "result"}),
		Notices: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lifeboat_notices_total", Help: "Notices received, by kind and source.",
		}, []string{"kind", "source"}),
	}
	m.Registry.MustRegister(m.IMDSPolls, m.Notices, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// ObserveIMDS records one poll; it fits imds.Options.Observe.
func (m *Metrics) ObserveIMDS(path string, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.IMDSPolls.WithLabelValues(path, result).Inc()
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry})
}
