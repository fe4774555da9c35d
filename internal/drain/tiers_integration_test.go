// SPDX-License-Identifier: Apache-2.0

package drain

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"lifeboat.dev/lifeboat/test/sandbox"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

func outcomeNamed(t *testing.T, res *Result, name string) PodOutcome {
	t.Helper()
	for _, p := range res.Pods {
		if p.Pod.Name == name {
			return p
		}
	}
	t.Fatalf("%s was not selected: %+v", name, res.Pods)
	return PodOutcome{}
}

// A Spot interruption on a node where a disruption budget allows no disruption: the pods it
// holds stay, refused until the deadline, but the critical pod does not wait for them. It
// is evicted as soon as the ordinary pods are gone, long before the instance ends.
func TestCriticalTierNotHeldBackByABudget(t *testing.T) {
	t.Parallel()
	ctx, c, node := oneNodeCluster(t, 2*time.Minute, sandbox.ClusterOptions{})
	var held []*corev1.Pod
	for i := range 2 {
		held = append(held, newPod("apps", fmt.Sprint("db-", i), node, ownedBy("StatefulSet", "db"), labels("app", "db")))
	}
	createPods(t, ctx, c, append(held,
		newPod("apps", "web-0", node, ownedBy("ReplicaSet", "web")),
		newPod("apps", "web-1", node, ownedBy("ReplicaSet", "web")),
		newPod("kube-system", "coredns", node, ownedBy("ReplicaSet", "coredns"), critical("system-cluster-critical")))...)
	// No controller manager computes the budget's status: it allows no disruption.
	sandboxtest.BlockEvictions(t, ctx, c, "apps", map[string]string{"app": "db"})
	// A budget protects only running pods.
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		for _, p := range held {
			got, err := c.Client.CoreV1().Pods("apps").Get(ctx, p.Name, metav1.GetOptions{})
			if err != nil || got.Status.Phase != corev1.PodRunning {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("the held pods never ran: %v", err)
	}

	seen := &observed{}
	d := New(c.Client, Options{Policy: Policy{DeleteLocalData: true}, PodGracePeriod: -1, Observer: seen,
		Lister: APILister{Client: c.Client, Quorum: true}, RetryMin: 100 * time.Millisecond, RetryMax: 400 * time.Millisecond})
	// A Spot warning's two minutes: the critical pod's turn must not be the deadline's.
	deadline := NewDeadline(time.Now().Add(2 * time.Minute))
	done := make(chan *Result, 1)
	go func() {
		res, _ := d.DrainUntil(ctx, node, deadline, Terms{Reclaim: true})
		done <- res
	}()
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := c.Client.CoreV1().Pods("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
		return err != nil, nil
	})
	if err != nil {
		t.Errorf("the critical pod is still on the node 30 s into a two-minute drain")
	}
	// The held pods stay: end the drain now rather than in two minutes.
	deadline.Tighten(time.Now().Add(time.Second))
	res := <-done

	webGone := time.Time{}
	for _, name := range []string{"web-0", "web-1"} {
		p := outcomeNamed(t, res, name)
		if p.GoneAt.IsZero() {
			t.Fatalf("%s is not gone: %+v", name, p)
		}
		if p.GoneAt.After(webGone) {
			webGone = p.GoneAt
		}
	}
	dns := outcomeNamed(t, res, "coredns")
	switch {
	case dns.GoneAt.IsZero():
		t.Errorf("the critical pod is not gone: %+v", dns)
	case dns.EvictedAt.Before(webGone):
		t.Errorf("the critical pod was evicted %v before the ordinary pods were gone", webGone.Sub(dns.EvictedAt))
	case dns.EvictedAt.Sub(webGone) > 5*time.Second:
		t.Errorf("the critical pod was evicted %v after the ordinary pods were gone; want within seconds", dns.EvictedAt.Sub(webGone))
	}
	for _, p := range held {
		got := outcomeNamed(t, res, p.Name)
		if !got.GoneAt.IsZero() || got.BlockedBy == nil || got.BlockedBy.Budget != "block-evictions" || got.Attempts < 2 {
			t.Errorf("%s: %+v; want held by its budget, refused again and again", p.Name, got)
		}
		if _, err := c.Client.CoreV1().Pods("apps").Get(ctx, p.Name, metav1.GetOptions{}); err != nil {
			t.Errorf("%s: %v; want it still there", p.Name, err)
		}
	}
	// Reported as held, once each: blocked by the budget (in the API server's words), then
	// let go unevicted at the deadline.
	got := seen.sorted()
	for i := range got {
		got[i], _, _ = strings.Cut(got[i], ":")
	}
	want := []string{"blocked db-0 by block-evictions", "blocked db-1 by block-evictions", "unblocked db-0 evicted=false", "unblocked db-1 evicted=false"}
	if !slices.Equal(got, want) {
		t.Errorf("observed %q, want %q", got, want)
	}
}

