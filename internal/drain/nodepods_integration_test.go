// SPDX-License-Identifier: Apache-2.0

package drain

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"lifeboat.dev/lifeboat/test/sandbox"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// sharedPods starts a pod informer on client that keeps Pods, as the controller does, and
// stops it when the test ends. It does not wait for the first list: the drains do.
func sharedPods(t *testing.T, client kubernetes.Interface) *NodePods {
	t.Helper()
	factory := informers.NewSharedInformerFactory(client, 0)
	p, err := NewNodePods(factory.Core().V1().Pods().Informer())
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	factory.Start(stop)
	t.Cleanup(func() { close(stop); factory.Shutdown() })
	return p
}

// nodePodsLister lists as a drain fed by NodePods does, for the filter matrix.
type nodePodsLister struct{ p *NodePods }

func (l nodePodsLister) PodsOnNode(ctx context.Context, node string) ([]*Pod, string, error) {
	pods, err := l.p.podsOn(ctx, node)
	return pods, "", err
}

// Drains fed by the shared informer send their evictions and nothing else: no list and no
// watch per drain, whatever the number of nodes. Each ends when its node is empty, and stops
// being fed.
func TestSharedInformerDrainsSendOnlyEvictions(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 2*time.Minute)
	c, _ := sandboxtest.Shared(t, sandbox.ClusterOptions{AuditLog: true})
	var specs []sandbox.NodeSpec
	for i := range 4 {
		specs = append(specs, sandbox.NodeSpec{Index: i + 1})
	}
	nodes, err := c.AddNodes(ctx, specs...)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		var pods []*corev1.Pod
		for i := range 5 {
			pods = append(pods, newPod("apps", fmt.Sprintf("%s-web-%d", n.Name, i), n.Name, ownedBy("ReplicaSet", "web")))
		}
		pods = append(pods, newPod("kube-system", n.Name+"-logs", n.Name, ownedBy("DaemonSet", "logs")))
		createPods(t, ctx, c, pods...)
	}

	client := lifeboatClient(t, c)
	shared := sharedPods(t, client)
	// Three eviction slots for four drains of five pods: they take turns.
	d := New(client, Options{Policy: Policy{IgnoreDaemonSets: true, DeleteLocalData: true}, PodGracePeriod: -1, Pods: shared, Slots: 3})
	var wg sync.WaitGroup
	results := make([]*Result, len(nodes))
	errs := make([]error, len(nodes))
	for i, n := range nodes {
		wg.Go(func() { results[i], errs[i] = d.Drain(ctx, n.Name, time.Now().Add(time.Minute)) })
	}
	wg.Wait()
	for i, n := range nodes {
		if errs[i] != nil {
			t.Fatalf("drain %s: %v", n.Name, errs[i])
		}
		res := results[i]
		if len(res.Pods) != 5 || len(res.Skipped) != 1 || res.Skipped[0].Reason != ReasonDaemonSet {
			t.Errorf("%s: selected %d, skipped %+v; want 5 and the DaemonSet pod", n.Name, len(res.Pods), res.Skipped)
		}
		for _, p := range res.Pods {
			if p.GoneAt.IsZero() || p.Attempts != 1 || p.Error != "" {
				t.Errorf("pod %s: %+v", p.Pod, p)
			}
		}
	}
	if n := shared.Following(); n != 0 {
		t.Errorf("the informer still feeds %d drains after they ended", n)
	}
	left, err := c.Client.CoreV1().Pods("apps").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(left.Items) != 0 {
		t.Errorf("%d workload pods left", len(left.Items))
	}
	events, verbs := lifeboatRequests(t, c)
	// One eviction per pod, and the informer's own list and watch (a single watch when
	// client-go streams the list through it).
	informer := verbs["list pods/"] + verbs["watch pods/"]
	if verbs["create pods/eviction"] != 20 || verbs["watch pods/"] != 1 || informer > 2 || len(events) != 20+informer {
		t.Errorf("%d requests %v; want 20 evictions and the informer's list and watch", len(events), verbs)
	}
}

