// SPDX-License-Identifier: Apache-2.0

package status

import (
	"fmt"
	"slices"
	"time"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/record"
)

// Retained is a node whose termination hook was abandoned to its group's retention
// (ABANDON_LIFECYCLE_ACTION_ON_INCOMPLETE_DRAIN).
type Retained struct {
	Group string    `json:"group"`
	Since time.Time `json:"since"`
	Until time.Time `json:"until"`
	// State is "draining" (Lifeboat drains the node and terminates the instance once empty),
	// "terminated" (it did), "stopped" (it stopped: Why), or "moot" (a reclaim joined: the
	// instance goes at its deadline).
	State string `json:"state"`
	Why   string `json:"why,omitempty"`
}

// Retention states.
const (
	RetainedDraining   = "draining"
	RetainedTerminated = "terminated"
	RetainedStopped    = "stopped"
	RetainedMoot       = "moot"
)

// retainedOf is the record's retention, nil when it has none; reclaimed says a reclaim is
// among the pending notices.
func retainedOf(rec record.Record, reclaimed bool) *Retained {
	r := rec.Retained
	if r == nil {
		return nil
	}
	out := &Retained{Group: r.Group, Since: r.Since, Until: r.Until, State: RetainedDraining, Why: r.Why}
	switch {
	case !r.Terminated.IsZero():
		out.State = RetainedTerminated
	case !r.Stopped.IsZero():
		out.State = RetainedStopped
	case reclaimed:
		out.State = RetainedMoot
	}
	return out
}

// onIncompleteDrain says how the lifecycle action of a notice is completed if its drain
// cannot finish before the action expires.
func onIncompleteDrain(cfg *config.Config, rec record.Record, notice, group string) string {
	switch {
	case rec.Retained != nil && slices.Contains(rec.Retained.Notices, notice):
		return "ABANDON: done, the group retains the instance"
	case cfg.AbandonOnIncompleteDrain:
		return fmt.Sprintf("ABANDON if group %s retains abandoned instances (TerminateHookAbandon: retain), else CONTINUE", group)
	}
	return "CONTINUE"
}
