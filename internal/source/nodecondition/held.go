// SPDX-License-Identifier: Apache-2.0

package nodecondition

import (
	"context"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/nodes"
)

// ConditionHeld is Lifeboat's Node condition for a due repair a breaker holds: True while one
// does (its reason names the breaker, its message why), False once none does. `lifeboat
// status` lists the nodes it holds.
const ConditionHeld corev1.NodeConditionType = nodes.AnnotationPrefix + "NodeRepairHeld"

// ReasonNotHeld is ConditionHeld's reason once no breaker holds the node's repair.
const ReasonNotHeld = "NotHeld"

// heldReasons are ConditionHeld's reasons, by cause.
var heldReasons = map[string]string{
	CausePaused: "Paused", CauseShare: "UnhealthyShare", CauseGroupShare: "GroupUnhealthyShare",
	CauseMaxParallel: "MaxParallel", CauseMaxPerHour: "MaxPerHour",
}

// writeTimeout bounds one condition write: the watcher looks at the next node after it.
const writeTimeout = 10 * time.Second

// heldConditions shows on each node whether a breaker holds its due repair. One write when a
// hold starts or changes cause, one when it ends; nothing for a node never held.
type heldConditions struct {
	writer *nodes.Writer // nil: not shown (NODE_CONDITION=false, DRY_RUN)
	log    *slog.Logger
}

// show says on the node that h holds its repair.
func (c heldConditions) show(ctx context.Context, node *corev1.Node, h Hold) {
	c.set(ctx, node, corev1.NodeCondition{Type: ConditionHeld, Status: corev1.ConditionTrue, Reason: heldReasons[h.Cause],
		Message: h.Reason})
}

// clear says on the node that no breaker holds its repair, if it said one did.
func (c heldConditions) clear(ctx context.Context, node *corev1.Node) {
	if old := nodes.ConditionOf(node, ConditionHeld); old == nil || old.Status != corev1.ConditionTrue {
		return
	}
	c.set(ctx, node, corev1.NodeCondition{Type: ConditionHeld, Status: corev1.ConditionFalse, Reason: ReasonNotHeld,
		Message: "No breaker holds a repair of this node"})
}

func (c heldConditions) set(ctx context.Context, node *corev1.Node, cond corev1.NodeCondition) {
	if c.writer == nil {
		return
	}
	if old := nodes.ConditionOf(node, ConditionHeld); old != nil && old.Status == cond.Status && old.Reason == cond.Reason && old.Message == cond.Message {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	if _, err := c.writer.SetCondition(ctx, node.Name, node, cond); err != nil {
		c.log.Warn("cannot set the node's repair condition", "node", node.Name, "condition", ConditionHeld, "err", err)
	}
}

// HeldBy is the nodes whose condition says a breaker holds their due repair, and why.
func HeldBy(all []*corev1.Node) []HeldNode {
	var out []HeldNode
	for _, n := range all {
		if c := nodes.ConditionOf(n, ConditionHeld); c != nil && c.Status == corev1.ConditionTrue {
			out = append(out, HeldNode{Node: n.Name, Reason: c.Message})
		}
	}
	return out
}
