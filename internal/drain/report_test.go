// SPDX-License-Identifier: Apache-2.0

package drain

import (
	"testing"
	"time"
)

// An unreadable do-not-disrupt annotation is told once per pod and value through the drains of
// an episode; a new value is told again, and so is the same one a day later.
func TestUnreadableMarkToldOncePerPod(t *testing.T) {
	r := &Reporter{}
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	steps := []struct {
		key  string
		at   time.Time
		want bool
	}{
		{"uid-a\x00bad yes", now, true},
		{"uid-a\x00bad yes", now.Add(time.Minute), false}, // the reclaim's drain of the same episode
		{"uid-b\x00bad yes", now.Add(time.Minute), true},
		{"uid-a\x00bad forever", now.Add(2 * time.Minute), true},
		{"uid-a\x00bad yes", now.Add(markToldFor + time.Hour), true},
	}
	for i, s := range steps {
		if got := r.markDue(s.key, s.at); got != s.want {
			t.Errorf("step %d (%q): due %v, want %v", i, s.key, got, s.want)
		}
	}
}
