// SPDX-License-Identifier: Apache-2.0

package episode

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/record"
	"lifeboat.dev/lifeboat/internal/record/recordtest"
)

// retainsStub answers Retains from a map of groups (an error for a group it does not know).
type retainsStub struct{ groups map[string]bool }

func (s retainsStub) Retains(_ context.Context, group string) (bool, error) {
	r, ok := s.groups[group]
	if !ok {
		return false, errors.New("no such group")
	}
	return r, nil
}
func (retainsStub) Abandon(context.Context, string, notice.Notice) error    { return nil }
func (retainsStub) Terminate(context.Context, string, string, string) error { return nil }

// Which retention applies to a reconcile: a drain may abandon its hook only with the setting,
// a group that retains, an action not about to expire, and no reclaim among its notices; a
// recorded retention is retained, moot once a reclaim joins, stopped or terminated as
// recorded.
func TestRetentionOf(t *testing.T) {
	now := time.Now()
	hook := func(group string, in time.Duration) notice.Notice {
		return notice.Notice{ID: notice.ID(notice.ASGTermination, recordtest.Instance, notice.TokenDigest(group)), Kind: notice.ASGTermination,
			InstanceID: recordtest.Instance, Deadline: now.Add(in), Lifecycle: &notice.Lifecycle{Group: group, Hook: "drain"}}
	}
	spot := notice.Notice{ID: notice.ID(notice.SpotInterruption, recordtest.Instance, ""), Kind: notice.SpotInterruption, InstanceID: recordtest.Instance, Deadline: now.Add(2 * time.Minute)}
	rebalance := notice.Notice{ID: notice.ID(notice.Rebalance, recordtest.Instance, ""), Kind: notice.Rebalance, InstanceID: recordtest.Instance, Deadline: now.Add(time.Minute)}
	retained := func(edit func(*record.Retention)) record.Record {
		h := hook("kept", -time.Minute)
		r := record.Record{Intents: []record.Intent{record.IntentOf(h, "q")}, Retained: &record.Retention{Group: "kept", Notices: []string{h.ID}, Since: now.Add(-time.Minute), Until: now.Add(time.Hour)}}
		if edit != nil {
			edit(r.Retained)
		}
		return r
	}
	for _, tc := range []struct {
		name    string
		enabled bool
		rec     record.Record
		pending []notice.Notice
		want    retentionState
	}{
		{"setting off", false, record.Record{}, []notice.Notice{hook("kept", time.Hour)}, stateNone},
		{"group retains", true, record.Record{}, []notice.Notice{hook("kept", time.Hour)}, stateMayAbandon},
		{"with a rebalance", true, record.Record{}, []notice.Notice{rebalance, hook("kept", time.Hour)}, stateMayAbandon},
		{"group terminates", true, record.Record{}, []notice.Notice{hook("plain", time.Hour)}, stateNone},
		{"group unknown", true, record.Record{}, []notice.Notice{hook("gone", time.Hour)}, stateNone},
		{"a reclaim joined", true, record.Record{}, []notice.Notice{hook("kept", time.Hour), spot}, stateNone},
		{"action about to expire", true, record.Record{}, []notice.Notice{hook("kept", time.Second)}, stateNone},
		{"no hook", true, record.Record{}, []notice.Notice{rebalance}, stateNone},
		{"retained", true, retained(nil), []notice.Notice{hook("kept", -time.Minute)}, stateRetained},
		{"retained, setting since turned off", false, retained(nil), []notice.Notice{hook("kept", -time.Minute)}, stateRetained},
		{"retained, then a reclaim", true, retained(nil), []notice.Notice{hook("kept", -time.Minute), spot}, stateMoot},
		{"stopped", true, retained(func(r *record.Retention) { r.Stopped = now }), []notice.Notice{hook("kept", -time.Minute)}, stateStopped},
		{"terminated", true, retained(func(r *record.Retention) { r.Terminated = now }), []notice.Notice{hook("kept", -time.Minute)}, stateTerminated},
		{"retained, none of this process's notices", true, retained(nil), []notice.Notice{rebalance}, stateNone},
		{"retained, no retainer (the agent)", true, retained(nil), []notice.Notice{hook("kept", -time.Minute)}, stateNone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &retentions{cfg: &config.Config{AbandonOnIncompleteDrain: tc.enabled, RetainedDrainTimeout: time.Hour}}
			if !strings.Contains(tc.name, "no retainer") {
				r.retainer = retainsStub{groups: map[string]bool{"kept": true, "plain": false}}
			}
			got := r.of(context.Background(), tc.rec, tc.pending, slog.New(slog.DiscardHandler))
			if got.state != tc.want {
				t.Fatalf("state %d, want %d", got.state, tc.want)
			}
			if got.state == stateMayAbandon {
				if want := now.Add(time.Hour - abandonMargin); got.at.Sub(want).Abs() > time.Second || got.group != "kept" || len(got.hooks) != 1 {
					t.Errorf("abandon at %v in %q with %d hooks, want %v in kept with 1", got.at, got.group, len(got.hooks), want)
				}
				if d := got.deadline(tc.rec, tc.pending); !d.Time().Equal(got.at) || d.Patient() {
					t.Errorf("drain deadline %v (patient %v), want %v", d.Time(), d.Patient(), got.at)
				}
			}
		})
	}
}

