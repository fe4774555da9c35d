// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// EpisodePhases are the phases lifeboat_episodes reports, always all of them so a dashboard
// shows zeros rather than gaps.
var EpisodePhases = []string{"cordoned", "draining", "drained"}

// Episodes is what the episode gauges say at one scrape.
type Episodes struct {
	// ByPhase counts the nodes in an open episode by the record's phase.
	ByPhase map[string]int
	// PodsHeld counts the pods marked not to disrupt that drains left on those nodes.
	PodsHeld int
}

// CountEpisodes makes the episode gauges report what count returns at each scrape, read
// from the episode records on the Nodes, so the numbers survive restarts and agree across
// replicas. count returns false while this process does not reconcile (a standby replica):
// then nothing is reported and a sum over replicas counts each node once. nil stops it.
func (m *Metrics) CountEpisodes(count func() (Episodes, bool)) {
	if m != nil {
		m.episodes.set(count)
	}
}

type episodeCollector struct {
	phase *prometheus.Desc
	held  *prometheus.Desc

	mu    sync.Mutex
	count func() (Episodes, bool)
}

func newEpisodeCollector() *episodeCollector {
	return &episodeCollector{
		phase: prometheus.NewDesc("lifeboat_episodes",
			"Nodes in an open interruption episode, by phase (cordoned, draining, drained: waiting for its hand-back or its notices' end), as their records say; reported by the replica that reconciles.",
			[]string{"phase"}, nil),
		held: prometheus.NewDesc("lifeboat_episode_pods_held",
			"Pods marked not to disrupt that stay on nodes in an open episode because no notice reclaims the instance.", nil, nil),
	}
}

func (c *episodeCollector) set(count func() (Episodes, bool)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.count = count
}

func (c *episodeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.phase
	ch <- c.held
}

func (c *episodeCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	count := c.count
	c.mu.Unlock()
	if count == nil {
		return
	}
	e, ok := count()
	if !ok {
		return
	}
	for _, p := range EpisodePhases {
		ch <- prometheus.MustNewConstMetric(c.phase, prometheus.GaugeValue, float64(e.ByPhase[p]), p)
	}
	ch <- prometheus.MustNewConstMetric(c.held, prometheus.GaugeValue, float64(e.PodsHeld))
}
