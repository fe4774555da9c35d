// SPDX-License-Identifier: Apache-2.0

package record

import (
	"fmt"
	"slices"
	"time"
)

// Retention is a termination hook abandoned to its group's retention, in the record.
type Retention struct {
	// Group is the Auto Scaling group that retains the instance.
	Group string `json:"group"`
	// Notices are the termination-hook notices whose actions were completed with ABANDON:
	// nothing is completed for them again.
	Notices []string `json:"notices"`
	// Since is when the actions were abandoned; Until, when Lifeboat stops waiting
	// (RETAINED_DRAIN_TIMEOUT later).
	Since time.Time `json:"since"`
	Until time.Time `json:"until"`
	// Terminated is when the instance's termination was claimed, just before the call: at
	// most one call is made for the episode.
	Terminated time.Time `json:"terminated,omitzero"`
	// Stopped is when Lifeboat stopped waiting for the node to empty, and Why says why
	// (RETAINED_DRAIN_TIMEOUT passed, or the termination was refused).
	Stopped time.Time `json:"stopped,omitzero"`
	Why     string    `json:"why,omitempty"`
}

// Abandoned reports whether the notice's lifecycle action was completed with ABANDON.
func (r Record) Abandoned(id string) bool {
	return r.Retained != nil && slices.Contains(r.Retained.Notices, id)
}

// validate checks a retention read from a Node: it names a group of Auto Scaling's length,
// and only recorded termination hooks of that group, since Lifeboat terminates the instance
// it retains (the instance gate checks the instance and group again before the call).
func (t *Retention) validate(r Record) error {
	if t.Group == "" || len(t.Group) > maxGroupOrHook {
		return fmt.Errorf("group: %d characters, want 1 to %d", len(t.Group), maxGroupOrHook)
	}
	if len(t.Notices) == 0 || len(t.Notices) > maxNotices {
		return fmt.Errorf("notices: %d entries, want 1 to %d", len(t.Notices), maxNotices)
	}
	for i, id := range t.Notices {
		in, ok := r.Intent(id)
		if !ok || in.Lifecycle == nil || in.Lifecycle.Group != t.Group {
			return fmt.Errorf("notices[%d] %q is not a recorded termination hook of group %q", i, clipValue(id), clipValue(t.Group))
		}
	}
	if len(t.Why) > maxDescription {
		return fmt.Errorf("why: %d characters, more than %d", len(t.Why), maxDescription)
	}
	return nil
}
