// SPDX-License-Identifier: Apache-2.0

package nodecondition

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/record"
)

// clocks keep, per node and condition type, since when the condition has had a status a
// repair acts on, as this process saw it through every update of the Node. A condition's own
// lastTransitionTime is the clock; but some agents restate it under the same status (each new
// reason, each restart of the agent), and a repair counted from the latest restatement would
// never come due. So a restatement does not restart the clock: only a change of status does.
// A process that starts finds the clock a restatement kept in the node's repair memory
// (record.Repair.Clocks), when the condition has not moved since.
type clocks struct {
	// watched says whether the condition type's status is one a repair acts on.
	watched func(typ, status string) bool

	mu   sync.Mutex
	seen map[string]map[string]clock // node -> condition type -> clock
}

type clock struct {
	status string
	since  time.Time // the earliest transition time seen while the status held
	// told is the transition time whose restatement was last reported (and remembered).
	told time.Time
}

// observe takes one update of the node (the informer's, in order).
func (c *clocks) observe(n *corev1.Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.seen[n.Name]
	now := make(map[string]clock, len(old))
	var kept *record.Repair
	for _, cond := range n.Status.Conditions {
		typ, status, at := string(cond.Type), string(cond.Status), cond.LastTransitionTime.Time
		if !c.watched(typ, status) {
			continue
		}
		if prev, ok := old[typ]; ok && prev.status == status {
			prev.since = earliest(prev.since, at)
			now[typ] = prev
			continue
		}
		k := clock{status: status, since: at}
		if kept == nil {
			r, _ := record.ReadRepair(n)
			kept = &r
		}
		// Kept while this process was away: good only if the condition did not move since.
		if m, ok := kept.Clock(typ); ok && m.Status == status && m.Restated.Equal(at) {
			k.since, k.told = earliest(m.Since, at), at
		}
		now[typ] = k
	}
	if len(now) == 0 {
		delete(c.seen, n.Name)
		return
	}
	c.seen[n.Name] = now
}

// since is since when the node's condition has had its status: the clock when it is kept for
// that status, else the condition's own transition time.
func (c *clocks) since(node string, cond corev1.NodeCondition) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if k, ok := c.seen[node][string(cond.Type)]; ok && k.status == string(cond.Status) {
		return earliest(k.since, cond.LastTransitionTime.Time)
	}
	return cond.LastTransitionTime.Time
}

// restated is the node's conditions whose transition time moved under the same status and
// was not told yet: each is told once per restatement (see told).
func (c *clocks) restated(n *corev1.Node) []record.ConditionClock {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []record.ConditionClock
	for _, cond := range n.Status.Conditions {
		typ, at := string(cond.Type), cond.LastTransitionTime.Time
		k, ok := c.seen[n.Name][typ]
		if !ok || k.status != string(cond.Status) || !k.since.Before(at) || k.told.Equal(at) {
			continue
		}
		k.told = at
		c.seen[n.Name][typ] = k
		out = append(out, record.ConditionClock{Type: typ, Status: k.status, Since: k.since, Restated: at})
	}
	return out
}

// forget drops what is kept of a node that is gone.
func (c *clocks) forget(node string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.seen, node)
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
