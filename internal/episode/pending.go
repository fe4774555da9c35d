// SPDX-License-Identifier: Apache-2.0

package episode

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/record"
)

// drainWanted reports whether the episode's pending notices need a drain: the node is not
// drained yet, or its drain left pods marked not to disrupt that a reclaim now evicts.
func drainWanted(r record.Record, pending []notice.Notice) bool {
	if r.Phase < record.PhaseDrained {
		return true
	}
	return len(r.Held) > 0 && slices.ContainsFunc(pending, func(n notice.Notice) bool { return n.Kind.Reclaims() })
}

// Pending lists the notices of the open episode whose work is not done: recorded, neither
// released nor finished, and whose plan under c drains the node. With an origin, only the
// notices taken from it: an agent and a controller (or two controllers with their own
// queues) on one cluster each drive the notices they took; the record has no owner yet to
// share them safely.
func Pending(r record.Record, c *config.Config, origin string) []notice.Notice {
	if !r.Known() || !r.Open() {
		return nil
	}
	var out []notice.Notice
	for _, i := range r.Intents {
		if !r.Has(i.ID) || slices.Contains(r.Released, i.ID) || slices.Contains(r.Finished, i.ID) || (origin != "" && i.Origin != origin) {
			continue
		}
		if n := i.Notice(); planFor(n, c).Drain {
			out = append(out, n)
		}
	}
	return out
}

// HasWork reports whether a reconcile of the node has work, now or later: notices pending, an
// episode that is over (the instance booted again, the node taken back by an operator), a
// newer Lifeboat's record with an episode open (left to it, then taken back), or open notices
// of kinds this binary does not know (held, then released). rec is the node's record.
func HasWork(n *corev1.Node, rec record.Record, c *config.Config, origin string) bool {
	if !rec.Known() {
		return rec.Phase != record.PhaseNone && !rec.AllReleased()
	}
	if len(Pending(rec, c, origin)) > 0 || record.EpisodeEnded(n, rec) != "" {
		return true
	}
	due, next := unknownDue(rec, time.Now())
	return len(due) > 0 || !next.IsZero()
}
