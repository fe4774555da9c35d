// SPDX-License-Identifier: Apache-2.0

package demo

import (
	"slices"
	"strings"
	"testing"
	"time"

	"lifeboat.dev/lifeboat/internal/events"
	"lifeboat.dev/lifeboat/test/sandbox"
)

// handled is a result in which every case went as promised.
func handled() *Result {
	s := time.Second
	pods := func(offset time.Duration) []EvictedPod {
		return []EvictedPod{
			{Pod: "shop/web-1", Tier: TierWorkload, Evicted: offset + s, Gone: offset + 2*s, Attempts: 1},
			{Pod: "shop/cache-1", Tier: TierWorkload, Evicted: offset + s, Gone: offset + 2*s, Attempts: 1},
			{Pod: "kube-system/coredns-1", Tier: TierCritical, Evicted: offset + 3*s, Gone: offset + 4*s, Attempts: 1},
		}
	}
	skipped := []SkippedPod{
		{Pod: "kube-system/log-shipper-a", Tier: TierDaemonSet, Reason: "DaemonSet pod (IGNORE_DAEMON_SETS=true)"},
		{Pod: "kube-system/kube-proxy-a", Tier: TierMirror, Reason: "mirror pod of a static pod: managed by the kubelet"},
	}
	blocked := []BlockedPod{{Pod: "shop/checkout-1", Budget: "checkout", Why: "shop/checkout-1 by PodDisruptionBudget checkout (needs 3 healthy pods and has 3)",
		Blocked: s / 2, Released: 4 * s}}
	r := &Result{
		MidDrain: MidDrainStatus{Ran: true, At: s, Output: "NODE ...\nb ...", Listed: true, Held: map[string]string{"shop/checkout-1": "checkout"}},
		Relaxed:  &Relaxation{At: 3 * s, Budget: "checkout", Change: "minAvailable 3 → 1"},
		Cases: []Case{
			{Name: "A", Handler: "agent", Notice: 0, Cordoned: s / 2, Drained: 4 * s, Recorded: 4 * s, Completed: -1, Evicted: pods(0), Skipped: skipped, Blocked: blocked},
			{Name: "B", Handler: "controller", HasHook: true, Notice: 0, Cordoned: s / 2, Drained: 5 * s, Recorded: 11 * s, Completed: 11 * s,
				Completions: 1, LifecycleResult: "CONTINUE", Evicted: append(pods(s), EvictedPod{Pod: ownPod, Tier: TierWorkload, Evicted: 6 * s, Gone: 6 * s, Attempts: 1}),
				Skipped: skipped, Detach: promisedDetach()},
		},
		Foreign:       Foreign{InstanceID: foreignID, Refused: s / 4, Reason: "no node in this cluster names " + foreignID, RetryAfter: 5 * time.Minute, InFlight: 1},
		Quiet:         Quiet{Node: "c"},
		CompleteCalls: 1,
	}
	for i := range r.Cases {
		r.Cases[i].Events = told(r.Cases[i])
	}
	return r
}

// told is the case's node Events as Lifeboat promises them: its story, in order, with an Event
// of another component first.
func told(c Case) []sandbox.NodeEvent {
	evs := []sandbox.NodeEvent{{Type: "Normal", Reason: "RegisteredNode", From: "node-controller", Message: "Node registered"}}
	for i, reason := range story(c) {
		evs = append(evs, sandbox.NodeEvent{Type: "Normal", Reason: reason, From: events.Component, Message: reason + " message", At: time.Duration(i) * time.Second})
	}
	return evs
}

// promisedDetach is node B's hand-back as promised: the instance drained from its target group
// for 10 s, the volume detached 2 s after its pod was gone, the controller waited for both,
// and nothing was held when the lifecycle action was completed.
func promisedDetach() *Detach {
	s := time.Second
	return &Detach{Target: "i-0b", TargetGroup: targetGroupName, Deregistered: 0, TargetGone: 10 * s,
		Volume: volumeName, Attachment: attachmentName, Pod: statefulPodKey, PodGone: 3 * s, Detached: 5 * s,
		Waits: []DetachWait{
			{Wait: "volumes", Outcome: WaitReleased, Logged: 11 * s},
			{Wait: "targets", Outcome: WaitReleased, Took: 6 * s, Logged: 11 * s},
		}}
}

