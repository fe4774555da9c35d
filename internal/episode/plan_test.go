// SPDX-License-Identifier: Apache-2.0

package episode

import (
	"testing"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

func TestPlanFor(t *testing.T) {
	load := func(env ...string) *config.Config { return sandboxtest.Config(t, "", env...) }
	tests := []struct {
		name string
		kind notice.Kind
		cfg  *config.Config
		want Plan
	}{
		{"spot drains", notice.SpotInterruption, load(), Plan{Cordon: true, Drain: true}},
		{"spot with taint and label", notice.SpotInterruption, load("TAINT_NODE", "true", "EXCLUDE_FROM_LOAD_BALANCERS", "true"),
			Plan{TaintKey: nodes.TaintSpotInterruption, ExcludeLB: true, Cordon: true, Drain: true}},
		{"cordon only", notice.ASGTermination, load("CORDON_ONLY", "true"), Plan{Cordon: true}},
		{"scheduled", notice.ScheduledMaintenance, load("TAINT_NODE", "true"), Plan{TaintKey: nodes.TaintScheduledMaintenance, Cordon: true, Drain: true}},
		{"rebalance monitoring cordons only", notice.Rebalance, load("ENABLE_REBALANCE_MONITORING", "true"), Plan{Cordon: true}},
		{"rebalance draining", notice.Rebalance, load("ENABLE_REBALANCE_DRAINING", "true", "TAINT_NODE", "true"),
			Plan{TaintKey: nodes.TaintRebalance, Cordon: true, Drain: true}},
		{"ASG termination", notice.ASGTermination, load("TAINT_NODE", "true"), Plan{TaintKey: nodes.TaintASGLifecycle, Cordon: true, Drain: true}},
	}
	for _, tt := range tests {
		if got := PlanFor(tt.kind, tt.cfg); got != tt.want {
			t.Errorf("%s: %+v, want %+v", tt.name, got, tt.want)
		}
	}
}
