// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// BudgetChanged counts a change of the shared Kubernetes request budget's bound and why it
// changed (throttled, slow, demand); it fits pacing.Observer.
func (m *Metrics) BudgetChanged(_ float64, reason string) {
	if m != nil {
		m.budgetChanges.WithLabelValues(reason).Inc()
	}
}

// BudgetReader is what the budget gauges read at each scrape.
type BudgetReader struct {
	Limit    func() float64        // the bound on requests in flight
	Lanes    []string              // the lanes' names
	Waiting  func(lane string) int // requests waiting in a lane
	InFlight func(lane string) int // requests of a lane at the API server
}

// WatchBudget makes the budget gauges read the budget at each scrape.
func (m *Metrics) WatchBudget(r BudgetReader) {
	if m != nil {
		m.budget.set(r)
	}
}

type budgetCollector struct {
	limit    *prometheus.Desc
	waiting  *prometheus.Desc
	inFlight *prometheus.Desc

	mu     sync.Mutex
	reader BudgetReader
}

func newBudgetCollector() *budgetCollector {
	return &budgetCollector{
		limit: prometheus.NewDesc("lifeboat_kube_requests_in_flight_limit",
			"The shared Kubernetes request budget's bound on requests in flight (ordinary and background lanes; cordons have their own): it follows the API server's answers.", nil, nil),
		waiting: prometheus.NewDesc("lifeboat_kube_requests_waiting",
			"Kubernetes requests waiting for the shared budget, by lane (urgent: cordons; ordinary: soonest deadline first; background: Events).",
			[]string{"lane"}, nil),
		inFlight: prometheus.NewDesc("lifeboat_kube_requests_in_flight",
			"Kubernetes requests at the API server now, by the budget's lane (watches not counted).",
			[]string{"lane"}, nil),
	}
}

func (c *budgetCollector) set(r BudgetReader) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reader = r
}

func (c *budgetCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.limit
	ch <- c.waiting
	ch <- c.inFlight
}

func (c *budgetCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	r := c.reader
	c.mu.Unlock()
	if r.Limit == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, r.Limit())
	for _, lane := range r.Lanes {
		ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, float64(r.Waiting(lane)), lane)
		ch <- prometheus.MustNewConstMetric(c.inFlight, prometheus.GaugeValue, float64(r.InFlight(lane)), lane)
	}
}
