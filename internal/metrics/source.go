// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"context"
	"time"
)

// sourceHealthEvery is how often a notice source's health is read into its gauge.
const sourceHealthEvery = 5 * time.Second

// ReportSourceHealth keeps the source's health gauge (lifeboat_source_healthy) current from
// healthy until ctx ends: both modes' sources, the agent's instance metadata and the
// controller's queue, are reported the same way.
func (m *Metrics) ReportSourceHealth(ctx context.Context, source string, healthy func() error) {
	if m == nil {
		return
	}
	for {
		m.SourceHealthy(source, healthy() == nil)
		select {
		case <-ctx.Done():
			return
		case <-time.After(sourceHealthEvery):
		}
	}
}
