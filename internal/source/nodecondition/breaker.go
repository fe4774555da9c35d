// SPDX-License-Identifier: Apache-2.0

package nodecondition

import (
	"fmt"
	"slices"
	"sort"
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

// Limits bound repairs (the breakers): NODE_REPAIR_MAX_UNHEALTHY_PERCENT,
// NODE_REPAIR_MAX_PARALLEL, NODE_REPAIR_MAX_PER_HOUR and NODE_REPAIR_PAUSED.
type Limits struct {
	// MaxUnhealthyPercent: while more than this share of the cluster's nodes, or of a node
	// group's, are unhealthy by the configured conditions (whether or not for their duration),
	// no new repair starts there. The share allows the percent of the nodes rounded up, so
	// that a small group or cluster can repair one node.
	MaxUnhealthyPercent int
	// MaxParallel caps the repairs running at once (recorded, not yet finished); 0 = no cap.
	MaxParallel int
	// MaxPerHour caps the nodes whose repair started within the last hour; 0 = no cap.
	MaxPerHour int
	// Paused holds every new repair.
	Paused bool
}

// LimitsOf are the configured limits.
func LimitsOf(c *config.Config) Limits {
	return Limits{MaxUnhealthyPercent: c.NodeRepairMaxUnhealthyPercent, MaxParallel: c.NodeRepairMaxParallel,
		MaxPerHour: c.NodeRepairMaxPerHour, Paused: c.NodeRepairPaused}
}

// Causes of a held repair: the breaker that holds it (the metric label of
// lifeboat_node_repair_breaker_open).
const (
	CausePaused       = "paused"
	CauseShare        = "unhealthy_share"
	CauseGroupShare   = "group_unhealthy_share"
	CauseMaxParallel  = "max_parallel"
	CauseMaxPerHour   = "max_per_hour"
	startedWithinHour = time.Hour
	// clockSkew is how far past this process's clock another's write may be.
	clockSkew = time.Minute
)

// Breaker is the state of the cluster's repairs, as read from its Nodes.
type Breaker struct {
	Nodes     int `json:"nodes"`     // the cluster's nodes
	Unhealthy int `json:"unhealthy"` // nodes with a condition a policy repairs, however long
	Running   int `json:"running"`   // repairs recorded and not finished
	// Started counts the nodes whose repair started within the last hour.
	Started int `json:"startedLastHour"`
	// Open says no new repair starts anywhere in the cluster, and Reason why ("" when closed).
	Open   bool   `json:"open"`
	Reason string `json:"reason,omitempty"`
	// Cause is the metric label of the reason (CausePaused, ...).
	Cause string `json:"-"`
	// Groups are the node groups whose own breaker is open (CountGroups).
	Groups []Group `json:"openGroups,omitempty"`
	// Held are the nodes whose due repair a breaker holds, as their condition says.
	Held []HeldNode `json:"held,omitempty"`

	limits Limits
	shares map[string]Group // every group's share, by name
}

// Group is the share of one node group: its Auto Scaling group, or the node-group label its
// nodes carry (see groups.of).
type Group struct {
	Name      string `json:"name"`
	Nodes     int    `json:"nodes"`
	Unhealthy int    `json:"unhealthy"`
}

// HeldNode is a node whose due repair a breaker holds.
type HeldNode struct {
	Node   string `json:"node"`
	Reason string `json:"reason"`
}

// Hold is why a due repair does not start: the breaker (Cause) and its Reason; the zero Hold
// holds nothing.
type Hold struct {
	Cause  string
	Reason string
}

// Tally is what Assess counts beyond the Nodes.
type Tally struct {
	// Pending are repairs handed to intake and not yet seen on their Node (counted as running).
	Pending int
	// Started counts the nodes whose repair started within the last hour.
	Started int
}

// allowed is how many of n nodes may be unhealthy under percent: rounded up, so that one
// node of a group of three, or of a cluster of four, may be repaired at 20 %.
func allowed(n, percent int) int { return (n*percent + 99) / 100 }

// Assess reads the cluster-wide breaker's state from the cluster's nodes.
func Assess(all []*corev1.Node, policies config.RepairPolicies, l Limits, t Tally) Breaker {
	b := Breaker{Nodes: len(all), Running: t.Pending, Started: t.Started, limits: l}
	for _, n := range all {
		if Unhealthy(n, policies) {
			b.Unhealthy++
		}
		if RepairRunning(n) {
			b.Running++
		}
	}
	switch {
	case l.Paused:
		b.Open, b.Cause, b.Reason = true, CausePaused, "NODE_REPAIR_PAUSED=true"
	case b.Unhealthy > allowed(b.Nodes, l.MaxUnhealthyPercent):
		b.Open, b.Cause = true, CauseShare
		b.Reason = fmt.Sprintf("%d of %d nodes unhealthy, more than the %d that NODE_REPAIR_MAX_UNHEALTHY_PERCENT=%d%% allows",
			b.Unhealthy, b.Nodes, allowed(b.Nodes, l.MaxUnhealthyPercent), l.MaxUnhealthyPercent)
	case l.MaxParallel > 0 && b.Running >= l.MaxParallel:
		b.Open, b.Cause = true, CauseMaxParallel
		b.Reason = fmt.Sprintf("%d repairs running, NODE_REPAIR_MAX_PARALLEL=%d", b.Running, l.MaxParallel)
	case l.MaxPerHour > 0 && b.Started >= l.MaxPerHour:
		b.Open, b.Cause = true, CauseMaxPerHour
		b.Reason = fmt.Sprintf("%d repairs started in the last hour, NODE_REPAIR_MAX_PER_HOUR=%d", b.Started, l.MaxPerHour)
	}
	return b
}

// CountGroups counts each node group's share of unhealthy nodes (groupOf names a node's
// group, "" for none: such a node counts for the cluster only), and lists the groups whose
// own breaker is open.
func (b *Breaker) CountGroups(all []*corev1.Node, policies config.RepairPolicies, groupOf func(*corev1.Node) string) {
	b.shares = map[string]Group{}
	for _, n := range all {
		name := groupOf(n)
		if name == "" {
			continue
		}
		g := b.shares[name]
		g.Name = name
		g.Nodes++
		if Unhealthy(n, policies) {
			g.Unhealthy++
		}
		b.shares[name] = g
	}
	b.Groups = nil
	for _, g := range b.shares {
		if g.Unhealthy > allowed(g.Nodes, b.limits.MaxUnhealthyPercent) {
			b.Groups = append(b.Groups, g)
		}
	}
	sort.Slice(b.Groups, func(i, j int) bool { return b.Groups[i].Name < b.Groups[j].Name })
}

// Hold is what holds a due repair of a node of group ("" for none): the cluster-wide breaker
// when it is open, else the group's.
func (b Breaker) Hold(group string) Hold {
	if b.Open {
		return Hold{Cause: b.Cause, Reason: b.Reason}
	}
	g, ok := b.shares[group]
	if !ok || g.Unhealthy <= allowed(g.Nodes, b.limits.MaxUnhealthyPercent) {
		return Hold{}
	}
	return Hold{Cause: CauseGroupShare, Reason: fmt.Sprintf("%d of %d nodes of %s unhealthy, more than the %d that NODE_REPAIR_MAX_UNHEALTHY_PERCENT=%d%% allows",
		g.Unhealthy, g.Nodes, g.Name, allowed(g.Nodes, b.limits.MaxUnhealthyPercent), b.limits.MaxUnhealthyPercent)}
}

// MetricCause is the cause lifeboat_node_repair_breaker_open shows: the cluster-wide
// breaker's when it is open, else group_unhealthy_share while some group's is, else "".
func (b Breaker) MetricCause() string {
	if b.Open || len(b.Groups) == 0 {
		return b.Cause
	}
	return CauseGroupShare
}

// Unhealthy reports whether a policy repairs one of the node's conditions, however long it
// has had its status.
func Unhealthy(n *corev1.Node, policies config.RepairPolicies) bool {
	return len(Matches(n, policies)) > 0
}

// RepairRunning reports whether the node's open episode holds a repair not finished yet.
func RepairRunning(n *corev1.Node) bool {
	r, ok := readRecord(n)
	if !ok || !r.Open() {
		return false
	}
	return slices.ContainsFunc(r.Intents, func(i record.Intent) bool {
		return notice.Kind(i.Kind).Ends() == notice.EndsRepaired && !slices.Contains(r.Finished, i.ID)
	})
}

// RecordedStarts are the nodes whose repair started within the hour before now, as their
// records and repair memories say (node name -> when). A start later than now, past the
// clocks' skew, is not counted: a node's credential writes its own annotations, and such a
// start would hold NODE_REPAIR_MAX_PER_HOUR for ever; each node counts once at most.
func RecordedStarts(all []*corev1.Node, now time.Time) map[string]time.Time {
	out := map[string]time.Time{}
	since, until := now.Add(-startedWithinHour), now.Add(clockSkew)
	note := func(name string, at time.Time) {
		if at.After(since) && !at.After(until) && at.After(out[name]) {
			out[name] = at
		}
	}
	for _, n := range all {
		if m, err := record.ReadRepair(n); err == nil {
			note(n.Name, m.Started)
		}
		r, ok := readRecord(n)
		if !ok {
			continue
		}
		for _, i := range r.Intents {
			if notice.Kind(i.Kind).Ends() == notice.EndsRepaired {
				note(n.Name, i.Announced)
			}
		}
	}
	return out
}

// readRecord is the node's record, when it has one that reads.
func readRecord(n *corev1.Node) (record.Record, bool) {
	if n.Annotations[record.Annotation] == "" {
		return record.Record{}, false
	}
	r, err := record.Read(n)
	return r, err == nil
}

// Vetoed reports whether an operator vetoed repairs of the node.
func Vetoed(n *corev1.Node) bool { return n.Annotations[AnnotationVeto] == VetoValue }
