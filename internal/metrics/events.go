// SPDX-License-Identifier: Apache-2.0

package metrics

import "github.com/prometheus/client_golang/prometheus"

func newEventsDropped() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "lifeboat_events_dropped_total",
		Help: "Kubernetes Events Lifeboat recorded but did not write, by the object they are about (node, pod) and reason: " +
			"queue_full (more were waiting than its queue holds: the API server took them more slowly than they came, as in a zone's reclaim), " +
			"rate_limited (client-go's spam filter: too many about one object at once), refused (the API server answered with an error), " +
			"namespace_gone (its namespace is being deleted or gone), " +
			"unsent (no answer after every attempt), stopped (still queued when the process stopped).",
	}, []string{"object", "reason"})
}

// EventDropped counts a Kubernetes Event that was not written (events.DropCounter).
func (m *Metrics) EventDropped(object, reason string) {
	if m != nil {
		m.eventsDropped.WithLabelValues(object, reason).Inc()
	}
}
