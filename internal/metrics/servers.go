// SPDX-License-Identifier: Apache-2.0

package metrics

import "github.com/prometheus/client_golang/prometheus"

// Lifeboat's servers, as label values of lifeboat_server_connections_refused_total.
const (
	ServerProbes  = "probes"
	ServerMetrics = "metrics"
)

func newServerRefused() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "lifeboat_server_connections_refused_total",
		Help: "Connections to Lifeboat's servers reset at once because the server already held its limit of connections, by server (probes, metrics).",
	}, []string{"server"})
}

// ConnectionRefused returns what counts one connection the named server refused at its
// connection limit; it fits health.WithRefused.
func (m *Metrics) ConnectionRefused(server string) func() {
	if m == nil {
		return func() {}
	}
	return m.serverRefused.WithLabelValues(server).Inc
}
