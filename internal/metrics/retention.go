// SPDX-License-Identifier: Apache-2.0

package metrics

import "github.com/prometheus/client_golang/prometheus"

// Events of a retained instance (ABANDON_LIFECYCLE_ACTION_ON_INCOMPLETE_DRAIN), the
// lifeboat_retained_instances_total label.
const (
	RetainedAbandoned  = "abandoned"  // the termination hook was completed with ABANDON; the group retains the instance
	RetainedTerminated = "terminated" // drained, the instance was terminated by Lifeboat
	RetainedExpired    = "expired"    // RETAINED_DRAIN_TIMEOUT passed with the drain unfinished: Lifeboat stopped
	RetainedRefused    = "refused"    // the instance gate refused the termination: Lifeboat stopped
	// Found by the periodic sweep of the groups' retained instances (a hook that timed out).
	RetainedSwept = "swept" // its node drained or gone, the instance this cluster's: terminated by Lifeboat
	RetainedBusy  = "busy"  // its node still runs pods: reported, not terminated
)

func newRetained() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "lifeboat_retained_instances_total",
		Help: "Instances kept by their Auto Scaling group's retention after a termination hook's drain could not finish in time, by event: " +
			"abandoned (the hook completed with ABANDON), terminated (drained, then terminated by Lifeboat), expired (RETAINED_DRAIN_TIMEOUT passed: left retained, reported), refused (the termination was refused by the instance check: left retained); " +
			"found by the periodic sweep of retained instances (a termination hook that timed out, or was abandoned by another process): swept (node drained or gone: terminated), busy (its node still runs pods: reported, left retained).",
	}, []string{"event"})
}

// Retained counts an event of a retained instance (RetainedAbandoned, ...).
func (m *Metrics) Retained(event string) {
	if m != nil {
		m.retained.WithLabelValues(event).Inc()
	}
}
