// SPDX-License-Identifier: Apache-2.0

package episode

import (
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/record"
)

// An informer's update wakes the reconciler only when the node's work changed: the process's
// own renewals and notes come back without waking it, so its backoff holds.
func TestWakes(t *testing.T) {
	inst := "i-0123456789abcdef0"
	spot := notice.Notice{ID: notice.ID(notice.SpotInterruption, inst, "terminate"), Kind: notice.SpotInterruption, Source: notice.SourceQueue,
		InstanceID: inst, Deadline: time.Now().Add(2 * time.Minute)}
	maintenance := notice.Notice{ID: "instance-event-0123", Kind: notice.ScheduledMaintenance, Source: notice.SourceQueue,
		InstanceID: inst, Deadline: time.Now().Add(48 * time.Hour)}
	renewed := time.Now().UTC().Truncate(time.Second)
	ours := &record.Owner{Origin: queueOrigin, Holder: "pod-a", Renewed: renewed.Add(-20 * time.Second)}
	theirs := &record.Owner{Origin: agentOrigin, Holder: "n1", Renewed: renewed.Add(-20 * time.Second)}

	version := 1
	edit := func(n *corev1.Node, f func(r *record.Record)) *corev1.Node {
		out := n.DeepCopy()
		record.Edit(f)(out)
		version++
		out.ResourceVersion = strconv.Itoa(version)
		return out
	}
	draining := ownedNode(t, record.PhaseDraining, ours, spot)
	cases := []struct {
		name string
		old  *corev1.Node
		cur  *corev1.Node
		want bool
	}{
		{"our claim renewed", draining, edit(draining, func(r *record.Record) { r.Owner.Renewed = renewed }), false},
		{"our claim taken by a new leader", draining, edit(draining, func(r *record.Record) { r.Owner.Holder = "pod-b" }), false},
		{"our claim given up", draining, edit(draining, func(r *record.Record) { r.Owner = nil }), false},
		{"a heartbeat recorded", draining, edit(draining, func(r *record.Record) { r.Heartbeat = &record.Heartbeat{Notice: spot.ID, Count: 1, Last: renewed} }), false},
		{"the hand-back's waits noted", draining, edit(draining, func(r *record.Record) { r.Detach = &record.Detach{Claims: []string{"ns/data"}} }), false},
		{"a status update", draining, func() *corev1.Node {
			n := draining.DeepCopy()
			n.ResourceVersion = "2"
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
			return n
		}(), false},
		{"a relist (same resourceVersion)", draining, draining.DeepCopy(), true},
		{"first sight", nil, draining, true},
		{"a notice joined", draining, edit(draining, func(r *record.Record) {
			r.Notices = append(r.Notices, maintenance.ID)
			r.Intents = append(r.Intents, record.IntentOf(maintenance, queueOrigin))
		}), true},
		{"a notice finished", draining, edit(draining, func(r *record.Record) { r.Finished = append(r.Finished, spot.ID) }), true},
		{"a notice released", draining, edit(draining, func(r *record.Record) { r.Released = append(r.Released, spot.ID) }), true},
		{"the phase moved", draining, edit(draining, func(r *record.Record) { r.Phase = record.PhaseDrained }), true},
		{"another origin claimed", draining, edit(draining, func(r *record.Record) { r.Owner = theirs }), true},
		{"another origin's claim renewed", edit(draining, func(r *record.Record) { r.Owner = theirs }),
			edit(draining, func(r *record.Record) {
				r.Owner = &record.Owner{Origin: theirs.Origin, Holder: theirs.Holder, Renewed: renewed}
			}), false},
		{"another origin gave its claim up", edit(draining, func(r *record.Record) { r.Owner = theirs }), edit(draining, func(r *record.Record) { r.Owner = nil }), true},
		{"made schedulable again", draining, func() *corev1.Node {
			n := draining.DeepCopy()
			n.ResourceVersion = "2"
			n.Spec.Unschedulable = false
			return n
		}(), true},
		{"booted again", draining, func() *corev1.Node {
			n := draining.DeepCopy()
			n.ResourceVersion = "2"
			n.Status.NodeInfo.BootID = "b2"
			return n
		}(), true},
	}
	for _, c := range cases {
		if got := Wakes(c.old, c.cur, queueOrigin); got != c.want {
			t.Errorf("%s: Wakes = %v, want %v", c.name, got, c.want)
		}
	}
}
