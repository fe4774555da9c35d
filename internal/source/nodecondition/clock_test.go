// SPDX-License-Identifier: Apache-2.0

package nodecondition

import (
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/record"
)

func withReason(c corev1.NodeCondition, reason string) corev1.NodeCondition {
	c.Reason = reason
	return c
}

// A condition whose agent restates its transition time under the same status keeps its
// clock, and says so once per restatement; a change of status restarts it; a process that
// starts takes the kept clock from the node when the condition has not moved since.
func TestClocks(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	c := &clocks{watched: config.RepairPolicies{{Condition: "KernelReady", Status: "False", Action: config.PolicyReplace}}.Acts,
		seen: map[string]map[string]clock{}}
	n := node("aws:///us-east-1a/i-1", withReason(cond("KernelReady", corev1.ConditionFalse, t0), "A"))
	c.observe(n)
	since := func() time.Time { return c.since("n", n.Status.Conditions[0]) }
	if !since().Equal(t0) || len(c.restated(n)) != 0 {
		t.Fatalf("first sight: since %v", since())
	}
	t1 := t0.Add(10 * time.Minute)
	n.Status.Conditions[0] = withReason(cond("KernelReady", corev1.ConditionFalse, t1), "B") // a new reason restates the time
	c.observe(n)
	if !since().Equal(t0) {
		t.Errorf("after a restatement: since %v, want %v", since(), t0)
	}
	got := c.restated(n)
	if len(got) != 1 || got[0] != (record.ConditionClock{Type: "KernelReady", Status: "False", Since: t0, Restated: t1}) {
		t.Errorf("restated %+v", got)
	}
	if again := c.restated(n); len(again) != 0 {
		t.Errorf("the restatement was told twice: %+v", again)
	}

	// A process that starts now finds the kept clock, and counts from t0.
	b, _ := json.Marshal(record.Repair{Clocks: got})
	n.Annotations = map[string]string{record.AnnotationRepair: string(b)}
	fresh := &clocks{watched: c.watched, seen: map[string]map[string]clock{}}
	fresh.observe(n)
	if s := fresh.since("n", n.Status.Conditions[0]); !s.Equal(t0) {
		t.Errorf("after a restart: since %v, want the kept %v", s, t0)
	}
	if r := fresh.restated(n); len(r) != 0 {
		t.Errorf("the kept restatement was told again after a restart: %+v", r)
	}
	// ... but not once the condition moved while no process watched.
	n.Status.Conditions[0] = cond("KernelReady", corev1.ConditionFalse, t1.Add(time.Minute))
	other := &clocks{watched: c.watched, seen: map[string]map[string]clock{}}
	other.observe(n)
	if s := other.since("n", n.Status.Conditions[0]); !s.Equal(t1.Add(time.Minute)) {
		t.Errorf("moved while away: since %v, want its own time", s)
	}

	// A change of status restarts the clock.
	t2 := t1.Add(time.Hour)
	n.Annotations = nil
	n.Status.Conditions[0] = cond("KernelReady", corev1.ConditionTrue, t2)
	c.observe(n)
	t3 := t2.Add(time.Minute)
	n.Status.Conditions[0] = cond("KernelReady", corev1.ConditionFalse, t3)
	c.observe(n)
	if !since().Equal(t3) {
		t.Errorf("after recovering and failing again: since %v, want %v", since(), t3)
	}
	c.forget("n")
	if len(c.seen) != 0 {
		t.Error("a deleted node is still kept")
	}
}

func TestStale(t *testing.T) {
	now := time.Now()
	at := func(c corev1.NodeCondition, hb time.Time) corev1.NodeCondition {
		c.LastHeartbeatTime = metav1.NewTime(hb)
		return c
	}
	ready := at(cond("Ready", corev1.ConditionTrue, now.Add(-time.Hour)), now)
	for _, tc := range []struct {
		name  string
		conds []corev1.NodeCondition
		after time.Duration
		stale bool
	}{
		{"refreshed", []corev1.NodeCondition{ready, at(cond("KernelReady", corev1.ConditionFalse, now), now.Add(-5*time.Minute))}, 15 * time.Minute, false},
		{"latched", []corev1.NodeCondition{ready, at(cond("KernelReady", corev1.ConditionFalse, now), now.Add(-time.Hour))}, 15 * time.Minute, true},
		{"latched, judging off", []corev1.NodeCondition{ready, at(cond("KernelReady", corev1.ConditionFalse, now), now.Add(-time.Hour))}, 0, false},
		{"no heartbeat", []corev1.NodeCondition{ready, cond("KernelReady", corev1.ConditionFalse, now)}, 15 * time.Minute, false},
		{"kubelet silent too", []corev1.NodeCondition{at(cond("Ready", corev1.ConditionUnknown, now), now.Add(-2*time.Hour)),
			at(cond("KernelReady", corev1.ConditionFalse, now), now.Add(-3*time.Hour))}, 15 * time.Minute, false},
		{"no Ready", []corev1.NodeCondition{at(cond("KernelReady", corev1.ConditionFalse, now), now.Add(-time.Hour))}, 15 * time.Minute, false},
	} {
		n := node("aws:///us-east-1a/i-1", tc.conds...)
		if _, got := Stale(n, tc.conds[len(tc.conds)-1], tc.after); got != tc.stale {
			t.Errorf("%s: stale %v, want %v", tc.name, got, tc.stale)
		}
	}
	n := node("", ready)
	if _, got := Stale(n, ready, time.Nanosecond); got {
		t.Error("Ready itself was judged stale")
	}
}
