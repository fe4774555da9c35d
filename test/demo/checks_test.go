package demo

import (
	"strings"
	"testing"
	"time"
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
	return &Result{
		Cases: []Case{
			{Name: "A", Handler: "agent", Notice: 0, Cordoned: s / 2, Drained: 4 * s, Recorded: 4 * s, Completed: -1, Evicted: pods(0), Skipped: skipped},
			{Name: "B", Handler: "controller", HasHook: true, Notice: 0, Cordoned: s / 2, Drained: 5 * s, Recorded: 5 * s, Completed: 5 * s,
				Completions: 1, LifecycleResult: "CONTINUE", Evicted: pods(s),
				Skipped: append(skipped, SkippedPod{Pod: systemNamespace + "/" + ControllerPodName, Tier: TierWorkload, Reason: "Lifeboat's own pod"})},
		},
		Foreign:       Foreign{InstanceID: foreignID, Refused: s / 4, Reason: "no node in this cluster names " + foreignID, RetryAfter: 5 * time.Minute, InFlight: 1},
		Quiet:         Quiet{Node: "c"},
		CompleteCalls: 1,
	}
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
		{"own pod evicted", func(r *Result) {
			r.Cases[1].Evicted = append(r.Cases[1].Evicted, EvictedPod{Pod: systemNamespace + "/" + ControllerPodName, Tier: TierWorkload, Gone: 1})
		}, "own pod"},
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