// A retained node drains in patient rounds bounded by the retention's end; once a reclaim
// joins, by the reclaim's deadline, the abandoned hook's past one no longer counting; a
// retention Lifeboat stopped is left alone until a reclaim comes.
func TestRetainedDrainDeadline(t *testing.T) {
	now := time.Now()
	h := notice.Notice{ID: notice.ID(notice.ASGTermination, recordtest.Instance, notice.TokenDigest("t")), Kind: notice.ASGTermination,
		InstanceID: recordtest.Instance, Deadline: now.Add(-time.Hour), Lifecycle: &notice.Lifecycle{Group: "kept", Hook: "drain"}}
	spot := notice.Notice{ID: notice.ID(notice.SpotInterruption, recordtest.Instance, ""), Kind: notice.SpotInterruption, InstanceID: recordtest.Instance, Deadline: now.Add(2 * time.Minute)}
	rec := record.Record{Intents: []record.Intent{record.IntentOf(h, "q")}, Retained: &record.Retention{Group: "kept", Notices: []string{h.ID}, Since: now.Add(-time.Hour), Until: now.Add(time.Minute)}}

	r := retention{state: stateRetained, rec: rec.Retained}
	if d := r.deadline(rec, []notice.Notice{h}); !d.Patient() || !d.Time().Equal(rec.Retained.Until) {
		t.Errorf("retained round: deadline %v patient %v, want the retention's end %v, patient", d.Time(), d.Patient(), rec.Retained.Until)
	}
	rec.Retained.Until = now.Add(24 * time.Hour)
	if d := r.deadline(rec, []notice.Notice{h}); d.Time().After(now.Add(retainedRound + time.Second)) {
		t.Errorf("retained round ends %v, want within %v", d.Time(), retainedRound)
	}
	if terms := r.terms(recordtest.NodeWith(""), []notice.Notice{h}); terms.Reclaim {
		t.Error("a retained drain evicts pods marked not to disrupt before their protection ends")
	}
	moot := retention{state: stateMoot, rec: rec.Retained}
	if d := moot.deadline(rec, []notice.Notice{h, spot}); d.Patient() || !d.Time().Equal(spot.Deadline) {
		t.Errorf("after a reclaim: deadline %v patient %v, want the reclaim's %v", d.Time(), d.Patient(), spot.Deadline)
	}
	if !unabandonedIs(rec, spot) {
		t.Error("the reclaim is not left among the binding notices")
	}
	rec.Retained.Stopped = now
	if !retentionStopped(rec, []notice.Notice{h}) || retentionStopped(rec, []notice.Notice{h, spot}) {
		t.Error("a stopped retention is not left alone, or keeps a reclaim from draining")
	}
}

func unabandonedIs(r record.Record, want notice.Notice) bool {
	got := unabandoned(r, []notice.Notice{{ID: r.Retained.Notices[0]}, want})
	return len(got) == 1 && got[0].ID == want.ID
}
