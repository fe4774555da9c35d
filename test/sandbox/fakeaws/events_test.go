// SPDX-License-Identifier: Apache-2.0

package fakeaws_test

import (
	"testing"
	"time"

	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/source/sqs/messages"
	"lifeboat.dev/lifeboat/test/sandbox/fakeaws"
)

// The fake's messages are read by Lifeboat's parser as the notices they stand for, from the
// account of the sandbox's queue.
func TestEventsParse(t *testing.T) {
	at := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	const a, b = "i-0123456789abcdef0", "i-0fedcba9876543210"
	tests := []struct {
		name     string
		body     string
		kinds    []notice.Kind
		deadline time.Time
	}{
		{"spot", fakeaws.SpotInterruptionWarning(a, "terminate", at), []notice.Kind{notice.SpotInterruption}, at.Add(2 * time.Minute)},
		{"capacity reservation", fakeaws.CapacityReservationInterruptionWarning(a, "terminate", at), []notice.Kind{notice.CapacityReservationInterruption}, at.Add(2 * time.Minute)},
		{"health", fakeaws.HealthScheduledChange("h-1", "AWS_EC2_SYSTEM_MAINTENANCE_SCHEDULED", at.Add(72*time.Hour), at.Add(74*time.Hour), "", "", a, b),
			[]notice.Kind{notice.ScheduledMaintenance, notice.ScheduledMaintenance}, at.Add(72 * time.Hour)},
		{"rebalance", fakeaws.RebalanceRecommendation(a, at), []notice.Kind{notice.Rebalance}, time.Time{}},
		{"terminate hook", fakeaws.TerminateLifecycleAction("workers", "drain", a, "tok", at), []notice.Kind{notice.ASGTermination}, time.Time{}},
	}
	queue := messages.Parser{QueueAccount: fakeaws.Account}
	for _, tt := range tests {
		r, err := queue.Parse(tt.body, time.Now())
		if err != nil || r.Ignore || len(r.Notices) != len(tt.kinds) {
			t.Errorf("%s: %+v %v", tt.name, r, err)
			continue
		}
		for i, n := range r.Notices {
			if n.Kind != tt.kinds[i] || !n.Deadline.Equal(tt.deadline) || n.CordonOnly != "" {
				t.Errorf("%s: notice %d %+v", tt.name, i, n)
			}
		}
	}
	// An odd spelling of the start time is written verbatim: the notice only cordons.
	r, err := messages.Parse(fakeaws.HealthScheduledChange("h-2", "AWS_EC2_SYSTEM_MAINTENANCE_SCHEDULED", time.Time{}, time.Time{}, "next Tuesday", "", a), time.Now())
	if err != nil || len(r.Notices) != 1 || r.Notices[0].CordonOnly == "" {
		t.Errorf("odd start time: %+v %v", r, err)
	}
}

// Both spellings of the Capacity Block warning read as one reservation whose instances begin
// to terminate ten minutes after the warning.
func TestCapacityBlockWarningParses(t *testing.T) {
	at := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	for _, body := range []string{fakeaws.CapacityBlockExpirationWarning("cr-0123456789abcdef0", at),
		fakeaws.CapacityBlockReservationExpirationWarning("cr-0123456789abcdef0", at)} {
		r, err := messages.Parser{QueueAccount: fakeaws.Account}.Parse(body, time.Now())
		if err != nil || len(r.Reservations) != 1 || r.Reservations[0].ID != "cr-0123456789abcdef0" ||
			!r.Reservations[0].Deadline.Equal(at.Add(10*time.Minute)) || !r.Reservations[0].EndDate.Equal(at.Add(40*time.Minute)) {
			t.Errorf("%s: %+v %v", body, r, err)
		}
	}
}
