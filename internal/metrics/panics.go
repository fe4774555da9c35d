package metrics

import "github.com/prometheus/client_golang/prometheus"

func newReconcilePanics() prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{
		Name: "lifeboat_reconcile_panics_total",
		Help: "Panics recovered while reconciling a node's interruption work; the node is retried with backoff and the others go on. Each is a bug: the log has the node and the stack.",
	})
}

// ReconcilePanic counts a panic recovered while reconciling a node.
func (m *Metrics) ReconcilePanic() {
	if m != nil {
		m.reconcilePanics.Inc()
	}
}
