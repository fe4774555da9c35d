// SPDX-License-Identifier: Apache-2.0

package faults

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/record"
)

// testStorm: thousands of duplicate messages about a few dozen instances wait on the queue
// when the controller starts: copies of one Spot warning for half the instances and copies
// of one terminate hook for the other half or, with mixed, copies of both for every
// instance. Each node must be drained once, each pod evicted once, each lifecycle action
// completed once, and the queue emptied.
func testStorm(t *testing.T, w *world, mixed bool) {
	r := seeded(t)
	nodeCount, messages := pick(10, 50), pick(1000, 10000)
	ctx, cancel := context.WithTimeout(context.Background(), pick(4*time.Minute, 15*time.Minute))
	defer cancel()

	nodes := w.addNodes(t, nodeCount)
	var pods []string
	for i, n := range nodes {
		specs := []podSpec{{}}
		if i%3 == 0 {
			specs = append(specs, podSpec{})
		}
		pods = append(pods, w.addPods(t, n, specs...)...)
	}
	qs := newQueues(t, w, "storm")
	qs.addInstances(nodes...)

	// What each node is told: its notices, one message body each.
	at := time.Now()
	type news struct {
		bodies []string
		about  []delivery
		token  string
	}
	perNode := make([]news, nodeCount)
	for i, n := range nodes {
		if mixed || i%2 == 0 {
			body, d := spot(n, at)
			perNode[i].bodies, perNode[i].about = append(perNode[i].bodies, body), append(perNode[i].about, d)
		}
		if mixed || i%2 == 1 {
			perNode[i].token = qs.beginTermination(n)
			body, d := hook(n, perNode[i].token, at)
			perNode[i].bodies, perNode[i].about = append(perNode[i].bodies, body), append(perNode[i].about, d)
		}
	}
	bodies, about := make([]string, 0, messages), make([]delivery, 0, messages)
	for i := range messages {
		p := perNode[i%nodeCount]
		k := (i / nodeCount) % len(p.bodies)
		bodies, about = append(bodies, p.bodies[k]), append(about, p.about[k])
	}
	r.Shuffle(len(bodies), func(i, j int) { bodies[i], bodies[j] = bodies[j], bodies[i]; about[i], about[j] = about[j], about[i] })
	sendStart := time.Now()
	qs.send(t, "storm", bodies, about, 16)
	t.Logf("sent %d messages about %d instances in %s", messages, nodeCount, time.Since(sendStart).Round(time.Millisecond))

	user := "lifeboat-storm"
	if mixed {
		user += "-mixed"
	}
	lb := newLifeboat(t, w.dir, user, []string{"controller"}, qs.controllerEnv("storm", w.kubeconfig(t, user), "lifeboat-0",
		"NAMESPACE=kube-system", "LOG_LEVEL=info")...)
	start := time.Now()
	lb.Start()
	allDrained := waitFor(ctx, pick(3*time.Minute, 12*time.Minute), func() bool { return allPhase(ctx, w, nodes, record.PhaseDrained) })
	drainedAfter := time.Since(start)
	empty := qs.waitEmpty(ctx, "storm", pick(3*time.Minute, 12*time.Minute))
	emptyAfter := time.Since(start)
	var all []delivery
	for i := range nodes {
		all = append(all, perNode[i].about...)
	}
	qs.waitFinished(ctx, time.Minute, all...)
	lb.Stop()
	if !allDrained {
		t.Error("not every node was drained")
	}
	if !empty {
		n, err := qs.length(ctx, "storm")
		t.Errorf("the queue still holds %d messages (err %v)", n, err)
	}

	lost, tokens, once, refused := 0, 0, 0, 0
	for i, n := range nodes {
		for _, d := range perNode[i].about {
			if problem := qs.unfinished(d); problem != "" {
				lost++
				t.Errorf("notice %s not done: %s", d.notice, problem)
			}
		}
		if rec, err := w.record(ctx, n.Name); err != nil || len(rec.Notices) != len(perNode[i].about) {
			t.Errorf("node %s record %+v (err %v), want exactly its %d notices", n.Name, rec, err, len(perNode[i].about))
		}
		if tok := perNode[i].token; tok != "" {
			tokens++
			refused += qs.checkCompleted(t, tok)
			if _, completed, _, _ := qs.fake.LifecycleAction(tok); completed && qs.completions(tok).accepted == 1 {
				once++
			}
		}
	}
	w.checkEvictions(t, user, pods)
	inNodes := map[string]bool{}
	for _, n := range nodes {
		inNodes[n.Name] = true
	}
	sent, deletes := qs.checkMessages(t, inNodes)
	if exits := lb.Exits(); len(exits) > 0 {
		t.Errorf("lifeboat exited on its own: %v", exits)
	}

	requests := RequestsByKind(w.audit(t, user))
	total := 0
	for _, n := range requests {
		total += n
	}
	awsCalls := map[string]int{}
	for _, c := range qs.fake.Calls() {
		key := c.Service + " " + c.Action
		if c.ErrorCode != "" {
			key += " (" + c.ErrorCode + ")"
		}
		awsCalls[key]++
	}
	t.Logf("storm: %d messages (%d sent, %d deletes) about %d nodes / %d pods: all drained after %s, queue empty after %s",
		messages, sent, deletes, nodeCount, len(pods), drainedAfter.Round(time.Millisecond), emptyAfter.Round(time.Millisecond))
	t.Logf("storm: %d API requests: %s", total, FormatCounts(requests))
	t.Logf("storm: AWS calls: %s", FormatCounts(awsCalls))
	survived := 1
	if t.Failed() {
		survived = 0
	}
	what := "copies of a Spot warning (half the instances) or of a terminate hook (the other half)"
	if mixed {
		what = "copies of both a Spot warning and a terminate hook for every instance"
	}
	report(t, result{Fault: fmt.Sprintf("storm: %d duplicate messages about %d instances, %s", messages, nodeCount, what), Mode: "controller",
		Trials: 1, Survived: survived, NoticesLost: lost, Run: t.Name(),
		Notes: fmt.Sprintf("queue empty %s after start; %d API requests (%d evictions for %d pods, %d node reads); SQS: %d receives, %d deletes; %d DescribeInstances; %d of %d lifecycle actions completed once, %d refused repeats",
			emptyAfter.Round(time.Second), total, requests["create pods/eviction"], len(pods), requests["get nodes"],
			qs.fake.CallCount("sqs", "ReceiveMessage"), qs.fake.CallCount("sqs", "DeleteMessage"), qs.fake.CallCount("ec2", "DescribeInstances"),
			once, tokens, refused)})
}

func allPhase(ctx context.Context, w *world, nodes []*corev1.Node, phase record.Phase) bool {
	for _, n := range nodes {
		if rec, err := w.record(ctx, n.Name); err != nil || rec.Phase != phase {
			return false
		}
	}
	return true
}
