// SPDX-License-Identifier: Apache-2.0

package nodecondition

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/record"
)

// ladder follows the repairs whose policy reboots before it replaces. The reboot runs as a
// repair of its own (cordon, drain, then RebootInstances, which the completion records in the
// node's repair memory); the reboot ends that episode (a new boot). Then the node's condition
// has NODE_REPAIR_REBOOT_WAIT to clear: cleared, the node is released without a replacement;
// still there, the repair goes on to replace it. Each step lives in the node's repair memory
// (record.Repair.Reboot), which outlives the episode, so a restart or a new leader goes on
// from where the last left.
type ladder struct {
	policies config.RepairPolicies
	wait     time.Duration // NODE_REPAIR_REBOOT_WAIT
	memory   memory
	report   Reporter
}

// next is the step after the node's reboot for the condition typ: replace, due wait after the
// reboot, or at once when the reboot could not be made; ok is false while no reboot for typ
// has been asked for.
func (l ladder) next(r *record.RepairReboot, typ string) (due time.Time, ok bool) {
	switch {
	case r == nil || r.Condition != typ:
		return time.Time{}, false
	case r.Failed != "":
		return r.Taken, true
	case r.Rebooted.IsZero():
		return time.Time{}, false
	}
	return r.Rebooted.Add(l.wait), true
}

// rememberStart writes in the node's repair memory, before its repair v is taken, when it
// starts (NODE_REPAIR_MAX_PER_HOUR counts it after its episode ends) and, for a reboot, the
// ladder's step, so that what the completion records after the reboot has a step to go to.
// One write, made before the repair's own writes begin (after them, it would meet theirs).
func rememberStart(ctx context.Context, m memory, node *corev1.Node, v verdict, now time.Time) error {
	at, typ := now.UTC().Truncate(time.Second), string(v.cond.Type)
	return m.edit(ctx, node, "remember the repair's start", func(r *record.Repair) {
		r.Started = at
		if v.notice.Action == config.PolicyReboot && (r.Reboot == nil || r.Reboot.Condition != typ) {
			r.Reboot = &record.RepairReboot{Condition: typ, Taken: at}
		}
	})
}

// over ends the node's ladder once its condition no longer has a status a policy repairs
// after the reboot: it recovered, and is released without a replacement (its episode ended
// with the reboot).
func (l ladder) over(ctx context.Context, node *corev1.Node) {
	m, err := record.ReadRepair(node)
	if err != nil || m.Reboot == nil || m.Reboot.Rebooted.IsZero() && m.Reboot.Failed == "" {
		return
	}
	r := *m.Reboot
	if slices.ContainsFunc(Matches(node, l.policies), func(x Match) bool { return string(x.Condition.Type) == r.Condition }) {
		return
	}
	if err := l.memory.edit(ctx, node, "end the repair's reboot step", func(m *record.Repair) { m.Reboot = nil }); err != nil {
		return
	}
	if !r.Rebooted.IsZero() {
		l.report.Recovered(node, r.Condition, r.Rebooted)
	}
}

// escalated says that the repair n, which replaces the node, follows its reboot.
func (l ladder) escalated(node *corev1.Node, n notice.Notice, typ string) {
	m, err := record.ReadRepair(node)
	if err != nil || m.Reboot == nil || m.Reboot.Condition != typ || n.Action != config.PolicyReplace {
		return
	}
	after := fmt.Sprintf("condition %s has not cleared %s after the reboot at %s", typ, l.wait, m.Reboot.Rebooted.UTC().Format(time.RFC3339))
	if m.Reboot.Failed != "" {
		after = "the reboot could not be made: " + m.Reboot.Failed
	}
	l.report.Escalated(node, n, after)
}
