// SPDX-License-Identifier: Apache-2.0

package faults

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/episode"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/test/sandbox"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// TestAPIServerRestart stops the API server in the middle of a drain, keeps it down for a
// while and starts it again on the same address: the handler must reconnect and finish,
// evicting nothing twice. It has a cluster of its own, since the restart disturbs every
// client. The handler runs supervised: if it exits, it is started again a second later, as
// the kubelet would; such exits are reported.
func TestAPIServerRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end fault scenarios against the sandbox")
	}
	t.Parallel() // beside TestFaults
	w := newWorld(t)
	downs := pick([]time.Duration{3 * time.Second}, []time.Duration{2 * time.Second, 10 * time.Second, 30 * time.Second})
	// Every node and pod is made before the first restart: the fake kubelet can take a while
	// to notice a restarted API server, and new nodes would not become Ready meanwhile.
	type setup struct {
		node *corev1.Node
		pods []string
	}
	setups := map[string][]setup{}
	for range downs {
		n := w.addNodes(t, 2)
		setups["agent"] = append(setups["agent"], setup{n[0], w.addPods(t, n[0], podSpec{hold: true}, podSpec{hold: true}, podSpec{}, podSpec{critical: true})})
		setups["controller"] = append(setups["controller"], setup{n[1], w.addPods(t, n[1], podSpec{hold: true}, podSpec{})})
	}
	for _, mode := range []string{"agent", "controller"} {
		t.Run(mode, func(t *testing.T) {
			var ta tally
			var exits []string
			for i, down := range downs {
				t.Run(fmt.Sprintf("down-%s", down), func(t *testing.T) {
					var lost int
					var ex []string
					s := setups[mode][i]
					if mode == "agent" {
						lost, ex = agentAPIServerTrial(t, w, s.node, s.pods, down)
					} else {
						lost, ex = controllerAPIServerTrial(t, w, s.node, s.pods, down)
					}
					ta.add(t.Failed(), lost, nil)
					if len(ex) > 0 {
						exits = append(exits, fmt.Sprintf("down %s: %s", down, summarizeExits(ex)))
					}
				})
			}
			downText := make([]string, len(downs))
			for i, d := range downs {
				downText[i] = d.String()
			}
			notes := "no exit"
			if len(exits) > 0 {
				notes = "exits (restarted as the kubelet would): " + strings.Join(exits, "; ")
			}
			report(t, result{Fault: "API server stopped mid-drain for " + strings.Join(downText, ", ") + ", then restarted", Mode: mode,
				Trials: ta.trials, Survived: ta.survived, NoticesLost: ta.lost, Run: "TestAPIServerRestart/" + mode, Notes: notes})
		})
	}
}

// summarizeExits turns ["run 1: exit status 0", "run 2: exit status 1", "run 3: exit status 1"]
// into "exit status 0 ×1, then exit status 1 ×2".
func summarizeExits(exits []string) string {
	var parts []string
	last, n := "", 0
	flush := func() {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%s ×%d", last, n))
		}
	}
	for _, e := range exits {
		_, status, _ := strings.Cut(e, ": ")
		if status != last {
			flush()
			last, n = status, 0
		}
		n++
	}
	flush()
	return strings.Join(parts, ", then ")
}