// check must catch each way a case can go wrong; otherwise the demo (and its test) could
// report success for a broken Lifeboat.
func TestCheck(t *testing.T) {
	if p := check(handled(), nil); len(p) != 0 {
		t.Fatalf("a fully handled run has problems: %v", p)
	}
	tests := []struct {
		name  string
		spoil func(r *Result)
		want  string
	}{
		{"never cordoned", func(r *Result) { r.Cases[0].Cordoned = -1 }, "never cordoned"},
		{"never recorded drained", func(r *Result) { r.Cases[1].Recorded = -1 }, "never recorded as drained"},
		{"critical pod evicted early", func(r *Result) { r.Cases[0].Evicted[2].Evicted = 0 }, "critical pod was evicted"},
		{"critical pod not evicted", func(r *Result) { r.Cases[0].Evicted = r.Cases[0].Evicted[:2] }, "critical pod was not evicted"},
		{"DaemonSet pod evicted", func(r *Result) {
			r.Cases[0].Evicted = append(r.Cases[0].Evicted, EvictedPod{Pod: "kube-system/log-shipper-a", Tier: TierDaemonSet, Gone: 1})
			r.Cases[0].Skipped = r.Cases[0].Skipped[1:]
		}, "daemonset pod kube-system/log-shipper-a was evicted"},
		{"evicted pod never gone", func(r *Result) { r.Cases[1].Evicted[0].Gone = -1 }, "is still there"},
		{"pod left behind", func(r *Result) { r.Cases[1].Left = []string{"shop/web-9"} }, "still on the node"},
		{"skipped without a reason", func(r *Result) { r.Cases[0].Skipped[1].Reason = "" }, "neither evicted nor reported"},
		{"workload pod skipped", func(r *Result) {
			r.Cases[0].Skipped = append(r.Cases[0].Skipped, SkippedPod{Pod: "shop/web-2", Tier: TierWorkload, Reason: "uses emptyDir and DELETE_LOCAL_DATA=false"})
		}, "shop/web-2 left on the node"},
		{"own pod evicted before the others", func(r *Result) {
			r.Cases[1].Evicted[len(r.Cases[1].Evicted)-1].Evicted = 0
		}, "own pod"},
		{"own pod left on the node", func(r *Result) {
			r.Cases[1].Evicted = r.Cases[1].Evicted[:len(r.Cases[1].Evicted)-1]
			r.Cases[1].Skipped = append(r.Cases[1].Skipped, SkippedPod{Pod: ownPod, Tier: TierWorkload, Reason: "Lifeboat's own pod"})
		}, "left on the node"},
		{"lifecycle completed twice", func(r *Result) { r.Cases[1].Completions, r.CompleteCalls = 2, 2 }, "2 CompleteLifecycleAction calls"},
		{"lifecycle never completed", func(r *Result) {
			r.Cases[1].Completions, r.Cases[1].LifecycleResult, r.CompleteCalls = 0, "", 0
		}, "0 CompleteLifecycleAction calls"},
		{"lifecycle abandoned", func(r *Result) { r.Cases[1].LifecycleResult = "ABANDON" }, `result "ABANDON"`},
		{"lifecycle completed before the drain", func(r *Result) { r.Cases[1].OnNodeAtCompletion = []string{"shop/web-1"} }, "while shop/web-1 were still on the node"},
		{"completion without a hook", func(r *Result) { r.Cases[0].Completions, r.CompleteCalls = 1, 2 }, "no lifecycle hook"},
		{"completion of an unknown action", func(r *Result) { r.CompleteCalls = 2 }, "1 of them for no lifecycle action"},
		{"foreign not refused", func(r *Result) { r.Foreign.Refused, r.Foreign.Reason = -1, "" }, "did not log refusing"},
		{"foreign completed", func(r *Result) { r.Foreign.CompleteCalls, r.CompleteCalls = 1, 2 }, "want none"},
		{"foreign message deleted", func(r *Result) { r.Foreign.InFlight = 0 }, "held back"},
		{"quiet node cordoned", func(r *Result) { r.Quiet.Touched = "cordoned" }, "node C had no notice"},
		{"completed while the target drained", func(r *Result) {
			r.Cases[1].Detach.DrainingAtCompletion = []string{"i-0b in target group web (draining)"}
		}, "load balancer still held i-0b in target group web (draining)"},
		{"completed while the instance was in service", func(r *Result) {
			r.Cases[1].Detach.DrainingAtCompletion = []string{"i-0b in target group web (healthy)"}
		}, "load balancer still held i-0b"},
		{"completed while the volume was attached", func(r *Result) {
			r.Cases[1].Detach.AttachedAtCompletion = []string{"pv-db-0 (VolumeAttachment csi-db-0)"}
		}, "while pv-db-0 (VolumeAttachment csi-db-0) was still attached"},
		{"target wait cut", func(r *Result) {
			r.Cases[1].Detach.Waits[1] = DetachWait{Wait: "targets", Outcome: WaitCut, Took: 295 * time.Second, Held: "i-0b in web (draining)"}
		}, "wait for load-balancer targets to drain was cut by the deadline after 295.0s"},
		{"volume wait cut", func(r *Result) {
			r.Cases[1].Detach.Waits[0] = DetachWait{Wait: "volumes", Outcome: WaitCut, Took: 295 * time.Second, Held: "pv-db-0/csi-db-0"}
		}, "wait for volumes to detach was cut by the deadline"},
		{"target wait skipped", func(r *Result) { r.Cases[1].Detach.Waits[1].Outcome = WaitSkipped }, "load-balancer targets to drain was skipped"},
		{"target wait not logged", func(r *Result) { r.Cases[1].Detach.Waits = r.Cases[1].Detach.Waits[:1] }, "did not log the end of its wait for load-balancer targets"},
		{"instance never deregistered", func(r *Result) {
			r.Cases[1].Detach.Deregistered, r.Cases[1].Detach.TargetGone = -1, -1
		}, "never left target group web"},
		{"target never gone", func(r *Result) { r.Cases[1].Detach.TargetGone = -1 }, "never stopped draining"},
		{"volume never detached", func(r *Result) { r.Cases[1].Detach.Detached = -1 }, "volume pv-db-0 was never detached"},
		{"blocked pod never released", func(r *Result) { r.Cases[0].Blocked[0].Released = -1 }, "1 pods blocked by a PodDisruptionBudget, only 0 released"},
		{"no pod blocked", func(r *Result) { r.Cases[0].Blocked = nil }, "no pod was reported blocked by a named PodDisruptionBudget"},
		{"blocked by unnamed budgets only", func(r *Result) { r.Cases[0].Blocked[0].Budget = "" }, "no pod was reported blocked by a named PodDisruptionBudget"},
		{"budget never relaxed", func(r *Result) { r.Relaxed = nil }, "never relaxed"},
		{"status showed no pod held", func(r *Result) { r.MidDrain.Held = map[string]string{} }, "showed no pod reported blocked as held by its PodDisruptionBudget"},
		{"status showed another budget", func(r *Result) {
			r.MidDrain.Held = map[string]string{"shop/checkout-1": "web"}
		}, "showed no pod reported blocked as held by its PodDisruptionBudget"},
		{"status not run", func(r *Result) { r.MidDrain = MidDrainStatus{} }, "lifeboat status was not run mid-drain"},
		{"status failed", func(r *Result) {
			r.MidDrain.Err, r.MidDrain.Listed = "signal: killed", false
		}, "lifeboat status mid-drain failed: signal: killed"},
		{"no Events on a node", func(r *Result) { r.Cases[0].Events = nil }, "A: no Events on the node"},
		{"drained Event missing", func(r *Result) {
			r.Cases[1].Events = slices.DeleteFunc(r.Cases[1].Events, func(e sandbox.NodeEvent) bool { return e.Reason == events.ReasonDrained })
		}, "node B: its Events, oldest first, lack CordonAndDrain"},
		{"lifecycle completion told before the drain", func(r *Result) {
			evs := r.Cases[1].Events
			last := evs[len(evs)-1]
			r.Cases[1].Events = append([]sandbox.NodeEvent{last}, evs[:len(evs)-1]...)
		}, "lack LifecycleActionCompleted in the order ASGLifecycle, Cordon, DrainStarted, CordonAndDrain, HandbackWaited, LifecycleActionCompleted"},
		{"another component's Event in the story's place", func(r *Result) {
			for i := range r.Cases[0].Events {
				if r.Cases[0].Events[i].Reason == events.ReasonCordon {
					r.Cases[0].Events[i].From = "kubectl"
				}
			}
		}, "node A: its Events, oldest first, lack Cordon"},
		{"status listed no node", func(r *Result) {
			r.MidDrain.Output, r.MidDrain.Listed = "No node is in an interruption episode.", false
		}, "listed no node"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := handled()
			tt.spoil(r)
			problems := check(r, nil)
			if !strings.Contains(strings.Join(problems, "\n"), tt.want) {
				t.Errorf("problems %q, want one mentioning %q", problems, tt.want)
			}
			if r.Problems = problems; r.Check() == nil {
				t.Error("Check() is nil for a result with problems")
			}
		})
	}
}

// A pod a disruption budget held may leave after the critical pods: the critical tier does not
// wait behind a blocked budget.
func TestCheckCriticalAfterBudgetHeldPod(t *testing.T) {
	r := handled()
	held := &r.Cases[0].Evicted[0]
	held.Refused, held.Evicted, held.Gone = 4, r.Cases[0].Evicted[2].Evicted+time.Second, r.Cases[0].Evicted[2].Evicted+2*time.Second
	if p := check(r, nil); len(p) != 0 {
		t.Errorf("a budget-held pod leaving after the critical pod was reported: %v", p)
	}
	held.Refused = 0
	if p := check(r, nil); len(p) == 0 {
		t.Error("a pod no budget held, evicted after the critical pod, was not reported")
	}
}
