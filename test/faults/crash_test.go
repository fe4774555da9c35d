// SPDX-License-Identifier: Apache-2.0

package faults

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/episode"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/test/sandbox"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// crashPlan is one trial's random schedule: the handler is killed after each delay (measured
// from that run's start) and started again at once; the held pods are released at releaseAt
// from the first start. Afterwards a last run must finish the work.
type crashPlan struct {
	kills     []time.Duration
	releaseAt time.Duration
}

func newCrashPlan(r *rand.Rand, maxKill time.Duration) crashPlan {
	p := crashPlan{releaseAt: between(r, time.Second, 8*time.Second)}
	for range 1 + r.IntN(3) {
		p.kills = append(p.kills, between(r, 200*time.Millisecond, maxKill))
	}
	return p
}

func (p crashPlan) String() string {
	ks := make([]string, len(p.kills))
	for i, k := range p.kills {
		ks[i] = k.Round(time.Millisecond).String()
	}
	return fmt.Sprintf("kills after %s; held pods released at %s", strings.Join(ks, ", "), p.releaseAt.Round(time.Millisecond))
}

// execute runs the plan: it returns where each kill landed (described by stage, called
// right after the kill) once the last run has been started.
func (p crashPlan) execute(ctx context.Context, t *testing.T, lb *lifeboat, release func() error, stage func() string) []string {
	t.Helper()
	var releaseErr error
	var released sync.WaitGroup
	released.Add(1)
	timer := time.AfterFunc(p.releaseAt, func() { defer released.Done(); releaseErr = release() })
	t.Cleanup(func() {
		if timer.Stop() {
			released.Done()
		}
		released.Wait()
		if releaseErr != nil {
			t.Errorf("release held pods: %v", releaseErr)
		}
	})
	var landed []string
	for _, d := range p.kills {
		lb.Start()
		if err := sleep(ctx, d); err != nil {
			t.Fatal(err)
		}
		lb.Kill()
		landed = append(landed, stage())
	}
	lb.Start()
	return landed
}

// tally sums up trials for the report.
type tally struct {
	mu                     sync.Mutex
	trials, survived, lost int
	refused, kills         int
	landed                 map[string]int
}

func (ta *tally) add(failed bool, lost int, landed []string) {
	ta.mu.Lock()
	defer ta.mu.Unlock()
	ta.trials++
	if !failed {
		ta.survived++
	}
	ta.lost += lost
	ta.kills += len(landed)
	if ta.landed == nil {
		ta.landed = map[string]int{}
	}
	for _, l := range landed {
		ta.landed[landedPhase(l)]++
	}
}

// landedPhase groups kill points by phase (the eviction count varies too much to group by).
func landedPhase(stage string) string {
	phase, _, _ := strings.Cut(stage, ",")
	return phase
}

// testCrash kills the handler at random points of drains, in both modes.
func testCrash(t *testing.T, w *world) {
	t.Run("agent", func(t *testing.T) {
		r := seeded(t)
		var ta tally
		for i := range pick(2, 12) {
			t.Run(fmt.Sprintf("trial-%d", i), func(t *testing.T) {
				landed, drained := agentCrashTrial(t, w, r)
				lost := 0
				if !drained {
					lost = 1
				}
				ta.add(t.Failed(), lost, landed)
			})
		}
		report(t, result{Fault: "SIGKILL at random points of a drain, restart at once", Mode: "agent (IMDS spot notice)",
			Trials: ta.trials, Survived: ta.survived, NoticesLost: ta.lost, Run: "TestFaults/crash/agent",
			Notes: fmt.Sprintf("%d kills; landed: %s; each of 5 pods evicted once per trial", ta.kills, FormatCounts(ta.landed))})
	})
	t.Run("controller", func(t *testing.T) {
		r := seeded(t)
		trials := pick(2, 12)
		names := make([]string, trials)
		for i := range names {
			names[i] = fmt.Sprintf("crash-%d", i)
		}
		qs := newQueues(t, w, names...)
		var ta tally
		for i := range trials {
			t.Run(fmt.Sprintf("trial-%d", i), func(t *testing.T) {
				landed, lost, refused := controllerCrashTrial(t, w, qs, names[i], r)
				ta.add(t.Failed(), lost, landed)
				ta.refused += refused
			})
		}
		report(t, result{Fault: "SIGKILL at random points of a drain, restart at once", Mode: "controller (Spot warning + 2 copies of a hook message for one node, 2 copies of a hook message for another)",
			Trials: ta.trials, Survived: ta.survived, NoticesLost: ta.lost, Run: "TestFaults/crash/controller",
			Notes: fmt.Sprintf("%d kills; landed: %s; %d repeated CompleteLifecycleAction refused by Auto Scaling (tolerated)", ta.kills, FormatCounts(ta.landed), ta.refused)})
	})
}