// The order stays: while an ordinary pod is still leaving within its grace period, the
// critical tier waits for it, until the moment that leaves the critical pods just their
// own grace period before the deadline.
func TestCriticalTierWaitsForLeavingPodsUntilItsLatestMoment(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 2*time.Minute)
	c, _ := sandboxtest.Shared(t, sandbox.ClusterOptions{})
	// No kubelet (nor kwok) runs this node: an evicted pod stays terminating until the test
	// deletes it, as a slow pod would.
	const node = "unattended"
	if _, err := c.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := c.Client.CoreV1().Pods("apps")
	leaving := func(name string) bool {
		p, err := pods.Get(ctx, name, metav1.GetOptions{})
		return err == nil && p.DeletionTimestamp != nil
	}
	d := New(c.Client, Options{Policy: Policy{DeleteLocalData: true}, PodGracePeriod: -1, Lister: APILister{Client: c.Client, Quorum: true}})

	t.Run("waits while the ordinary pod leaves", func(t *testing.T) {
		createPods(t, ctx, c, newPod("apps", "slow", node, ownedBy("ReplicaSet", "slow"), grace(600)),
			newPod("apps", "dns", node, ownedBy("ReplicaSet", "dns"), critical("system-cluster-critical"), grace(5)))
		done := make(chan *Result, 1)
		go func() {
			res, _ := d.DrainUntil(ctx, node, NewDeadline(time.Now().Add(time.Minute)), Terms{Reclaim: true})
			done <- res
		}()
		if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
			return leaving("slow"), nil
		}); err != nil {
			t.Fatalf("the ordinary pod was never evicted: %v", err)
		}
		// Real time: room for a drain that would wrongly evict the critical pod now to do so.
		// Its latest moment is 53 s away; nothing the drain does says it decided to wait.
		time.Sleep(2 * time.Second)
		if leaving("dns") {
			t.Fatal("the critical pod was evicted while an ordinary pod was still leaving")
		}
		zero := int64(0)
		stopped := time.Now()
		if err := pods.Delete(ctx, "slow", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			t.Fatal(err)
		}
		if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
			return leaving("dns"), nil
		}); err != nil {
			t.Fatalf("the critical pod was not evicted once the ordinary pod was gone: %v", err)
		}
		if took := time.Since(stopped); took > 3*time.Second {
			t.Errorf("the critical pod was evicted %v after the ordinary pod was gone", took)
		}
		if err := pods.Delete(ctx, "dns", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			t.Fatal(err)
		}
		if res := <-done; len(res.Remaining()) != 0 {
			t.Errorf("remaining: %+v", res.Remaining())
		}
	})

	t.Run("starts at its latest moment", func(t *testing.T) {
		createPods(t, ctx, c, newPod("apps", "slower", node, ownedBy("ReplicaSet", "slower"), grace(600)),
			newPod("apps", "proxy", node, ownedBy("ReplicaSet", "proxy"), critical("system-cluster-critical"), grace(5)))
		start := time.Now()
		deadline := start.Add(12 * time.Second)
		done := make(chan *Result, 1)
		go func() {
			res, _ := d.DrainUntil(ctx, node, NewDeadline(deadline), Terms{Reclaim: true})
			done <- res
		}()
		if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
			return leaving("proxy"), nil
		}); err != nil {
			t.Fatalf("the critical pod was never evicted: %v", err)
		}
		// The deadline (12 s) minus its grace period (5 s) minus the margin (2 s).
		if at := time.Since(start); at < 4*time.Second || at > 7*time.Second {
			t.Errorf("the critical pod was evicted %v after the start; want about 5 s", at)
		}
		if !leaving("slower") {
			t.Error("the ordinary pod was not evicted")
		}
		res := <-done
		if p := outcomeNamed(t, res, "proxy"); p.EvictedAt.IsZero() {
			t.Errorf("proxy: %+v", p)
		}
		zero := int64(0)
		for _, name := range []string{"slower", "proxy"} {
			if err := pods.Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// A controller leader drains the node its own pod runs on (Policy.OwnPodLast): its own pod,
// in a ReplicaSet as the chart runs it, is evicted last, after every other pod's eviction
// was accepted, critical ones included, so that the hand-over to a standby comes once, at
// the end of the drain.
func TestOwnPodEvictedLast(t *testing.T) {
	t.Parallel()
	ctx, c, node := oneNodeCluster(t, 2*time.Minute, sandbox.ClusterOptions{})
	createPods(t, ctx, c,
		newPod("kube-system", "lifeboat-controller-a", node, ownedBy("ReplicaSet", "lifeboat-controller")),
		newPod("apps", "web-0", node, ownedBy("ReplicaSet", "web")),
		newPod("apps", "web-1", node, ownedBy("ReplicaSet", "web")),
		newPod("kube-system", "coredns", node, ownedBy("ReplicaSet", "coredns"), critical("system-cluster-critical")))
	own := types.NamespacedName{Namespace: "kube-system", Name: "lifeboat-controller-a"}
	d := New(c.Client, Options{Policy: Policy{DeleteLocalData: true, OwnPod: own, OwnPodLast: true}, PodGracePeriod: -1,
		Lister: APILister{Client: c.Client, Quorum: true}})
	res, err := d.DrainUntil(ctx, node, NewDeadline(time.Now().Add(2*time.Minute)), Terms{Reclaim: true})
	if err != nil {
		t.Fatal(err)
	}
	mine := outcomeNamed(t, res, own.Name)
	if mine.EvictedAt.IsZero() || mine.Tier != TierOwnPod {
		t.Fatalf("own pod: %+v; want evicted, in the own-pod tier", mine)
	}
	for _, name := range []string{"web-0", "web-1", "coredns"} {
		p := outcomeNamed(t, res, name)
		if p.EvictedAt.IsZero() || !p.EvictedAt.Before(mine.EvictedAt) {
			t.Errorf("%s evicted at %v, own pod at %v; want every other pod's eviction accepted first", name, p.EvictedAt, mine.EvictedAt)
		}
	}
}
