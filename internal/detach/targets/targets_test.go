// SPDX-License-Identifier: Apache-2.0

package targets_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

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

// The instance and the pods' IPs are held while registered or draining, and released once
// gone; targets of other nodes and unused ones do not count.
func TestHeldUntilDeregisteredAndDrained(t *testing.T) {
	fake := sandboxtest.FakeAWS(t, "")
	web := fake.AddTargetGroup(fakeaws.TargetGroup{Name: "web", DeregistrationDelay: 400 * time.Millisecond})
	pods := fake.AddTargetGroup(fakeaws.TargetGroup{Name: "pods", TargetType: "ip", DeregistrationDelay: 400 * time.Millisecond})
	idle := fake.AddTargetGroup(fakeaws.TargetGroup{Name: "idle", Unattached: true})
	for _, r := range []struct{ arn, id string }{{web, "i-1"}, {web, "i-2"}, {pods, "10.0.0.5"}, {pods, "10.0.0.9"}, {idle, "i-1"}} {
		if err := fake.RegisterTarget(r.arn, r.id, 0); err != nil {
			t.Fatal(err)
		}
	}
	w := newWait(t, fake, 50*time.Millisecond)
	ctx := context.Background()
	s := detach.Subject{Node: "n1", InstanceID: "i-1", PodIPs: []string{"10.0.0.5"}}
	held := func() []string {
		t.Helper()
		time.Sleep(60 * time.Millisecond) // past the shared poll's interval
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
	if h := held(); strings.Join(h, "; ") != "10.0.0.5 in pods (draining); i-1 in web (draining)" {
		t.Errorf("draining: held %q", h)
	}
	time.Sleep(400 * time.Millisecond)
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
	// Every node waits until released; the test deregisters them all at once after a while.
	var wg sync.WaitGroup
	results := make([]detach.Result, nodes)
	for n := range nodes {
		wg.Go(func() {
			r := detach.Run(ctx, time.Now().Add(30*time.Second), detach.Subject{Node: fmt.Sprint(n), InstanceID: fmt.Sprintf("i-%04d", n)}, w)
			results[n] = r[0]
		})
	}
	time.Sleep(time.Second)
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
	// About 6 polls at 200 ms, 3 calls each: nothing near one call per node (200 per poll).
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
