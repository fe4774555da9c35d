// SPDX-License-Identifier: Apache-2.0

package nodecondition

import (
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/record"
)

type ladderReports struct {
	quiet
	recovered []string
	escalated []string
}

func (r *ladderReports) Recovered(_ *corev1.Node, condition string, _ time.Time) {
	r.recovered = append(r.recovered, condition)
}

func (r *ladderReports) Escalated(_ *corev1.Node, n notice.Notice, after string) {
	r.escalated = append(r.escalated, n.ID+": "+after)
}

func withReboot(n *corev1.Node, r *record.RepairReboot) *corev1.Node {
	if r != nil {
		b, _ := json.Marshal(record.Repair{Reboot: r})
		n.Annotations = map[string]string{record.AnnotationRepair: string(b)}
	}
	return n
}

// A policy that reboots: the first repair reboots (its own notice); once the node was
// rebooted for the condition, the repair that follows replaces it, NODE_REPAIR_REBOOT_WAIT
// after the reboot (at once after a failed reboot); a node whose condition cleared after its
// reboot is released, once.
func TestLadder(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	reports := &ladderReports{}
	w, err := New(Options{Nodes: cache.NewSharedIndexInformer(nil, &corev1.Node{}, 0, nil), DrainTimeout: time.Minute, Now: func() time.Time { return now },
		RebootWait: 10 * time.Minute, Report: reports,
		Policies: config.RepairPolicies{{Condition: "AcceleratedHardwareReady", Status: "False", Wait: 10 * time.Minute, Action: config.PolicyReboot},
			{Condition: "KernelReady", Status: "False", Wait: 30 * time.Minute, Action: config.PolicyReplace}}})
	if err != nil {
		t.Fatal(err)
	}
	const provider = "aws:///us-east-1a/i-0123456789abcdef0"
	sick := func() corev1.NodeCondition {
		return cond("AcceleratedHardwareReady", corev1.ConditionFalse, now.Add(-time.Hour))
	}
	taken := now.Add(-20 * time.Minute)
	for _, tc := range []struct {
		name   string
		reboot *record.RepairReboot
		due    bool
		wait   time.Duration
		action string
		id     string
	}{
		{name: "first, a reboot", due: true, action: config.PolicyReboot, id: "repair-i-0123456789abcdef0-reboot-acceleratedhardwareready"},
		{name: "the reboot under way", reboot: &record.RepairReboot{Condition: "AcceleratedHardwareReady", Taken: taken},
			due: true, action: config.PolicyReboot, id: "repair-i-0123456789abcdef0-reboot-acceleratedhardwareready"},
		{name: "rebooted, waiting", reboot: &record.RepairReboot{Condition: "AcceleratedHardwareReady", Taken: taken, Rebooted: now.Add(-time.Minute)},
			wait: 9 * time.Minute},
		{name: "rebooted, still sick", reboot: &record.RepairReboot{Condition: "AcceleratedHardwareReady", Taken: taken, Rebooted: now.Add(-11 * time.Minute)},
			due: true, action: config.PolicyReplace, id: "repair-i-0123456789abcdef0-acceleratedhardwareready"},
		{name: "the reboot failed", reboot: &record.RepairReboot{Condition: "AcceleratedHardwareReady", Taken: taken, Failed: "denied"},
			due: true, action: config.PolicyReplace, id: "repair-i-0123456789abcdef0-acceleratedhardwareready"},
		{name: "rebooted for another condition", reboot: &record.RepairReboot{Condition: "GPU", Taken: taken, Rebooted: now.Add(-time.Minute)},
			due: true, action: config.PolicyReboot, id: "repair-i-0123456789abcdef0-reboot-acceleratedhardwareready"},
	} {
		n, due, wait := w.Evaluate(withReboot(node(provider, sick()), tc.reboot))
		if due != tc.due || wait != tc.wait || n.ID != tc.id || n.Action != tc.action {
			t.Errorf("%s: due %v wait %v id %q action %q; want %v %v %q %q", tc.name, due, wait, n.ID, n.Action, tc.due, tc.wait, tc.id, tc.action)
		}
	}

	// Recovered: the condition cleared after the reboot.
	rebooted := &record.RepairReboot{Condition: "AcceleratedHardwareReady", Taken: taken, Rebooted: now.Add(-time.Minute)}
	w.ladder.over(t.Context(), withReboot(node(provider, cond("AcceleratedHardwareReady", corev1.ConditionTrue, now)), rebooted))
	w.ladder.over(t.Context(), withReboot(node(provider, sick()), rebooted))
	w.ladder.over(t.Context(), withReboot(node(provider), &record.RepairReboot{Condition: "AcceleratedHardwareReady", Taken: taken}))
	if len(reports.recovered) != 1 {
		t.Errorf("recovered %v, want the cleared condition once (not the sick one, nor one not rebooted yet)", reports.recovered)
	}
	// Escalated: the replacement follows a reboot.
	n, _, _ := w.Evaluate(withReboot(node(provider, sick()), &record.RepairReboot{Condition: "AcceleratedHardwareReady", Taken: taken, Rebooted: now.Add(-11 * time.Minute)}))
	w.ladder.escalated(withReboot(node(provider, sick()), &record.RepairReboot{Condition: "AcceleratedHardwareReady", Taken: taken, Rebooted: now.Add(-11 * time.Minute)}),
		n, "AcceleratedHardwareReady")
	if len(reports.escalated) != 1 {
		t.Errorf("escalated %v, want one", reports.escalated)
	}
}
