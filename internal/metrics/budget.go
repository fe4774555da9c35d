package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// BudgetChanged counts a change of the shared Kubernetes request budget's rate and why it
// changed (throttled, slow, demand); it fits pacing.Observer.
func (m *Metrics) BudgetChanged(_ float64, reason string) {
	if m != nil {
		m.budgetChanges.WithLabelValues(reason).Inc()
	}
}

// WatchBudget makes the budget gauges read, at each scrape, the rate and how many requests
// wait in each of the lanes.
func (m *Metrics) WatchBudget(rate func() float64, lanes []string, waiting func(lane string) int) {
	if m != nil {
		m.budget.set(rate, lanes, waiting)
	}
}

type budgetCollector struct {
	rate    *prometheus.Desc
	waiting *prometheus.Desc

	mu        sync.Mutex
	readRate  func() float64
	lanes     []string
	readWaits func(string) int
}

func newBudgetCollector() *budgetCollector {
	return &budgetCollector{
		rate: prometheus.NewDesc("lifeboat_kube_request_rate_limit",
			"The shared Kubernetes request budget's rate now (requests per second): it follows the API server's answers up to KUBE_API_QPS (or 1000).", nil, nil),
		waiting: prometheus.NewDesc("lifeboat_kube_requests_waiting",
			"Kubernetes requests waiting for the shared budget, by lane (urgent: cordons; ordinary: soonest deadline first; background: Events).",
			[]string{"lane"}, nil),
	}
}

func (c *budgetCollector) set(rate func() float64, lanes []string, waiting func(string) int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.readRate, c.lanes, c.readWaits = rate, lanes, waiting
}

func (c *budgetCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.rate
	ch <- c.waiting
}

func (c *budgetCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	rate, lanes, waiting := c.readRate, c.lanes, c.readWaits
	c.mu.Unlock()
	if rate == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.rate, prometheus.GaugeValue, rate())
	for _, lane := range lanes {
		ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, float64(waiting(lane)), lane)
	}
}
