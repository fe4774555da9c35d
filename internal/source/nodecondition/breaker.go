// SPDX-License-Identifier: Apache-2.0

package nodecondition

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/record"
)

// AnnotationVeto, set to "disabled" on a Node, keeps node repair off that node: an operator's
// veto. Other notices are handled as ever.
const AnnotationVeto = nodes.AnnotationPrefix + "node-repair"

// VetoValue is the value of AnnotationVeto that vetoes.
const VetoValue = "disabled"

// Limits bound repairs (the breaker): NODE_REPAIR_MAX_UNHEALTHY_PERCENT,
// NODE_REPAIR_MAX_PARALLEL and NODE_REPAIR_PAUSED.
type Limits struct {
	// MaxUnhealthyPercent: while more than this share of the cluster's nodes are unhealthy by
	// the configured conditions (whether or not for their duration), no new repair starts.
	MaxUnhealthyPercent int
	// MaxParallel caps the repairs running at once (recorded, not yet finished); 0 = no cap.
	MaxParallel int
	// Paused holds every new repair.
	Paused bool
}

// LimitsOf are the configured limits.
func LimitsOf(c *config.Config) Limits {
	return Limits{MaxUnhealthyPercent: c.NodeRepairMaxUnhealthyPercent, MaxParallel: c.NodeRepairMaxParallel, Paused: c.NodeRepairPaused}
}

// Breaker is the state of the cluster's repairs, as read from its Nodes.
type Breaker struct {
	Nodes     int `json:"nodes"`     // the cluster's nodes
	Unhealthy int `json:"unhealthy"` // nodes with a configured condition in its status, however long
	Running   int `json:"running"`   // repairs recorded and not finished
	// Open says no new repair starts, and Reason why ("" when closed).
	Open   bool   `json:"open"`
	Reason string `json:"reason,omitempty"`
	// Cause is the metric label of the reason: paused, unhealthy_share, max_parallel.
	Cause string `json:"-"`
}

// Assess reads the breaker's state from the cluster's nodes. pending are repairs handed to
// intake and not yet seen on their Node (counted as running).
func Assess(all []*corev1.Node, conds []config.RepairCondition, l Limits, pending int) Breaker {
	b := Breaker{Nodes: len(all), Running: pending}
	for _, n := range all {
		if Unhealthy(n, conds) {
			b.Unhealthy++
		}
		if RepairRunning(n) {
			b.Running++
		}
	}
	switch {
	case l.Paused:
		b.Open, b.Cause, b.Reason = true, "paused", "NODE_REPAIR_PAUSED=true"
	case b.Nodes > 0 && b.Unhealthy*100 > l.MaxUnhealthyPercent*b.Nodes:
		b.Open, b.Cause = true, "unhealthy_share"
		b.Reason = fmt.Sprintf("%d of %d nodes unhealthy (%d%%), more than NODE_REPAIR_MAX_UNHEALTHY_PERCENT=%d%%", b.Unhealthy, b.Nodes, b.Unhealthy*100/b.Nodes, l.MaxUnhealthyPercent)
	case l.MaxParallel > 0 && b.Running >= l.MaxParallel:
		b.Open, b.Cause = true, "max_parallel"
		b.Reason = fmt.Sprintf("%d repairs running, NODE_REPAIR_MAX_PARALLEL=%d", b.Running, l.MaxParallel)
	}
	return b
}

// Unhealthy reports whether one of the node's conditions has the status a configured
// condition repairs, however long it has had it.
func Unhealthy(n *corev1.Node, conds []config.RepairCondition) bool {
	return slices.ContainsFunc(conds, func(r config.RepairCondition) bool {
		_, ok := Matching(n, r)
		return ok
	})
}

// RepairRunning reports whether the node's open episode holds a repair not finished yet.
func RepairRunning(n *corev1.Node) bool {
	if n.Annotations[record.Annotation] == "" {
		return false
	}
	r, err := record.Read(n)
	if err != nil || !r.Open() {
		return false
	}
	return slices.ContainsFunc(r.Intents, func(i record.Intent) bool {
		return notice.Kind(i.Kind).Ends() == notice.EndsRepaired && !slices.Contains(r.Finished, i.ID)
	})
}

// Vetoed reports whether an operator vetoed repairs of the node.
func Vetoed(n *corev1.Node) bool { return n.Annotations[AnnotationVeto] == VetoValue }

// admit decides whether the node's due repair may start: not when an operator vetoed it, nor
// while the breaker is open. A repair already recorded on the node always goes on (intake
// finds it recorded). A held repair is looked at again after Recheck.
func (w *Watcher) admit(node *corev1.Node, n notice.Notice, key string) bool {
	if owner := LeftTo(node, w.opts.AutoRepaired); owner != "" {
		if w.reported[node.Name] != "left "+key {
			w.reported[node.Name] = "left " + key
			w.opts.Report.LeftTo(node, n, owner)
		}
		return false
	}
	if Vetoed(node) {
		if w.reported[node.Name] != "vetoed "+key {
			w.reported[node.Name] = "vetoed " + key
			w.opts.Report.Vetoed(node, n)
		}
		return false // the annotation's removal is a node update: looked at again then
	}
	if RepairRunning(node) {
		return true
	}
	b := w.assess()
	w.opts.Report.Breaker(b)
	if !b.Open {
		return true
	}
	if w.reported[node.Name] != "held "+b.Cause {
		w.reported[node.Name] = "held " + b.Cause
		w.opts.Report.Held(node, n, b)
	}
	w.queue.AddAfter(node.Name, w.opts.Recheck)
	return false
}

// assess reads the breaker from the informer's nodes; a repair taken within the last minute
// that the informer does not show recorded yet counts as running.
func (w *Watcher) assess() Breaker {
	objs := w.opts.Nodes.GetStore().List()
	all := make([]*corev1.Node, 0, len(objs))
	byName := make(map[string]*corev1.Node, len(objs))
	for _, o := range objs {
		if n, ok := o.(*corev1.Node); ok {
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
	return Assess(all, w.opts.Conditions, w.opts.Limits, pending)
}

// recorded reports whether the node's record holds a repair notice.
func recorded(n *corev1.Node) bool {
	if n.Annotations[record.Annotation] == "" {
		return false
	}
	r, err := record.Read(n)
	return err == nil && slices.ContainsFunc(r.Intents, func(i record.Intent) bool { return notice.Kind(i.Kind).Ends() == notice.EndsRepaired })
}

// quiet reports nothing.
type quiet struct{}

func (quiet) Breaker(Breaker)                            {}
func (quiet) Held(*corev1.Node, notice.Notice, Breaker)  {}
func (quiet) Vetoed(*corev1.Node, notice.Notice)         {}
func (quiet) Started(*corev1.Node, notice.Notice)        {}
func (quiet) LeftTo(*corev1.Node, notice.Notice, string) {}
