// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"lifeboat.dev/lifeboat/internal/panics"
)

// newPanics counts recovered panics by site. It was the reconcile's counter, without labels;
// the site label keeps its name, so a sum over it counts what it did and more.
func newPanics() *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "lifeboat_reconcile_panics_total",
		Help: "Panics recovered, by site (the unit of work that panicked: reconcile, queue_message, notice, hook_timeout, lifecycle_heartbeat, eviction, pod_watch, drain_claim, " +
			"grace_cut, instance_status, imds_poll, instance_lookup, handback_wait, node_event, readiness_check, webhook, node_repair, node_cleanup, retained_sweep, node_condition, setup_check). Only that unit failed, as after an error (a node retried with backoff, " +
			"a notice retried, a pod left, a poll missed, a send failed), and the rest went on. Each is a bug: the log line (\"recovered a panic\") has the site and the stack.",
	}, []string{"site"})
	for _, s := range panics.Sites {
		c.WithLabelValues(s.Name) // each site's series from the start: its first panic is an increase
	}
	return c
}

// PanicRecovered counts a panic recovered at site; it fits panics.Counter.
func (m *Metrics) PanicRecovered(site string) {
	if m != nil {
		m.panics.WithLabelValues(site).Inc()
	}
}