// agentCrashTrial: one node with a spot notice in its metadata; the agent is killed one to
// three times while it cordons and drains. It reports where the kills landed and whether the
// node ended drained.
func agentCrashTrial(t *testing.T, w *world, r *rand.Rand) (landed []string, drained bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	node := w.addNodes(t, 1)[0]
	pods := w.addPods(t, node, podSpec{hold: true}, podSpec{hold: true}, podSpec{hold: true}, podSpec{}, podSpec{critical: true})
	instance := episode.InstanceIDOf(node)
	m := sandboxtest.IMDS(t, sandbox.IMDSOptions{InstanceID: instance, Hostname: node.Name,
		Args: []string{"spot", "-a", "terminate", "-t", time.Now().Add(2 * time.Minute).UTC().Format(time.RFC3339)}})
	user := "lifeboat-agent-" + shortName(node)
	lb := newLifeboat(t, w.dir, user, []string{"agent"}, "KUBECONFIG="+w.kubeconfig(t, user), "NODE_NAME="+node.Name,
		"INSTANCE_METADATA_URL="+m.URL, "IMDS_POLL_INTERVAL=100ms", "POD_NAME=lifeboat-agent", "NAMESPACE=kube-system")

	plan := newCrashPlan(r, 4*time.Second)
	t.Logf("node %s: %s", node.Name, plan)
	landed = plan.execute(ctx, t, lb,
		func() error { return w.releaseHeld(ctx, node.Name) },
		func() string { return w.stage(ctx, []string{node.Name}, len(EvictionsByPod(w.audit(t, user)))) })
	t.Logf("kills landed at: %s", strings.Join(landed, "; "))

	drained = w.waitDrained(ctx, node.Name, 90*time.Second)
	if !drained {
		t.Errorf("node %s never drained after %d runs", node.Name, lb.Runs())
	}
	time.Sleep(2 * time.Second) // anything repeated would show now
	lb.Stop()

	rec, err := w.record(ctx, node.Name)
	if want := notice.ID(notice.SpotInterruption, instance, "terminate"); err != nil || !slices.Equal(rec.Notices, []string{want}) {
		t.Errorf("record %+v (err %v), want the one notice %s", rec, err, want)
	}
	if left, err := w.podsOn(ctx, node.Name); err != nil || len(left) != 0 {
		t.Errorf("pods left on the node: %v (err %v)", left, err)
	}
	w.checkEvictions(t, user, pods)
	if exits := lb.Exits(); len(exits) > 0 {
		t.Errorf("lifeboat exited on its own: %v", exits)
	}
	return landed, drained
}

