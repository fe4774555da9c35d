// SPDX-License-Identifier: Apache-2.0

package status

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/record"
)

// Status says how each pending hook is completed if its drain cannot finish (CONTINUE, or
// ABANDON where the group retains abandoned instances), and the state of a retained node.
func TestRetentionStatus(t *testing.T) {
	since := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	retained := func(edit func(*record.Retention)) record.Record {
		r := record.Record{Retained: &record.Retention{Group: "workers", Notices: []string{"asg-term-a"}, Since: since, Until: since.Add(24 * time.Hour)}}
		if edit != nil {
			edit(r.Retained)
		}
		return r
	}
	on, off := &config.Config{AbandonOnIncompleteDrain: true}, &config.Config{}
	for _, tc := range []struct {
		name      string
		cfg       *config.Config
		rec       record.Record
		reclaimed bool
		state     string // "" = no retention
		onHook    string
	}{
		{"setting off", off, record.Record{}, false, "", "CONTINUE"},
		{"setting on", on, record.Record{}, false, "", "ABANDON if group workers retains abandoned instances (TerminateHookAbandon: retain), else CONTINUE"},
		{"retained", on, retained(nil), false, RetainedDraining, "ABANDON: done, the group retains the instance"},
		{"retained, a reclaim joined", on, retained(nil), true, RetainedMoot, "ABANDON: done, the group retains the instance"},
		{"terminated", on, retained(func(r *record.Retention) { r.Terminated = since.Add(time.Hour) }), false, RetainedTerminated, "ABANDON: done, the group retains the instance"},
		{"stopped", off, retained(func(r *record.Retention) {
			r.Stopped, r.Why = since.Add(24*time.Hour), "RETAINED_DRAIN_TIMEOUT passed"
		}), false, RetainedStopped, "ABANDON: done, the group retains the instance"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := retainedOf(tc.rec, tc.reclaimed)
			switch {
			case tc.state == "" && got != nil:
				t.Errorf("retention %+v, want none", got)
			case tc.state != "" && (got == nil || got.State != tc.state || got.Group != "workers"):
				t.Errorf("retention %+v, want %s in workers", got, tc.state)
			}
			if on := onIncompleteDrain(tc.cfg, tc.rec, "asg-term-a", "workers"); on != tc.onHook {
				t.Errorf("on an incomplete drain: %q, want %q", on, tc.onHook)
			}
		})
	}

	r := &Report{At: since.Add(time.Hour), Nodes: []Node{{Name: "n1", Phase: "draining", Notices: []Notice{}, Pods: []Pod{},
		Lifecycle: []Lifecycle{{Notice: "asg-term-a", Group: "workers", Hook: "drain", OnIncompleteDrain: "ABANDON: done, the group retains the instance"}},
		Retained:  &Retained{Group: "workers", Since: since, Until: since.Add(24 * time.Hour), State: RetainedDraining}}}}
	var out bytes.Buffer
	if err := Print(&out, r, FormatTable); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"if the drain cannot finish in time: ABANDON: done", "retained   group workers  draining  since 2026-11-28T09:00:00Z, until 2026-11-29T09:00:00Z"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}
