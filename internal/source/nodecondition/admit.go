// SPDX-License-Identifier: Apache-2.0

package nodecondition

import (
	"context"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/record"
)

// admit decides whether the node's due repair may start: not when another system repairs
// the node, or whether one does is not known now (EKS could not be asked: looked at again
// after Recheck), nor when an operator vetoed it, nor while a breaker holds it (the
// cluster's, then the node group's). Each is said once per node and failure (a hold, once
// per cause). A repair already recorded on the node always goes on (intake finds it
// recorded). A held repair is looked at again after Recheck.
func (w *Watcher) admit(ctx context.Context, node *corev1.Node, n notice.Notice, key string) bool {
	first := func(what string) bool {
		if w.reported[node.Name] == what {
			return false
		}
		w.reported[node.Name] = what
		return true
	}
	owner, err := w.opts.Owners.LeftTo(ctx, node)
	switch {
	case err != nil && ctx.Err() != nil:
		return false // stopping
	case err != nil:
		w.held.clear(ctx, node)
		if first("unknown " + key) {
			w.opts.Report.OwnerUnknown(ctx, node, n, err)
		}
		w.queue.AddAfter(node.Name, w.opts.Recheck)
		return false
	case owner != "":
		w.held.clear(ctx, node)
		if first("left " + key) {
			w.opts.Report.LeftTo(node, n, owner)
		}
		return false
	case Vetoed(node):
		w.held.clear(ctx, node)
		if first("vetoed " + key) {
			w.opts.Report.Vetoed(node, n)
		}
		return false // the annotation's removal is a node update: looked at again then
	case RepairRunning(node):
		return true // another repair's episode is open: this one joins it
	}
	b, all := w.assess()
	if !b.Open {
		w.groups.learn(ctx, all)
		b.CountGroups(all, w.opts.Policies, w.groups.of)
	}
	h := b.Hold(w.groups.of(node))
	w.opts.Report.Breaker(b)
	if h.Cause == "" {
		w.held.clear(ctx, node)
		return true
	}
	if first("held " + h.Cause) {
		w.opts.Report.Held(node, n, h)
		w.held.show(ctx, node, h)
	}
	w.queue.AddAfter(node.Name, w.opts.Recheck)
	return false
}

// assess reads the cluster-wide breaker from the informer's nodes; a repair taken within the
// last minute that the informer does not show recorded yet counts as running, and a repair
// this process started within the hour counts as started even once its Node is gone.
func (w *Watcher) assess() (Breaker, []*corev1.Node) {
	objs := w.opts.Nodes.GetStore().List()
	all := make([]*corev1.Node, 0, len(objs))
	byName := make(map[string]*corev1.Node, len(objs))
	for _, o := range objs {
		if n, ok := o.(*corev1.Node); ok && Selected(n, w.opts.Selector) {
			all = append(all, n)
			byName[n.Name] = n
		}
	}
	pending := 0
	now := w.opts.Now()
	for name, at := range w.started {
		n, ok := byName[name]
		switch {
		case !ok || now.Sub(at) > time.Minute || recorded(n):
			delete(w.started, name)
		default:
			pending++
		}
	}
	since := now.Add(-startedWithinHour)
	starts := RecordedStarts(all, now)
	for name, at := range w.starts {
		if at.Before(since) {
			delete(w.starts, name)
			continue
		}
		starts[name] = at
	}
	return Assess(all, w.opts.Policies, w.opts.Limits, Tally{Pending: pending, Started: len(starts)}), all
}

// takenBefore reports whether the repair (its notice id, and key: the id and its condition's
// spell) was taken before: the node's open episode holds it, or the node's repair memory
// says it was the last one taken.
func takenBefore(n *corev1.Node, id, key string) bool {
	if r, ok := readRecord(n); ok && r.Open() && r.Has(id) {
		return true
	}
	m, err := record.ReadRepair(n)
	return err == nil && m.Taken == key
}

// recorded reports whether the node's record holds a repair notice.
func recorded(n *corev1.Node) bool {
	r, ok := readRecord(n)
	return ok && slices.ContainsFunc(r.Intents, func(i record.Intent) bool { return notice.Kind(i.Kind).Ends() == notice.EndsRepaired })
}

// quiet reports nothing.
type quiet struct{}

func (quiet) Breaker(Breaker)                                                    {}
func (quiet) Held(*corev1.Node, notice.Notice, Hold)                             {}
func (quiet) Vetoed(*corev1.Node, notice.Notice)                                 {}
func (quiet) Started(*corev1.Node, notice.Notice)                                {}
func (quiet) LeftTo(*corev1.Node, notice.Notice, string)                         {}
func (quiet) OwnerUnknown(context.Context, *corev1.Node, notice.Notice, error)   {}
func (quiet) Restated(*corev1.Node, record.ConditionClock)                       {}
func (quiet) Stale(*corev1.Node, notice.Notice, corev1.NodeCondition, time.Time) {}
func (quiet) Recovered(*corev1.Node, string, time.Time)                          {}
func (quiet) Escalated(*corev1.Node, notice.Notice, string)                      {}
func (quiet) Unreadable(*corev1.Node, error)                                     {}
