// SPDX-License-Identifier: Apache-2.0

package metrics

import "github.com/prometheus/client_golang/prometheus"

// ActionMarkUnhealthy is SetInstanceHealth Unhealthy on an impaired instance's group, counted
// by lifeboat_actions_total.
const ActionMarkUnhealthy = "mark_unhealthy"

// instanceStatusMetrics are the controller's DescribeInstanceStatus passes.
type instanceStatusMetrics struct {
	requests prometheus.Histogram
	impaired prometheus.Gauge
	passes   *prometheus.CounterVec
}

func newInstanceStatusMetrics(reg *prometheus.Registry) *instanceStatusMetrics {
	s := &instanceStatusMetrics{
		requests: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "lifeboat_instance_status_pass_requests", Help: "DescribeInstanceStatus requests made by each pass over this cluster's instances (at most 100 instances a request, one more for a batch naming an instance EC2 no longer knows).",
			Buckets: []float64{1, 2, 3, 5, 10, 20, 50, 100},
		}),
		impaired: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "lifeboat_instance_status_impaired", Help: "This cluster's running instances whose EC2 status checks failed in the last DescribeInstanceStatus pass.",
		}),
		passes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lifeboat_instance_status_passes_total", Help: "DescribeInstanceStatus passes by result (ok, error: some instances could not be asked about).",
		}, []string{"result"}),
	}
	reg.MustRegister(s.requests, s.impaired, s.passes)
	return s
}

// InstanceStatusPass records one pass: the requests it made, the instances it found impaired
// and whether every batch was answered.
func (m *Metrics) InstanceStatusPass(requests, impaired int, err error) {
	if m == nil {
		return
	}
	m.instanceStatus.requests.Observe(float64(requests))
	m.instanceStatus.impaired.Set(float64(impaired))
	m.instanceStatus.passes.WithLabelValues(result(err)).Inc()
}