// What a shared informer tells a drain: a pod bound after the list is drained too, and a pod
// that was already terminating (held by a finalizer) holds the drain until it is gone.
func TestSharedInformerFollowsLateAndTerminatingPods(t *testing.T) {
	t.Parallel()
	ctx, c, node := oneNodeCluster(t, time.Minute, sandbox.ClusterOptions{})
	stopping := newPod("apps", "stopping", node, ownedBy("ReplicaSet", "old"))
	stopping.DeletionTimestamp = &metav1.Time{Time: time.Now()} // createPods keeps it terminating with a finalizer
	lift := createHeldPod(t, ctx, c, node, stopping)

	shared := sharedPods(t, c.Client)
	seen := &observed{}
	d := New(c.Client, Options{Policy: Policy{DeleteLocalData: true}, PodGracePeriod: -1, RetryMin: 50 * time.Millisecond, Pods: shared, Observer: seen})
	type outcome struct {
		res *Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := d.Drain(ctx, node, time.Now().Add(45*time.Second))
		done <- outcome{res, err}
	}()
	if !seen.waitBlocked(ctx, "held") { // the drain has listed the node and is held by the budget
		t.Fatal("the held pod's eviction was never refused")
	}
	if n := shared.Following(); n != 1 {
		t.Fatalf("the informer follows %d drains, want the one", n)
	}
	createPods(t, ctx, c, newPod("apps", "late", node, ownedBy("ReplicaSet", "web")))
	// The informer delivers events in the server's order: the drain sees the late pod before it
	// sees the held pod gone, which it waits for before it looks for late pods.
	lift()
	sandboxtest.UntilPod(t, ctx, c.Client, "apps", "held", "the held pod gone", func(p *corev1.Pod) bool { return p == nil })
	// Real time: room for a drain that would wrongly go on as if the terminating pod were
	// gone, and end, to do so. Nothing the drain does says it decided to wait.
	time.Sleep(time.Second)
	select {
	case got := <-done:
		t.Fatalf("the drain ended while a terminating pod was still on the node: %+v, %v", got.res, got.err)
	default:
	}
	// What the pod's own controller does once it has cleaned up.
	if _, err := c.Client.CoreV1().Pods("apps").Patch(ctx, "stopping", "application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}

	got := <-done
	if got.err != nil {
		t.Fatalf("drain: %v", got.err)
	}
	evicted := map[string]bool{}
	for _, p := range got.res.Pods {
		evicted[p.Pod.Name] = !p.EvictedAt.IsZero() && !p.GoneAt.IsZero()
	}
	if len(evicted) != 2 || !evicted["held"] || !evicted["late"] {
		t.Errorf("evicted and gone: %v; want the listed pod and the late one", evicted)
	}
	if len(got.res.Skipped) != 1 || got.res.Skipped[0].Reason != ReasonTerminating {
		t.Errorf("skipped %+v; want the terminating pod", got.res.Skipped)
	}
	left, err := c.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		t.Fatal(err)
	}
	if len(left.Items) != 0 {
		t.Errorf("%d pods left on the node after the drain", len(left.Items))
	}
}

// A drain that starts before the informer's first list waits for it, and one whose deadline
// comes first says why it could not list.
func TestSharedInformerNotYetSynced(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, time.Minute)
	// No API server at all: the informer never lists.
	client := kubernetes.NewForConfigOrDie(&rest.Config{Host: "http://127.0.0.1:1"})
	shared := sharedPods(t, client)
	d := New(client, Options{Pods: shared})
	_, err := d.Drain(ctx, "n", time.Now().Add(300*time.Millisecond))
	if err == nil || !strings.Contains(err.Error(), "the deadline passed while listing") {
		t.Fatalf("drain against an informer that never lists: %v; want the deadline named", err)
	}
	if n := shared.Following(); n != 0 {
		t.Errorf("still following %d drains", n)
	}
}
