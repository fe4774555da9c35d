// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"testing"
	"time"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/source/sqs/messages"
)

func TestJudgeBlock(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 21, 11, 20, 0, 0, time.UTC)
	end := now.Add(40 * time.Minute)
	block := func(edit func(*cloud.CapacityReservation)) cloud.CapacityReservation {
		r := cloud.CapacityReservation{ID: "cr-0123456789abcdef0", Type: "capacity-block", State: "active", InstanceType: "p5.48xlarge", EndDate: end}
		edit(&r)
		return r
	}
	for _, tt := range []struct {
		name     string
		r        cloud.CapacityReservation
		deadline time.Time
		reason   string
		forged   bool
	}{
		{"a block ending in 40 min", block(func(*cloud.CapacityReservation) {}), end.Add(-30 * time.Minute), "", false},
		{"a warning 5 min late", block(func(r *cloud.CapacityReservation) { r.EndDate = now.Add(35 * time.Minute) }), now.Add(5 * time.Minute), "", false},
		{"an UltraServer block", block(func(r *cloud.CapacityReservation) { r.InstanceType = "p6e-gb200.36xlarge" }), end.Add(-60 * time.Minute), "", false},
		{"a Trn2 UltraServer block", block(func(r *cloud.CapacityReservation) { r.InstanceType = "trn2u.48xlarge" }), end.Add(-60 * time.Minute), "", false},
		{"a Trn2 instance block", block(func(r *cloud.CapacityReservation) { r.InstanceType = "trn2.48xlarge" }), end.Add(-30 * time.Minute), "", false},
		{"extended", block(func(r *cloud.CapacityReservation) { r.EndDate = end.Add(24 * time.Hour) }), time.Time{}, messages.ReasonBlockExtended, false},
		{"an ordinary reservation", block(func(r *cloud.CapacityReservation) { r.Type = "default" }), time.Time{}, messages.ReasonNotCapacityBlock, true},
		{"expired", block(func(r *cloud.CapacityReservation) { r.State = "expired" }), time.Time{}, messages.ReasonBlockNotActive, false},
		{"no end date", block(func(r *cloud.CapacityReservation) { r.EndDate = time.Time{} }), time.Time{}, messages.ReasonNotCapacityBlock, true},
	} {
		v := judgeBlock(tt.r, now)
		if !v.deadline.Equal(tt.deadline) || v.reason != tt.reason || v.forged != tt.forged || (v.reason != "") != (v.why != "") {
			t.Errorf("%s: %+v, want deadline %v, reason %q, forged %v", tt.name, v, tt.deadline, tt.reason, tt.forged)
		}
	}
}
