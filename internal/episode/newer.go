// SPDX-License-Identifier: Apache-2.0

package episode

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/events"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/record"
)

// What a newer Lifeboat wrote and this one cannot carry on (a record of a newer schema not
// readable by this version, a notice of a kind it does not know) is left to the newer
// Lifeboat while that may be at work: during an upgrade an older replica must neither redo nor
// undo it. Held for good, it would keep the node cordoned after a rollback, so it is taken back
// once its episode is over by the fields every version keeps, or its deadline is
// record.NewerHold past: Lifeboat's own cordon, taints and labels are undone, with an Event.

// leftBehind takes the node back from a newer Lifeboat's record when record.LeftByNewer says
// it was left, else says once that it is left to the newer Lifeboat and asks to be called
// again when its hold ends.
func (n *newerRecords) leftBehind(ctx context.Context, node *corev1.Node, rec record.Record) (time.Duration, error) {
	if rec.LeftByNewer(node, time.Now()) != "" {
		_, _, err := n.takeBack(ctx, node)
		return 0, err
	}
	n.record(node, rec)
	if rec.Deadline.IsZero() {
		return 0, nil
	}
	return time.Until(rec.Deadline.Add(record.NewerHold)) + time.Second, nil
}

// takeBack replaces a newer Lifeboat's record that record.LeftByNewer says was left (decided
// again on the node being written) by one of this version keeping the notices released for
// good, and takes back Lifeboat's own cordon, the taints of the notices it names and
// Lifeboat's labels: the node is this binary's to protect again. It returns why ("" when the
// record was not taken back) and the node as written.
func (n *newerRecords) takeBack(ctx context.Context, node *corev1.Node) (string, *corev1.Node, error) {
	var (
		why     string
		version int
	)
	edit := func(nd *corev1.Node) {
		r, err := record.Read(nd)
		if why = ""; err != nil || r.Known() {
			return
		}
		if why = r.LeftByNewer(nd, time.Now()); why == "" {
			return
		}
		version = r.Version
		for _, e := range n.ends.undo(r) {
			e(nd)
		}
		record.Write(nd, r.NextEpisode(false)) // of this version, keeping the notices released for good
	}
	res, err := n.ends.writer.Apply(ctx, node.Name, node, "take the node back from a newer Lifeboat's record", edit)
	if err != nil || why == "" {
		return "", nil, err
	}
	what := fmt.Sprintf("the node's record (schema version %d, this one knows %d)", version, record.Version)
	n.ends.conditions.set(res.Node, ConditionEpisodeEnded, "The interruption episode is over: "+what+" was left by a newer Lifeboat: "+why)
	n.log.Info("a newer Lifeboat's record taken back: Lifeboat's cordon, taints and labels undone", "node", node.Name, "version", version, "why", why)
	if !n.ends.cfg.DryRun {
		n.events.TakenFromNewer(events.NodeOf(node), what, why)
	}
	return why, res.Node, nil
}

// unknownDue lists the open notices of kinds this binary does not know whose deadline is more
// than record.NewerHold past at now, and when the next of the others will be.
func unknownDue(r record.Record, now time.Time) (due []string, next time.Time) {
	if !r.Open() {
		return nil, time.Time{}
	}
	for _, i := range r.Intents {
		if notice.Kind(i.Kind).Known() || !r.Has(i.ID) || i.Deadline.IsZero() || slices.Contains(r.Released, i.ID) || slices.Contains(r.Finished, i.ID) {
			continue
		}
		at := i.Deadline.Add(record.NewerHold)
		switch {
		case now.After(at):
			due = append(due, i.ID)
		case next.IsZero() || at.Before(next):
			next = at
		}
	}
	return due, next
}

// releaseUnknown releases the notices of kinds this binary does not know once their deadline
// is record.NewerHold past (see unknownDue), as the episode's ends release a canceled event's
// notice: once no notice holds the node, Lifeboat's cordon, taints and labels are undone. It
// returns how long until the next such notice is due.
func (n *newerRecords) releaseUnknown(ctx context.Context, node *corev1.Node, rec record.Record) (time.Duration, error) {
	due, next := unknownDue(rec, time.Now())
	if len(due) > 0 {
		var (
			uncordoned bool
			released   []string
		)
		edit := func(nd *corev1.Node) {
			uncordoned = n.ends.releaseEdit(nd, func(r *record.Record) bool {
				released, _ = unknownDue(*r, time.Now())
				r.Released = append(r.Released, released...)
				return len(released) > 0
			})
		}
		res, err := n.ends.writer.Apply(ctx, node.Name, node, "release notices a newer Lifeboat left", edit)
		if err != nil {
			return 0, err
		}
		n.releasedUnknown(res.Node, released, uncordoned)
	}
	if next.IsZero() {
		return 0, nil
	}
	return time.Until(next) + time.Second, nil
}

// releasedUnknown says what releaseUnknown released.
func (n *newerRecords) releasedUnknown(node *corev1.Node, released []string, uncordoned bool) {
	if len(released) == 0 {
		return
	}
	why := fmt.Sprintf("their deadline is more than %s past", record.NewerHold)
	n.log.Info("notices of kinds this Lifeboat does not know released: a newer Lifeboat left them", "node", node.Name, "notices", released, "uncordoned", uncordoned)
	if uncordoned {
		n.ends.conditions.set(node, ConditionEpisodeEnded, "The interruption episode is over: the notices a newer Lifeboat left were released")
	}
	if !n.ends.cfg.DryRun {
		n.events.TakenFromNewer(events.NodeOf(node), fmt.Sprintf("notices %v", released), why)
	}
}