// restartMidDrain waits until the user has evicted `evicted` pods (the drain then waits on the
// held ones), restarts the API server, and lets the held pods go.
func restartMidDrain(ctx context.Context, t *testing.T, w *world, user string, evicted int, down time.Duration, nodes ...string) {
	t.Helper()
	if !waitFor(ctx, 60*time.Second, func() bool { return len(EvictionsByPod(w.audit(t, user))) >= evicted }) {
		t.Fatalf("the drain never evicted %d pods: %v", evicted, EvictionsByPod(w.audit(t, user)))
	}
	if err := w.c.RestartAPIServer(ctx, down); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if err := w.releaseHeld(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
}

func agentAPIServerTrial(t *testing.T, w *world, node *corev1.Node, pods []string, down time.Duration) (lost int, exits []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	instance := episode.InstanceIDOf(node)
	m := sandboxtest.IMDS(t, sandbox.IMDSOptions{InstanceID: instance, Hostname: node.Name,
		Args: []string{"spot", "-a", "terminate", "-t", time.Now().Add(2 * time.Minute).UTC().Format(time.RFC3339)}})
	user := "lifeboat-agent-" + shortName(node)
	lb := newLifeboat(t, w.dir, user, []string{"agent"}, "KUBECONFIG="+w.kubeconfig(t, user), "NODE_NAME="+node.Name,
		"INSTANCE_METADATA_URL="+m.URL, "POD_NAME=lifeboat-agent", "NAMESPACE=kube-system")
	lb.Supervise = true
	lb.Start()
	restartMidDrain(ctx, t, w, user, 3, down, node.Name)
	if !w.waitDrained(ctx, node.Name, 2*time.Minute) {
		lost = 1
		t.Errorf("node %s not drained after the API server came back", node.Name)
	}
	lb.Stop()
	rec, err := w.record(ctx, node.Name)
	if want := notice.ID(notice.SpotInterruption, instance, "terminate"); err != nil || !slices.Equal(rec.Notices, []string{want}) {
		t.Errorf("record %+v (err %v), want the one notice %s", rec, err, want)
	}
	if left, err := w.podsOn(ctx, node.Name); err != nil || len(left) != 0 {
		t.Errorf("pods left on the node: %v (err %v)", left, err)
	}
	w.checkEvictions(t, user, pods)
	exits = lb.Exits()
	if len(exits) > 0 {
		t.Logf("lifeboat exited on its own (restarted a second later): %v", exits)
	}
	return lost, exits
}

func controllerAPIServerTrial(t *testing.T, w *world, node *corev1.Node, pods []string, down time.Duration) (lost int, exits []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	queue := "restart-" + shortName(node)
	qs := newQueues(t, w, queue)
	qs.addInstances(node)
	token := qs.beginTermination(node)
	now := time.Now()
	hookBody, hookD := hook(node, token, now)
	qs.send(t, queue, []string{hookBody}, []delivery{hookD}, 1)
	user := "lifeboat-" + queue
	lb := newLifeboat(t, w.dir, user, []string{"controller"}, qs.controllerEnv(queue, w.kubeconfig(t, user), "lifeboat-0",
		"NAMESPACE=kube-system", "SQS_MSG_VISIBILITY_TIMEOUT_SEC=10")...)
	lb.Supervise = true
	lb.Start()
	// A warm standby beside it, started once the leader holds the Lease: the outage must not
	// hand the Lease over (both replicas lose the server alike).
	transitions, ok := w.leaseHeldBy(ctx, "lifeboat-0")
	if !ok {
		t.Fatal("the leader never took the Lease")
	}
	standby := newLifeboat(t, w.dir, user+"-standby", []string{"controller"}, qs.controllerEnv(queue, w.kubeconfig(t, user), "lifeboat-1",
		"NAMESPACE=kube-system", "SQS_MSG_VISIBILITY_TIMEOUT_SEC=10")...)
	standby.Supervise = true
	standby.Start()
	defer standby.Stop()
	restartMidDrain(ctx, t, w, user, 2, down, node.Name)
	if problem := ""; !waitFor(ctx, 2*time.Minute, func() bool { problem = qs.unfinished(hookD); return problem == "" }) {
		lost = 1
		t.Errorf("after the API server came back: %s", problem)
	}
	if !qs.waitEmpty(ctx, queue, 90*time.Second) {
		t.Error("the queue was not emptied")
	}
	if after, ok := w.leaseHeldBy(ctx, "lifeboat-0"); !ok || after != transitions {
		t.Errorf("the Lease changed hands during a %s outage: %d transitions after it, %d before, holder now %q (want lifeboat-0)",
			down, after, transitions, w.leaseHolder(ctx))
	}
	lb.Stop()
	w.checkEvictions(t, user, pods)
	qs.checkCompleted(t, token)
	qs.checkMessages(t, map[string]bool{node.Name: true})
	exits = lb.Exits()
	if len(exits) > 0 {
		t.Logf("lifeboat exited on its own (restarted a second later): %v", exits)
	}
	return lost, exits
}

// leaseHeldBy waits up to 30 s for the controller's Lease (the default name, in kube-system)
// to name holder, and returns its leaseTransitions.
func (w *world) leaseHeldBy(ctx context.Context, holder string) (transitions int32, ok bool) {
	ok = waitFor(ctx, 30*time.Second, func() bool {
		l, err := w.c.Client.CoordinationV1().Leases("kube-system").Get(ctx, config.DefaultLeaseName, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != holder {
			return false
		}
		if l.Spec.LeaseTransitions != nil {
			transitions = *l.Spec.LeaseTransitions
		}
		return true
	})
	return transitions, ok
}

// leaseHolder is who holds the controller's Lease now ("" when nobody, or it cannot be read).
func (w *world) leaseHolder(ctx context.Context) string {
	l, err := w.c.Client.CoordinationV1().Leases("kube-system").Get(ctx, config.DefaultLeaseName, metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}
