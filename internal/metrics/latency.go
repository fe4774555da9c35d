// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"lifeboat.dev/lifeboat/internal/notice"
)

// The stages of an interruption measured by lifeboat_interruption_latency_seconds.
const (
	StageCordoned   = "cordoned"    // the notice recorded with the node's cordon
	StageDrained    = "drained"     // the node's drain for the notice finished, every selected pod gone
	StageHandedBack = "handed_back" // the notice finished: the hand-back's waits and its lifecycle action done
)

var latencyStages = []string{StageCordoned, StageDrained, StageHandedBack}

// newLatency is lifeboat_interruption_latency_seconds, registered in r, every kind and stage
// at zero.
func newLatency(r *prometheus.Registry) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "lifeboat_interruption_latency_seconds",
		Help: "Time from a notice's own time (the EventBridge event's time, the lifecycle hook's time, or, for a notice that states none, " +
			"when Lifeboat first saw it) to each stage of its interruption, by kind and stage: cordoned, drained (the drain finished), " +
			"handed_back (the notice finished, its lifecycle action completed). A scheduled event's drained and handed_back include its wait for the start.",
		Buckets: []float64{1, 2, 5, 10, 15, 30, 45, 60, 90, 120, 180, 300, 600, 1800, 3600, 6 * 3600, 24 * 3600, 7 * 24 * 3600},
	}, []string{"kind", "stage"})
	for _, k := range notice.Kinds() {
		if !k.Recorded() {
			continue // a launch hook is answered at intake: it has no stages
		}
		for _, s := range latencyStages {
			h.WithLabelValues(labelValue(string(k)), s)
		}
	}
	r.MustRegister(h)
	return h
}

// InterruptionLatency records that the notice of kind k, announced at announced, reached the
// stage now. A notice without a time of its own is not counted.
func (m *Metrics) InterruptionLatency(k notice.Kind, stage string, announced time.Time) {
	if m == nil || announced.IsZero() {
		return
	}
	m.latency.WithLabelValues(labelValue(string(k)), stage).Observe(max(time.Since(announced), 0).Seconds())
}