// controllerCrashTrial: two nodes; a spot warning and two copies of a terminate hook message
// for one, two copies of a hook message for the other. The controller is killed one to three
// times. It reports where the kills landed, how many of its three notices were not completed,
// and how many repeated completions Auto Scaling refused.
func controllerCrashTrial(t *testing.T, w *world, qs *queues, queue string, r *rand.Rand) (landed []string, lost, refused int) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	nodes := w.addNodes(t, 2)
	a, b := nodes[0], nodes[1]
	pods := append(w.addPods(t, a, podSpec{hold: true}, podSpec{hold: true}, podSpec{}), w.addPods(t, b, podSpec{hold: true}, podSpec{})...)
	qs.addInstances(a, b)
	now := time.Now()
	// Per node, its distinct notices; each hook message is sent twice.
	tokens := []string{qs.beginTermination(a), qs.beginTermination(b)}
	spotBody, spotA := spot(a, now)
	hookBodyA, hookA := hook(a, tokens[0], now)
	hookBodyB, hookB := hook(b, tokens[1], now)
	bodies := []string{spotBody, hookBodyA, hookBodyA, hookBodyB, hookBodyB}
	about := []delivery{spotA, hookA, hookA, hookB, hookB}
	distinct := map[*corev1.Node][]delivery{a: {spotA, hookA}, b: {hookB}}
	qs.send(t, queue, bodies, about, 1)

	user := "lifeboat-controller-" + queue
	leaseNS := "lifeboat-" + queue // a Lease of its own: a failed trial's lingering Lease delays no other
	if err := w.c.EnsureNamespace(ctx, leaseNS); err != nil {
		t.Fatal(err)
	}
	env := qs.controllerEnv(queue, w.kubeconfig(t, user), "lifeboat-0", "NAMESPACE="+leaseNS, "SQS_MSG_VISIBILITY_TIMEOUT_SEC=4")
	lb := newLifeboat(t, w.dir, user, []string{"controller"}, env...)

	plan := newCrashPlan(r, 5*time.Second)
	t.Logf("nodes %s, %s: %s", a.Name, b.Name, plan)
	landed = plan.execute(ctx, t, lb,
		func() error { return errors.Join(w.releaseHeld(ctx, a.Name), w.releaseHeld(ctx, b.Name)) },
		func() string {
			return w.stage(ctx, []string{a.Name, b.Name}, len(EvictionsByPod(w.audit(t, user))))
		})
	t.Logf("kills landed at: %s", strings.Join(landed, "; "))

	for _, n := range []*corev1.Node{a, b} {
		if !w.waitDrained(ctx, n.Name, 90*time.Second) {
			t.Errorf("node %s never drained after %d runs", n.Name, lb.Runs())
		}
	}
	if !qs.waitEmpty(ctx, queue, 90*time.Second) {
		n, err := qs.length(ctx, queue)
		t.Errorf("queue %s still holds %d messages (err %v)", queue, n, err)
	}
	var all []delivery
	for _, want := range distinct {
		all = append(all, want...)
	}
	qs.waitFinished(ctx, 90*time.Second, all...) // the reconciler finishes after the messages are gone
	time.Sleep(2 * time.Second)
	lb.Stop()

	for n, want := range distinct {
		rec, err := w.record(ctx, n.Name)
		if err != nil || len(rec.Notices) != len(want) {
			t.Errorf("node %s record %+v (err %v), want %d notices", n.Name, rec, err, len(want))
		}
		for _, d := range want {
			if problem := qs.unfinished(d); problem != "" {
				lost++
				t.Errorf("notice %s not done: %s", d.notice, problem)
			}
		}
	}
	for _, n := range []*corev1.Node{a, b} {
		if left, err := w.podsOn(ctx, n.Name); err != nil || len(left) != 0 {
			t.Errorf("pods left on %s: %v (err %v)", n.Name, left, err)
		}
	}
	w.checkEvictions(t, user, pods)
	for _, token := range tokens {
		refused += qs.checkCompleted(t, token)
	}
	sent, deletes := qs.checkMessages(t, map[string]bool{a.Name: true, b.Name: true})
	t.Logf("%d messages, %d deletes, %d refused repeat completions, %d runs", sent, deletes, refused, lb.Runs())
	if exits := lb.Exits(); len(exits) > 0 {
		t.Errorf("lifeboat exited on its own: %v", exits)
	}
	return landed, lost, refused
}
