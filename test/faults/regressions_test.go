// SPDX-License-Identifier: Apache-2.0

package faults

import (
	"context"
	"fmt"
	"testing"
	"time"

	"lifeboat.dev/lifeboat/test/sandbox/fakeaws"
)

// reportScenario reports a one-trial scenario's outcome when it ends; notes is read then.
func reportScenario(t *testing.T, fault, mode string, notes *string) {
	t.Helper()
	survived, lost := 1, 0
	if t.Failed() {
		survived, lost = 0, 1
	}
	report(t, result{Fault: fault, Mode: mode, Trials: 1, Survived: survived, NoticesLost: lost, Run: t.Name(), Notes: *notes})
}

// testRegressions holds scenarios that once found bugs, each reduced to its trigger: a
// notice joined to a drain that another notice finished is done only when its own
// completion ran, and copies of one hook message all find the hook to complete.
func testRegressions(t *testing.T, w *world) {
	// A Spot warning drains the node; a terminate hook for it follows and its first
	// CompleteLifecycleAction fails. The node's drained phase must not make the hook's
	// notice done: its message comes back and the action is completed then.
	t.Run("hook completion fails after another notice drained the node", func(t *testing.T) {
		var notes string
		defer reportScenario(t, "a hook's CompleteLifecycleAction fails (Auto Scaling 500) after a Spot warning drained the node", "controller", &notes)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		node := w.addNodes(t, 1)[0]
		pods := w.addPods(t, node, podSpec{}, podSpec{})
		qs := newQueues(t, w, "failed-completion")
		qs.addInstances(node)
		token := qs.beginTermination(node)
		user := "lifeboat-failed-completion"
		lb := newLifeboat(t, w.dir, user, []string{"controller"}, qs.controllerEnv("failed-completion", w.kubeconfig(t, user), "lifeboat-0",
			"NAMESPACE=kube-system", "SQS_MSG_VISIBILITY_TIMEOUT_SEC=4")...)
		lb.Start()
		now := time.Now()
		spotBody, spotD := spot(node, now)
		qs.send(t, "failed-completion", []string{spotBody}, []delivery{spotD}, 1)
		if !w.waitDrained(ctx, node.Name, 60*time.Second) {
			t.Fatal("the spot warning did not drain the node")
		}
		// Auto Scaling fails until the hook's first completion has been refused.
		qs.fake.SetFault(fakeaws.Fault{Service: "autoscaling", Action: "CompleteLifecycleAction"})
		hookBody, hookD := hook(node, token, now)
		qs.send(t, "failed-completion", []string{hookBody}, []delivery{hookD}, 1)
		failed := waitFor(ctx, 60*time.Second, func() bool { return qs.completions(token).failed > 0 })
		qs.fake.ClearFaults()
		if !failed {
			t.Fatal("the hook's completion was never attempted during the fault")
		}
		if !qs.waitEmpty(ctx, "failed-completion", 60*time.Second) {
			t.Error("the queue was not emptied")
		}
		qs.waitFinished(ctx, 60*time.Second, spotD, hookD) // the reconciler retries the completion
		lb.Stop()
		for _, d := range []delivery{spotD, hookD} {
			if problem := qs.unfinished(d); problem != "" {
				t.Errorf("notice %s: %s", d.notice, problem)
			}
		}
		qs.checkCompleted(t, token)
		w.checkEvictions(t, user, pods)
		sent, deletes := qs.checkMessages(t, map[string]bool{node.Name: true})
		c := qs.completions(token)
		notes = fmt.Sprintf("CompleteLifecycleAction: %d failed by the fault, %d accepted, %d refused; %d messages, %d deletes",
			c.failed, c.accepted, c.refused, sent, deletes)
	})

	// A held pod keeps a Spot warning's drain running while four copies of a terminate hook
	// message for the node arrive and join it; whichever copy returns first, the action
	// must be completed, once.
	t.Run("hook copies joining another notice's drain", func(t *testing.T) {
		var notes string
		defer reportScenario(t, "four copies of a hook message join the drain of a Spot warning for the same node", "controller", &notes)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		node := w.addNodes(t, 1)[0]
		pods := w.addPods(t, node, podSpec{hold: true}, podSpec{})
		qs := newQueues(t, w, "dup-hook")
		qs.addInstances(node)
		token := qs.beginTermination(node)
		user := "lifeboat-dup-hook"
		lb := newLifeboat(t, w.dir, user, []string{"controller"}, qs.controllerEnv("dup-hook", w.kubeconfig(t, user), "lifeboat-0",
			"NAMESPACE=kube-system", "SQS_MSG_VISIBILITY_TIMEOUT_SEC=10")...)
		lb.Start()

		body, d := spot(node, time.Now())
		qs.send(t, "dup-hook", []string{body}, []delivery{d}, 1)
		if !waitFor(ctx, 30*time.Second, func() bool { return len(EvictionsByPod(w.audit(t, user))) == 2 }) {
			t.Fatal("the spot drain never evicted the node's pods")
		}
		const copies = 4
		hookBody, hd := hook(node, token, time.Now())
		bodies, about := make([]string, copies), make([]delivery, copies)
		for i := range bodies {
			bodies[i], about[i] = hookBody, hd
		}
		qs.send(t, "dup-hook", bodies, about, copies)
		if !waitFor(ctx, 30*time.Second, func() bool {
			r, err := w.record(ctx, node.Name)
			return err == nil && r.Has(hd.notice)
		}) {
			t.Fatal("the hook notice was never recorded")
		}
		time.Sleep(2 * time.Second) // every copy received and waiting on the drain
		if n := qs.completions(token); n.accepted+n.refused+n.failed > 0 {
			t.Fatalf("the hook was completed before the held pod let the drain end: %+v", n)
		}
		if err := w.releaseHeld(ctx, node.Name); err != nil {
			t.Fatal(err)
		}
		if !w.waitDrained(ctx, node.Name, 30*time.Second) || !qs.waitEmpty(ctx, "dup-hook", 60*time.Second) {
			t.Fatal("the node was not drained or the queue not emptied")
		}
		qs.waitFinished(ctx, 60*time.Second, d, hd)
		lb.Stop()
		for _, dl := range []delivery{d, hd} {
			if problem := qs.unfinished(dl); problem != "" {
				t.Errorf("notice %s: %s", dl.notice, problem)
			}
		}
		refused := qs.checkCompleted(t, token)
		w.checkEvictions(t, user, pods)
		sent, deletes := qs.checkMessages(t, map[string]bool{node.Name: true})
		notes = fmt.Sprintf("lifecycle action completed by %d accepted call, %d refused repeats; %d messages, %d deletes",
			qs.completions(token).accepted, refused, sent, deletes)
	})
}
