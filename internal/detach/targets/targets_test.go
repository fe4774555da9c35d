// SPDX-License-Identifier: Apache-2.0

package targets_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/detach"
	"lifeboat.dev/lifeboat/internal/detach/targets"
	"lifeboat.dev/lifeboat/test/sandbox/fakeaws"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

func newWait(t *testing.T, fake *fakeaws.Server, interval time.Duration) *targets.Wait {
	t.Helper()
	return targets.New(cloud.NewAWSLoadBalancing(sandboxtest.AWSConfig(fake.URL())), targets.Options{Interval: interval})
}

// fakeWithClock starts the fake AWS endpoint on clock c.
func fakeWithClock(t *testing.T, c clock.PassiveClock) *fakeaws.Server {
	t.Helper()
	fake := fakeaws.New(fakeaws.Options{Clock: c})
	if err := fake.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	return fake
}

// The instance and the pods' IPs are held while registered or draining, and released once
// gone; targets of other nodes and unused ones do not count.
func TestHeldUntilDeregisteredAndDrained(t *testing.T) {
	// One clock for the fake's draining and the wait's polls, stepped by the test.
	fc := clocktesting.NewFakePassiveClock(time.Now())
	fake := fakeWithClock(t, fc)
	const delay, interval = 300 * time.Second, 5 * time.Second
	web := fake.AddTargetGroup(fakeaws.TargetGroup{Name: "web", DeregistrationDelay: delay})
	pods := fake.AddTargetGroup(fakeaws.TargetGroup{Name: "pods", TargetType: "ip", DeregistrationDelay: delay})
	idle := fake.AddTargetGroup(fakeaws.TargetGroup{Name: "idle", Unattached: true})
	for _, r := range []struct{ arn, id string }{{web, "i-1"}, {web, "i-2"}, {pods, "10.0.0.5"}, {pods, "10.0.0.9"}, {idle, "i-1"}} {
		if err := fake.RegisterTarget(r.arn, r.id, 0); err != nil {
			t.Fatal(err)
		}
	}
	w := targets.New(cloud.NewAWSLoadBalancing(sandboxtest.AWSConfig(fake.URL())), targets.Options{Interval: interval, Clock: fc})
	ctx := context.Background()
	s := detach.Subject{Node: "n1", InstanceID: "i-1", PodIPs: []string{"10.0.0.5"}}
	held := func() []string {
		t.Helper()
		h, err := w.Held(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	if h := held(); strings.Join(h, "; ") != "10.0.0.5 in pods (healthy); i-1 in web (healthy)" {
		t.Errorf("registered: held %q", h)
	}
	fake.DeregisterTarget(web, "i-1")
	fake.DeregisterTarget(pods, "10.0.0.5")
	if h := held(); strings.Join(h, "; ") != "10.0.0.5 in pods (healthy); i-1 in web (healthy)" {
		t.Errorf("within the poll's interval: held %q, want the last poll's answer", h)
	}
	fc.SetTime(fc.Now().Add(interval)) // past the shared poll's interval
	if h := held(); strings.Join(h, "; ") != "10.0.0.5 in pods (draining); i-1 in web (draining)" {
		t.Errorf("draining: held %q", h)
	}
	fc.SetTime(fc.Now().Add(delay))
	if h := held(); len(h) != 0 {
		t.Errorf("after the deregistration delay: held %q, want nothing (i-2 and 10.0.0.9 are other nodes', idle is unused)", h)
	}
}

// However many nodes wait, each poll asks each target group once.
func TestOnePollServesEveryNode(t *testing.T) {
	fake := sandboxtest.FakeAWS(t, "")
	const groups, nodes = 3, 200
	var arns []string
	for g := range groups {
		arns = append(arns, fake.AddTargetGroup(fakeaws.TargetGroup{Name: fmt.Sprintf("tg-%d", g), DeregistrationDelay: -1})) // gone at once
	}
	for n := range nodes {
		fake.RegisterTarget(arns[n%groups], fmt.Sprintf("i-%04d", n), 0)
	}
	w := newWait(t, fake, 200*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// A few polls made while every node waits: the test then deregisters them all at once.
	const pollsBefore = 3
	var healthSeen atomic.Int32
	polled := make(chan struct{})
	fake.OnCall(func(c fakeaws.Call) {
		if c.Action == "DescribeTargetHealth" && healthSeen.Add(1) == pollsBefore*groups {
			close(polled)
		}
	})
	var wg sync.WaitGroup
	results := make([]detach.Result, nodes)
	for n := range nodes {
		wg.Go(func() {
			r := detach.Run(ctx, time.Now().Add(30*time.Second), detach.Subject{Node: fmt.Sprint(n), InstanceID: fmt.Sprintf("i-%04d", n)}, w)
			results[n] = r[0]
		})
	}
	select {
	case <-polled:
	case <-time.After(30 * time.Second):
		t.Fatalf("%d polls not made within 30 s", pollsBefore)
	}
	for n := range nodes {
		fake.DeregisterTarget(arns[n%groups], fmt.Sprintf("i-%04d", n))
	}
	wg.Wait()
	for n, r := range results {
		if r.Outcome != detach.Released {
			t.Fatalf("node %d: %s (held %v, err %v)", n, r.Outcome, r.Held, r.Err)
		}
	}
	health, lists := fake.CallCount("elasticloadbalancing", "DescribeTargetHealth"), fake.CallCount("elasticloadbalancing", "DescribeTargetGroups")
	polls := health / groups
	t.Logf("%d nodes released after %d polls: %d DescribeTargetHealth, %d DescribeTargetGroups", nodes, polls, health, lists)
	// A few polls, 3 calls each: nothing near one call per node (200 per poll).
	if health > 60 {
		t.Errorf("%d DescribeTargetHealth calls for %d groups and %d nodes: want about one per group per poll", health, groups, nodes)
	}
	if lists != 1 {
		t.Errorf("%d DescribeTargetGroups calls, want 1 (the list is kept for a minute)", lists)
	}
}

// Without permission the wait is skipped at once, and ELBv2 is not asked again.
func TestWithoutPermissionSkipped(t *testing.T) {
	fake := sandboxtest.FakeAWS(t, "")
	fake.Deny("elasticloadbalancing", "DescribeTargetGroups")
	w := newWait(t, fake, 10*time.Millisecond)
	if err := w.Check(context.Background()); !errors.Is(err, cloud.ErrAccessDenied) {
		t.Fatalf("Check: %v, want access denied", err)
	}
	for range 3 {
		r := detach.Run(context.Background(), time.Now().Add(time.Second), detach.Subject{Node: "n1", InstanceID: "i-1"}, w)
		if r[0].Outcome != detach.Skipped {
			t.Errorf("outcome %s (err %v), want skipped", r[0].Outcome, r[0].Err)
		}
	}
	if n := fake.CallCount("elasticloadbalancing", "DescribeTargetGroups"); n != 2 {
		t.Errorf("%d DescribeTargetGroups calls, want 2 (the check, and the first wait that learnt it is denied)", n)
	}
}
