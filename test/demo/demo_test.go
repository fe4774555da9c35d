// SPDX-License-Identifier: Apache-2.0

package demo

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"

	"lifeboat.dev/lifeboat/test/sandbox"
)

// The whole demo, as `make demo` runs it: every case must be handled as Lifeboat promises,
// and the result must say so in its structured form, not only in the printed table.
func TestDemoEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the sandbox and builds the lifeboat binary")
	}
	sandboxtest.Tools(t) // skips (or fails, under LIFEBOAT_REQUIRE_SANDBOX) without the tools
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	out := &sandboxtest.LogBuffer{}
	dir := t.TempDir()
	res, err := Run(ctx, Options{OutputDir: dir, Out: out})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	defer func() {
		if t.Failed() {
			t.Logf("demo output:\n%s", out)
			for _, f := range []string{res.Files.AgentLog, res.Files.ControllerLog} {
				t.Logf("---- %s (last lines)\n%s", f, sandbox.Tail(f, 20))
			}
		}
	}()
	if err := res.Check(); err != nil {
		t.Error(err)
	}

	if len(res.Cases) != 2 {
		t.Fatalf("%d cases, want node A and node B", len(res.Cases))
	}
	for _, c := range res.Cases {
		if c.Cordoned < 0 || c.Drained < 0 || c.Recorded < 0 || c.Notice > c.Cordoned || c.Cordoned > c.Drained {
			t.Errorf("node %s: notice %v, cordoned %v, drained %v, recorded %v; want them in that order", c.Name, c.Notice, c.Cordoned, c.Drained, c.Recorded)
		}
		// Critical pods go last: after every other evicted pod, except those a disruption
		// budget held (the critical tier does not wait behind a blocked budget).
		var lastOther, firstCritical time.Duration = -1, -1
		for _, p := range c.Evicted {
			if p.Pod == ownPod {
				continue // evicted last of all on its node (checked below)
			}
			if p.Tier == TierCritical {
				if firstCritical < 0 || p.Evicted < firstCritical {
					firstCritical = p.Evicted
				}
			} else if p.Refused == 0 {
				lastOther = max(lastOther, p.Evicted)
			}
			if p.Attempts < 1 {
				t.Errorf("node %s: pod %s evicted without an eviction request in the audit log", c.Name, p.Pod)
			}
		}
		if firstCritical < 0 || lastOther < 0 || firstCritical < lastOther {
			t.Errorf("node %s: first critical eviction %v, last other %v; want critical last", c.Name, firstCritical, lastOther)
		}
		skipped := map[string]string{}
		for _, s := range c.Skipped {
			skipped[s.Tier] = s.Reason
		}
		if !strings.Contains(skipped[TierDaemonSet], "DaemonSet") || !strings.Contains(skipped[TierMirror], "mirror") {
			t.Errorf("node %s: skipped %+v, want its DaemonSet and mirror pods left with their reasons", c.Name, c.Skipped)
		}
	}
	a, b := res.Cases[0], res.Cases[1]
	if a.Handler != "agent" || a.HasHook || a.Completions != 0 {
		t.Errorf("node A: handler %q, hook %v, %d completions; want the agent, no lifecycle action", a.Handler, a.HasHook, a.Completions)
	}
	if b.Handler != "controller" || b.Completions != 1 || b.LifecycleResult != "CONTINUE" || len(b.OnNodeAtCompletion) > 0 {
		t.Errorf("node B: handler %q, %d completions, result %q, pods on the node at completion %v; want one CONTINUE after the drain",
			b.Handler, b.Completions, b.LifecycleResult, b.OnNodeAtCompletion)
	}
	if h := b.Detach; h == nil || h.TargetGone < 0 || h.Detached < 0 || len(h.DrainingAtCompletion)+len(h.AttachedAtCompletion) > 0 || len(h.Waits) != 2 {
		t.Errorf("node B's hand-back: %+v; want its target gone, its volume detached, both waits logged, nothing held at the completion", h)
	}
	ownAt, lastOther := time.Duration(-1), time.Duration(-1)
	for _, p := range b.Evicted {
		if p.Pod == ownPod {
			ownAt = p.Evicted
		} else {
			lastOther = max(lastOther, p.Evicted)
		}
	}
	if ownAt < 0 || ownAt < lastOther {
		t.Errorf("node B: the controller's own pod evicted at %v, the node's other pods last at %v; want it evicted last", ownAt, lastOther)
	}
	f := res.Foreign
	if f.Refused < 0 || !strings.Contains(f.Reason, f.InstanceID) || f.CompleteCalls != 0 || f.ActionCompleted || f.RetryAfter <= 0 || f.InFlight != 1 {
		t.Errorf("foreign notice: %+v; want refused with a reason, no completion, its message held back", f)
	}
	if res.Quiet.Touched != "" || len(res.Quiet.Evicted) > 0 {
		t.Errorf("node C: %+v; want untouched", res.Quiet)
	}

	for _, f := range []string{res.Files.Timeline, res.Files.Summary, res.Files.AgentLog, res.Files.ControllerLog} {
		if filepath.Dir(f) != dir {
			t.Errorf("%s is not in the output directory %s", f, dir)
		}
		if st, err := os.Stat(f); err != nil || st.Size() == 0 {
			t.Errorf("%s missing or empty (%v)", f, err)
		}
	}
	if !strings.Contains(out.String(), "Every case was handled as expected.") {
		t.Error("the printed summary does not say every case was handled")
	}
	t.Logf("setup %v, whole run %v", res.Setup, res.Total)
}
