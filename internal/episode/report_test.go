// SPDX-License-Identifier: Apache-2.0

package episode

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/record"
)

// An outcome is claimed for its report by one write only; a cordon is no outcome to report
// once the episode drains.
func TestClaimOutcomeOnce(t *testing.T) {
	node := &corev1.Node{}
	record.Write(node, record.Record{Notices: []string{"spot-i-1"}, Phase: record.PhaseCordoned})
	var first, again bool
	claimOutcome(record.OutcomeCordoned, &first)(node)
	claimOutcome(record.OutcomeCordoned, &again)(node)
	if !first || again {
		t.Fatalf("cordon claimed %v then %v, want once", first, again)
	}
	var drained bool
	claimOutcome(record.OutcomeDrained, &drained)(node)
	if !drained {
		t.Error("an episode escalated from a cordon to a drain does not report the drain")
	}
	record.Edit(func(r *record.Record) { r.Phase, r.Reported = record.PhaseDraining, nil })(node)
	var cordon bool
	claimOutcome(record.OutcomeCordoned, &cordon)(node)
	if cordon {
		t.Error("a cordon-only notice joining a draining episode reports a cordon")
	}
}
