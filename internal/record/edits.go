// SPDX-License-Identifier: Apache-2.0

package record

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/notice"
)

// IntentEdit records the notice's intent, taken from origin. A copy of a recorded notice
// changes nothing (the first copy's deadline stands: a rebalance's is counted from its
// receipt), except that a copy with a readable start replaces a cordon-only one, whose drain
// it then schedules, and that a restated notice (an AWS Health update) moves its start (see
// moveStart). grace is NODE_TERMINATION_GRACE_PERIOD: a scheduled drain begins that long
// before the start.
func IntentEdit(n notice.Notice, origin string, grace time.Duration) nodes.Edit {
	return Edit(func(r *Record) {
		i := slices.IndexFunc(r.Intents, func(i Intent) bool { return i.ID == n.ID })
		switch {
		case i < 0:
			r.Intents = append(r.Intents, IntentOf(n, origin))
		case r.Intents[i].CordonOnly != "" && n.CordonOnly == "":
			r.Intents[i] = IntentOf(n, origin)
		case n.Restated() && n.CordonOnly == "" && !n.Deadline.IsZero():
			moveStart(r, i, n, grace, time.Now())
		}
	})
}

// moveStart applies an update of the notice recorded as intent i that states another start.
// While the notice's drain has not begun, the start and deadline move either way (a change
// postponed or brought forward); once it has begun, only an earlier start counts, and
// tightens the deadline: pods already evicted are not brought back, and the instance may
// still go at the earlier time.
func moveStart(r *Record, i int, n notice.Notice, grace time.Duration, now time.Time) {
	old := r.Intents[i]
	deadline := n.Deadline.UTC().Truncate(time.Second)
	if deadline.Equal(old.Deadline) {
		return
	}
	begun := r.Owner != nil || r.Phase >= PhaseDrained || slices.Contains(r.Finished, old.ID) ||
		!now.Before(old.Deadline.Add(-grace))
	if begun {
		if deadline.Before(old.Deadline) {
			r.Intents[i].Deadline, r.Intents[i].Start = deadline, n.StartTime.UTC()
		}
		return
	}
	moved := IntentOf(n, old.Origin)
	moved.Lifecycle = old.Lifecycle
	if !old.Announced.IsZero() {
		moved.Announced = old.Announced // the notice was announced with its first copy
	}
	r.Intents[i] = moved
	// The episode's deadline is the earliest of its notices': recount it without the old one.
	if !r.Deadline.Equal(old.Deadline) && !r.Deadline.After(deadline) {
		return
	}
	earliest := deadline
	for _, o := range r.Intents {
		if o.ID != old.ID && !o.Deadline.IsZero() && !slices.Contains(r.Released, o.ID) && o.Deadline.Before(earliest) {
			earliest = o.Deadline
		}
	}
	r.Deadline = earliest
}

// PhaseEdit adds the notice to the node's record and moves the phase forward (never back),
// keeping the earliest deadline. Re-applying it changes nothing, so a repeated notice
// writes nothing.
func PhaseEdit(id string, phase Phase, deadline time.Time) nodes.Edit {
	return Edit(func(r *Record) {
		if !r.Has(id) {
			r.Notices = append(r.Notices, id)
		}
		if phase == PhaseDrained && !slices.Contains(r.Finished, id) {
			r.Finished = append(r.Finished, id)
		}
		r.Phase = max(r.Phase, phase)
		if !deadline.IsZero() && (r.Deadline.IsZero() || deadline.Before(r.Deadline)) {
			r.Deadline = deadline.UTC().Truncate(time.Second)
		}
	})
}

// Edit changes the node's record through f.
func Edit(f func(*Record)) nodes.Edit {
	return func(n *corev1.Node) {
		r, _ := Read(n)
		if !r.Known() {
			return // a newer binary's record is never rewritten
		}
		f(&r)
		Write(n, r)
	}
}

// OpenEpisode is the first edit of every write that records a notice: it ends an episode that
// is over (see EpisodeEnded), decided on the node being written so that a retry after a
// conflict decides afresh, and notes the boot an opening episode belongs to. It sets *ended
// to why the previous episode ended, if it did.
func OpenEpisode(ended *string) nodes.Edit {
	return func(n *corev1.Node) {
		r, _ := Read(n)
		if !r.Known() {
			*ended = ""
			return // a newer binary's record is never rewritten
		}
		*ended = EpisodeEnded(n, r)
		if *ended != "" {
			r = r.NextEpisode(bootedAgain(n, r))
		}
		if !r.Open() {
			r.BootID = n.Status.NodeInfo.BootID
		}
		r.Version = Version
		Write(n, r)
	}
}
