// SPDX-License-Identifier: Apache-2.0

package record

import (
	"testing"
	"time"

	"lifeboat.dev/lifeboat/internal/notice"
)

// An AWS Health update that moves its event's start moves the recorded notice while its drain
// has not begun; once it has, only an earlier start counts.
func TestRestatedStart(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	grace := 2 * time.Minute
	day := 24 * time.Hour
	inst := "i-0123456789abcdef0"
	health := func(start time.Time) notice.Notice {
		return notice.Notice{ID: notice.ID(notice.ScheduledMaintenance, inst, notice.Digest("arn")), Kind: notice.ScheduledMaintenance,
			Source: notice.SourceQueue, InstanceID: inst, Deadline: start, StartTime: start, Action: "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED"}
	}
	first := now.Add(14 * day)
	spot := Intent{ID: "spot-x", Kind: string(notice.SpotInterruption), Deadline: now.Add(20 * day)}
	for _, tt := range []struct {
		name         string
		recorded     time.Time // the recorded start
		owner        bool      // a drain claimed the episode
		phase        Phase
		update       time.Time
		want, wantRD time.Time // the intent's deadline and the record's after the update
	}{
		{"later, not begun", first, false, PhaseDraining, first.Add(2 * day), first.Add(2 * day), first.Add(2 * day)},
		{"earlier, not begun", first, false, PhaseDraining, first.Add(-day), first.Add(-day), first.Add(-day)},
		{"the same", first, false, PhaseDraining, first, first, first},
		{"later, draining", first, true, PhaseDraining, first.Add(day), first, first},
		{"earlier, draining", first, true, PhaseDraining, first.Add(-day), first.Add(-day), first.Add(-day)},
		{"later, drain due", now.Add(time.Minute), false, PhaseDraining, now.Add(day), now.Add(time.Minute), now.Add(time.Minute)},
		{"later, drained", first, false, PhaseDrained, first.Add(day), first, first},
	} {
		t.Run(tt.name, func(t *testing.T) {
			old := health(tt.recorded)
			r := Record{Notices: []string{old.ID, spot.ID}, Phase: tt.phase, Deadline: tt.recorded,
				Intents: []Intent{IntentOf(old, "queue q"), spot}}
			if tt.owner {
				r.Owner = &Owner{Origin: "queue q"}
			}
			n := health(tt.update)
			// As intake does: the record keeps the earliest deadline, then the intent moves.
			if n.Deadline.Before(r.Deadline) {
				r.Deadline = n.Deadline
			}
			moveStart(&r, 0, n, grace, now)
			if got := r.Intents[0].Deadline; !got.Equal(tt.want) {
				t.Errorf("intent deadline %v, want %v", got, tt.want)
			}
			if !r.Deadline.Equal(tt.wantRD) {
				t.Errorf("record deadline %v, want %v", r.Deadline, tt.wantRD)
			}
			if r.Intents[0].Origin != "queue q" || r.Intents[1] != spot {
				t.Errorf("intents %+v: the origin and other notices must stay", r.Intents)
			}
		})
	}
	// Another notice's earlier deadline stays the episode's when this one moves later.
	old := health(first)
	early := Intent{ID: "spot-y", Kind: string(notice.SpotInterruption), Deadline: now.Add(day)}
	r := Record{Notices: []string{old.ID, early.ID}, Phase: PhaseDraining, Deadline: early.Deadline, Intents: []Intent{IntentOf(old, "q"), early}}
	moveStart(&r, 0, health(first.Add(day)), grace, now)
	if !r.Deadline.Equal(early.Deadline) {
		t.Errorf("record deadline %v, want the other notice's %v", r.Deadline, early.Deadline)
	}
}
