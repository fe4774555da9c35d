// SPDX-License-Identifier: Apache-2.0

package record

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/notice"
)

// EpisodeEnded says why the node's open episode is over, or "" when it is not (or none is
// open): the instance booted again since it opened (Spot stop and hibernate, scheduled
// reboots and stops keep the instance id and the Node, and often the notice id), or someone
// else made the node schedulable again (an operator took it back). The next notice, even one
// seen before, opens a new episode with its own drain, webhook and Event.
func EpisodeEnded(n *corev1.Node, r Record) string {
	if !r.Open() {
		return ""
	}
	if bootedAgain(n, r) {
		return "the instance booted again since (boot ID " + r.BootID + " is now " + n.Status.NodeInfo.BootID + ")"
	}
	if !n.Spec.Unschedulable {
		return "someone else made the node schedulable again"
	}
	return ""
}

// BootedAgain reports whether the node has an open episode and a boot other than the one the
// episode opened on.
func BootedAgain(n *corev1.Node, r Record) bool { return r.Open() && bootedAgain(n, r) }

// bootedAgain reports whether the node's boot is another than the one its episode opened on.
func bootedAgain(n *corev1.Node, r Record) bool {
	boot := n.Status.NodeInfo.BootID
	return r.BootID != "" && boot != "" && boot != r.BootID
}

// LeftByNewer says why a record of a newer schema, which this binary cannot carry on, is no
// longer a newer Lifeboat's work, or "" while it may be: a newer Lifeboat still running (an
// upgrade in progress) must be neither redone nor undone, but after a rollback nothing else
// would ever give the node back. It reads only the fields every version keeps, and nothing a
// newer release may do otherwise with the node (whether its episodes cordon, say): no episode
// open, the instance booted again since it opened, or its deadline more than NewerHold past.
// A deadline of zero holds the node until one of the others.
func (r Record) LeftByNewer(n *corev1.Node, now time.Time) string {
	switch {
	case r.Known():
		return ""
	case r.Phase == PhaseNone || r.AllReleased():
		return "no episode is open in it"
	case bootedAgain(n, r):
		return "the instance booted again since its episode opened"
	case !r.Deadline.IsZero() && now.After(r.Deadline.Add(NewerHold)):
		return fmt.Sprintf("its deadline %s is more than %s past", r.Deadline.UTC().Format(time.RFC3339), NewerHold)
	}
	return ""
}

// NextEpisode is what is kept of a record when its episode ends: the notices released for
// good (a scheduled reboot's event stays listed after the reboot). When it ended by a new
// boot, the scheduled events of the episode have happened: they are released too, so one
// still reported afterwards is not acted on again. (Spot stop and hibernate notices are not:
// the next one, even with the same id, is a new interruption.)
func (r Record) NextEpisode(booted bool) Record {
	next := Record{Version: Version, Released: slices.Clone(r.Released)}
	if booted {
		for _, id := range r.Notices {
			if k, _ := notice.KindOfID(id); k.Scheduled() && !slices.Contains(next.Released, id) {
				next.Released = append(next.Released, id)
			}
		}
	}
	return next
}

// CountEpisodes counts, among nodes (*corev1.Node, as an informer's store lists them), those
// in an open episode by phase, and the pods marked not to disrupt their drains left.
func CountEpisodes(nodes []any) metrics.Episodes {
	e := metrics.Episodes{ByPhase: map[string]int{}}
	for _, o := range nodes {
		n, ok := o.(*corev1.Node)
		if !ok || n.Annotations[Annotation] == "" {
			continue
		}
		r, err := Read(n)
		if err != nil || !r.Open() {
			continue
		}
		e.ByPhase[r.Phase.String()]++
		e.PodsHeld += len(r.Held)
	}
	return e
}
