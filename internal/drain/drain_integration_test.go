// SPDX-License-Identifier: Apache-2.0

package drain

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"lifeboat.dev/lifeboat/internal/kube"
	"lifeboat.dev/lifeboat/test/sandbox"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

func testContext(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// createPods creates the pods on the API server, then gives them the phases and deletion
// state they were built with (status and deletion cannot be set on create).
// oneNodeCluster takes a sandbox cluster with opts and adds one kwok node; it returns the
// test's context, of d from then on (a cluster started or waited for under load may take most
// of a minute), the cluster and the node's name.
func oneNodeCluster(t *testing.T, d time.Duration, opts sandbox.ClusterOptions) (context.Context, *sandbox.Cluster, string) {
	t.Helper()
	c, _ := sandboxtest.Shared(t, opts)
	ctx := testContext(t, d)
	nodes, err := c.AddNodes(ctx, sandbox.NodeSpec{Index: 1})
	if err != nil {
		t.Fatal(err)
	}
	return ctx, c, nodes[0].Name
}

func createPods(t *testing.T, ctx context.Context, c *sandbox.Cluster, pods ...*corev1.Pod) {
	t.Helper()
	for _, p := range pods {
		if err := c.EnsureNamespace(ctx, p.Namespace); err != nil {
			t.Fatal(err)
		}
		want := p.DeepCopy()
		p = p.DeepCopy()
		p.UID, p.Status, p.DeletionTimestamp = "", corev1.PodStatus{}, nil
		if want.DeletionTimestamp != nil {
			p.Finalizers = []string{"lifeboat.dev/test-keep"} // keeps it terminating
		}
		created, err := c.Client.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create pod %s/%s: %v", p.Namespace, p.Name, err)
		}
		if want.Status.Phase == corev1.PodSucceeded || want.Status.Phase == corev1.PodFailed { // kwok, if running, sets Running itself
			created.Status.Phase = want.Status.Phase
			if _, err := c.Client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		if want.DeletionTimestamp != nil {
			if err := c.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// Invariant 1: the watch cache, a quorum read and an informer give identical selections.
func TestFilterMatrixIdenticalAcrossListSources(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 2*time.Minute)
	c, _ := sandboxtest.Shared(t, sandbox.ClusterOptions{NoKwok: true})
	const node = "n"
	if _, err := c.Client.CoreV1().Nodes().Create(ctx, sandbox.NodeSpec{Name: node}.Node(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createPods(t, ctx, c, matrixPods(node)...)
	// A pod on another node must never appear.
	createPods(t, ctx, c, newPod("apps", "elsewhere", "other-node", ownedBy("ReplicaSet", "web")))

	factory := informers.NewSharedInformerFactory(c.Client, 0)
	podInformer := factory.Core().V1().Pods().Informer()
	if err := IndexByNodeName(podInformer); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	factory.Start(stop)
	defer func() { close(stop); factory.Shutdown() }() // Shutdown waits for the informers to stop
	factory.WaitForCacheSync(ctx.Done())

	listers := map[string]PodLister{
		"watch cache": APILister{Client: c.Client},
		"quorum":      APILister{Client: c.Client, Quorum: true},
		"informer":    InformerLister{Informer: podInformer},
		// The controller's shared informer keeps Pods (KeepPod): what they drop of a
		// corev1.Pod must never change a selection.
		"shared informer of Pods": nodePodsLister{sharedPods(t, c.Client)},
	}
	for _, ignoreDS := range []bool{true, false} {
		for _, deleteLocal := range []bool{true, false} {
			policy := Policy{IgnoreDaemonSets: ignoreDS, DeleteLocalData: deleteLocal, OwnPod: types.NamespacedName{Namespace: "kube-system", Name: "lifeboat-abc"}}
			want := expectedSelection(ignoreDS, deleteLocal)
			for name, l := range listers {
				var got selection
				// The watch cache may lag a write by a moment; it must converge to the same answer.
				err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 5*time.Second, true, func(ctx context.Context) (bool, error) {
					pods, _, err := l.PodsOnNode(ctx, node)
					if err != nil {
						return false, err
					}
					got = summarize(Select(pods, policy, Terms{}))
					return got.equal(want), nil
				})
				if err != nil {
					t.Errorf("%s, IGNORE_DAEMON_SETS=%v DELETE_LOCAL_DATA=%v:\n got %+v\nwant %+v", name, ignoreDS, deleteLocal, got, want)
				}
			}
		}
	}
}

// lifeboatClient authenticates as "lifeboat" with Lifeboat's default rate limits, so the
// audit log can count its requests apart from the test's own.
func lifeboatClient(t *testing.T, c *sandbox.Cluster) kubernetes.Interface {
	t.Helper()
	rc, err := c.UserConfig("lifeboat", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	rc.QPS, rc.Burst = 100, 200 // KUBE_API_QPS / KUBE_API_BURST defaults
	return kubernetes.NewForConfigOrDie(rc)
}

func TestDrainEvictsInTiersWithFewRequests(t *testing.T) {
	t.Parallel()
	ctx, c, node := oneNodeCluster(t, 2*time.Minute, sandbox.ClusterOptions{AuditLog: true})
	var pods []*corev1.Pod
	for i := range 5 {
		pods = append(pods, newPod("apps", fmt.Sprintf("web-%d", i), node, ownedBy("ReplicaSet", "web")))
	}
	pods = append(pods,
		newPod("apps", "bare", node),
		newPod("kube-system", "coredns", node, ownedBy("ReplicaSet", "coredns"), critical("system-cluster-critical")),
		newPod("kube-system", "logs", node, ownedBy("DaemonSet", "logs")),
	)
	createPods(t, ctx, c, pods...)

	d := New(lifeboatClient(t, c), Options{Policy: Policy{IgnoreDaemonSets: true, DeleteLocalData: true}, PodGracePeriod: -1})
	res, err := d.Drain(ctx, node, time.Now().Add(time.Minute))
	if err != nil {
		t.Fatalf("drain: %v", err)
	}
	if len(res.Pods) != 7 || len(res.Skipped) != 1 || res.Skipped[0].Reason != ReasonDaemonSet {
		t.Fatalf("selected %d, skipped %+v", len(res.Pods), res.Skipped)
	}
	var lastWorkloadGone, criticalEvicted time.Time
	for _, p := range res.Pods {
		if p.GoneAt.IsZero() || p.Attempts != 1 || p.Error != "" {
			t.Errorf("pod %s: %+v", p.Pod, p)
		}
		switch p.Tier {
		case TierWorkload:
			if p.GoneAt.After(lastWorkloadGone) {
				lastWorkloadGone = p.GoneAt
			}
		case TierCritical:
			criticalEvicted = p.EvictedAt
		}
	}
	if !criticalEvicted.After(lastWorkloadGone) {
		t.Errorf("critical pod evicted at %v, before the last workload pod was gone at %v", criticalEvicted, lastWorkloadGone)
	}
	left, err := c.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		t.Fatal(err)
	}
	if len(left.Items) != 1 || left.Items[0].Name != "logs" {
		t.Errorf("pods left on the node: %d, want only the DaemonSet pod", len(left.Items))
	}
	events, verbs := lifeboatRequests(t, c)
	// One list, one watch, one eviction per pod: no per-pod GETs, no polling.
	if len(events) != 7+2 || verbs["create pods/eviction"] != 7 || verbs["list pods/"] != 1 || verbs["watch pods/"] != 1 {
		t.Errorf("%d requests %v, want 9: 1 list, 1 watch, 7 evictions", len(events), verbs)
	}
}

func TestPodDisruptionBudgets(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("needs the controller manager for PDB status")
	}
	ctx := testContext(t, 3*time.Minute)
	c, _ := sandboxtest.Shared(t, sandbox.ClusterOptions{ControllerManager: true})
	// The PDB controller only counts Ready pods; kwok makes them Ready.
	makeGuarded := func(t *testing.T, node, app string, pdb policyv1.PodDisruptionBudgetSpec) {
		t.Helper()
		for i := range 2 {
			// Bare pods: the garbage collector would delete pods whose owner does not exist.
			createPods(t, ctx, c, newPod("db", fmt.Sprintf("%s-%d", app, i), node, labels("app", app)))
		}
		pdb.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}
		if _, err := c.Client.PolicyV1().PodDisruptionBudgets("db").Create(ctx, &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: "db"}, Spec: pdb,
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
			p, err := c.Client.PolicyV1().PodDisruptionBudgets("db").Get(ctx, app, metav1.GetOptions{})
			return err == nil && p.Status.ObservedGeneration == p.Generation && p.Status.CurrentHealthy == 2, nil
		})
		if err != nil {
			t.Fatalf("PDB %s never computed: %v", app, err)
		}
	}

	t.Run("blocked evictions back off and succeed once the budget allows", func(t *testing.T) {
		nodes, err := c.AddNodes(ctx, sandbox.NodeSpec{Index: 1})
		if err != nil {
			t.Fatal(err)
		}
		two := intstr.FromInt32(2)
		makeGuarded(t, nodes[0].Name, "db", policyv1.PodDisruptionBudgetSpec{MinAvailable: &two})
		seen := &observed{}
		relaxedAt := make(chan time.Time, 1)
		go func() { // once the budget has refused both pods
			if !seen.waitBlocked(ctx, "db-0", "db-1") {
				t.Error("the budget never refused both pods")
			}
			relaxedAt <- time.Now()
			patch := []byte(`{"spec":{"minAvailable":0}}`)
			if _, err := c.Client.PolicyV1().PodDisruptionBudgets("db").Patch(ctx, "db", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
				t.Error(err)
			}
		}()
		// Instrumented and on protobuf, as Lifeboat's clients are: the budget's 429s are told
		// apart from throttling.
		rc := rest.CopyConfig(c.AdminConfig)
		rc.ContentType, rc.AcceptContentTypes = runtime.ContentTypeProtobuf, runtime.ContentTypeProtobuf+","+runtime.ContentTypeJSON
		heard := &heardCodes{}
		client, err := kube.NewClientset(kube.Instrumented(rc, "main", heard))
		if err != nil {
			t.Fatal(err)
		}
		d := New(client, Options{Policy: Policy{DeleteLocalData: true}, PodGracePeriod: -1, RetryMin: 100 * time.Millisecond, RetryMax: 400 * time.Millisecond,
			Observer: seen})
		res, err := d.Drain(ctx, nodes[0].Name, time.Now().Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		relaxed := <-relaxedAt
		for _, p := range res.Pods {
			if p.Attempts < 2 || p.Forced || p.EvictedAt.Before(relaxed) {
				t.Errorf("pod %s: %d attempts, forced %v, evicted %v after the budget allowed it; want refused first, then evicted once allowed", p.Pod, p.Attempts, p.Forced, p.EvictedAt.Sub(relaxed))
			}
			if p.BudgetRefusals != p.Attempts-1 {
				t.Errorf("pod %s: %d of %d attempts counted refused by the budget, want all but the last", p.Pod, p.BudgetRefusals, p.Attempts)
			}
		}
		if refusals, throttled := heard.counts(); refusals == 0 || throttled != 0 {
			t.Errorf("the client's observer heard %d evictions answered 429 and %d requests throttled; want the budget's refusals, none throttled", refusals, throttled)
		}
		// Each pod is reported blocked once, naming the budget and its numbers, then released.
		want := []string{"blocked db-0 by db: needs 2 healthy pods and has 2 currently", "blocked db-1 by db: needs 2 healthy pods and has 2 currently",
			"unblocked db-0 evicted=true", "unblocked db-1 evicted=true"}
		if got := seen.sorted(); !slices.Equal(got, want) {
			t.Errorf("observed %q, want %q", got, want)
		}
	})

	t.Run("with the force option, deleted near the deadline", func(t *testing.T) {
		nodes, err := c.AddNodes(ctx, sandbox.NodeSpec{Index: 2})
		if err != nil {
			t.Fatal(err)
		}
		zero := intstr.FromInt32(0)
		makeGuarded(t, nodes[0].Name, "ledger", policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &zero})
		d := New(c.Client, Options{Policy: Policy{DeleteLocalData: true}, PodGracePeriod: -1, ForceBeforeDeadline: 3 * time.Second,
			RetryMin: 100 * time.Millisecond, RetryMax: 400 * time.Millisecond})
		deadline := time.Now().Add(6 * time.Second)
		res, err := d.Drain(ctx, nodes[0].Name, deadline)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range res.Pods {
			if !p.Forced || p.GoneAt.IsZero() || p.EvictedAt.Before(deadline.Add(-3*time.Second-500*time.Millisecond)) {
				t.Errorf("pod %s: forced %v gone %v evicted %v before the deadline", p.Pod, p.Forced, !p.GoneAt.IsZero(), deadline.Sub(p.EvictedAt))
			}
		}
	})

	t.Run("with the force option but a patient deadline, nothing is forced", func(t *testing.T) {
		nodes, err := c.AddNodes(ctx, sandbox.NodeSpec{Index: 4})
		if err != nil {
			t.Fatal(err)
		}
		zero := intstr.FromInt32(0)
		makeGuarded(t, nodes[0].Name, "kept", policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &zero})
		d := New(c.Client, Options{Policy: Policy{DeleteLocalData: true}, PodGracePeriod: -1, ForceBeforeDeadline: 3 * time.Second,
			RetryMin: 100 * time.Millisecond, RetryMax: 400 * time.Millisecond})
		res, err := d.DrainUntil(ctx, nodes[0].Name, NewPatientDeadline(time.Now().Add(4*time.Second)), Terms{})
		if err == nil {
			t.Fatal("drain reported success with pods still protected")
		}
		for _, p := range res.Pods {
			if p.Forced || !p.EvictedAt.IsZero() {
				t.Errorf("pod %s: forced %v, evicted %v; want it left to its budget", p.Pod, p.Forced, !p.EvictedAt.IsZero())
			}
		}
	})

	t.Run("without it, the drain reports the blocked pods at the deadline", func(t *testing.T) {
		nodes, err := c.AddNodes(ctx, sandbox.NodeSpec{Index: 3})
		if err != nil {
			t.Fatal(err)
		}
		zero := intstr.FromInt32(0)
		makeGuarded(t, nodes[0].Name, "vault", policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &zero})
		d := New(c.Client, Options{Policy: Policy{DeleteLocalData: true}, PodGracePeriod: -1, RetryMin: 100 * time.Millisecond, RetryMax: 400 * time.Millisecond})
		res, err := d.Drain(ctx, nodes[0].Name, time.Now().Add(2*time.Second))
		if err == nil {
			t.Fatal("drain reported success with pods still protected")
		}
		if left := res.Remaining(); len(left) != 2 || left[0].Error == "" || left[0].Attempts < 2 {
			t.Errorf("remaining %+v", left)
		}
		if !strings.Contains(err.Error(), "held by PodDisruptionBudget vault") {
			t.Errorf("the drain's error does not name the budget: %v", err)
		}
	})
}

// heardCodes is a kube.RequestObserver that counts evictions answered 429 and requests
// throttled.
type heardCodes struct {
	mu                  sync.Mutex
	refusals, throttled int
}

func (h *heardCodes) KubeRequest(_, _, resource, code string, throttled bool, _ time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if resource == "pods/eviction" && code == "429" {
		h.refusals++
	}
	if throttled {
		h.throttled++
	}
}

func (h *heardCodes) counts() (refusals, throttled int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.refusals, h.throttled
}

// observed is an Observer that notes what it hears.
type observed struct {
	mu      sync.Mutex
	said    []string
	blocked map[string]chan struct{} // closed once the pod is reported blocked
}

func (o *observed) Blocked(pod *Pod, by Blocker) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.said = append(o.said, fmt.Sprintf("blocked %s by %s: %s", pod.Name, by.Budget, by.Detail))
	close(o.blockedChan(pod.Name))
}

func (o *observed) Unblocked(pod *Pod, by Blocker, evicted bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.said = append(o.said, fmt.Sprintf("unblocked %s evicted=%v", pod.Name, evicted))
}

// blockedChan is closed once pod is reported blocked; o.mu is held.
func (o *observed) blockedChan(pod string) chan struct{} {
	if o.blocked == nil {
		o.blocked = map[string]chan struct{}{}
	}
	if o.blocked[pod] == nil {
		o.blocked[pod] = make(chan struct{})
	}
	return o.blocked[pod]
}

// waitBlocked waits until each of pods has been reported blocked (its eviction refused),
// and reports whether they were before ctx ended.
func (o *observed) waitBlocked(ctx context.Context, pods ...string) bool {
	for _, pod := range pods {
		o.mu.Lock()
		ch := o.blockedChan(pod)
		o.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
	return true
}

func (o *observed) sorted() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Sorted(slices.Values(o.said))
}

// staleLister returns the real pods plus one the server no longer has, with the server's
// current resourceVersion, as a lagging informer can.
type staleLister struct {
	PodLister
	ghost *corev1.Pod
}

func (l staleLister) PodsOnNode(ctx context.Context, node string) ([]*Pod, string, error) {
	pods, rv, err := l.PodLister.PodsOnNode(ctx, node)
	return append(pods, NewPod(l.ghost)), rv, err
}

func TestPodAlreadyGoneDoesNotHoldTheDrain(t *testing.T) {
	t.Parallel()
	ctx, c, node := oneNodeCluster(t, time.Minute, sandbox.ClusterOptions{})
	createPods(t, ctx, c, newPod("apps", "real", node, ownedBy("ReplicaSet", "web")))
	ghost := newPod("apps", "ghost", node, ownedBy("ReplicaSet", "web"))
	d := New(c.Client, Options{Policy: Policy{DeleteLocalData: true}, PodGracePeriod: -1,
		Lister: staleLister{PodLister: APILister{Client: c.Client, Quorum: true}, ghost: ghost}})
	start := time.Now()
	res, err := d.Drain(ctx, node, time.Now().Add(30*time.Second))
	if err != nil {
		t.Fatalf("drain: %v", err)
	}
	if took := time.Since(start); took > 10*time.Second || len(res.Remaining()) != 0 {
		t.Errorf("took %v, remaining %+v: a pod that is already gone must not be waited for", took, res.Remaining())
	}
}

// A pod bound to the node after the drain listed it (the scheduler decided before the cordon)
// is drained too, and the drain ends only when it is gone.
func TestPodArrivingDuringTheDrainIsDrainedToo(t *testing.T) {
	t.Parallel()
	ctx, c, node := oneNodeCluster(t, time.Minute, sandbox.ClusterOptions{})
	lift := createHeldPod(t, ctx, c, node)

	seen := &observed{}
	d := New(c.Client, Options{Policy: Policy{DeleteLocalData: true}, PodGracePeriod: -1, RetryMin: 50 * time.Millisecond, Observer: seen})
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
	createPods(t, ctx, c, newPod("apps", "late", node, ownedBy("ReplicaSet", "web")))
	// The drain's watch delivers events in the server's order: it sees the late pod before it
	// sees the held pod gone, which it waits for before it looks for late pods.
	lift()

	got := <-done
	if got.err != nil {
		t.Fatalf("drain: %v", got.err)
	}
	evicted := map[string]bool{}
	for _, p := range got.res.Pods {
		evicted[p.Pod.Name] = !p.EvictedAt.IsZero() && !p.GoneAt.IsZero()
	}
	if !evicted["held"] || !evicted["late"] {
		t.Errorf("evicted and gone: %v; want both the listed pod and the late one", evicted)
	}
	if _, err := c.Client.CoreV1().Pods("apps").Get(ctx, "late", metav1.GetOptions{}); err == nil {
		t.Error("the late pod is still on the node after the drain")
	}
}

// lifeboatRequests returns the audit log's requests by the "lifeboat" user, and their count
// by "verb resource/subresource".
func lifeboatRequests(t *testing.T, c *sandbox.Cluster) ([]sandbox.AuditEvent, map[string]int) {
	t.Helper()
	events, err := c.AuditEvents(sandbox.ByUser("lifeboat"))
	if err != nil {
		t.Fatal(err)
	}
	verbs := map[string]int{}
	for _, e := range events {
		verbs[e.Verb+" "+e.ObjectRef.Resource+"/"+e.ObjectRef.Subresource]++
	}
	return events, verbs
}

// createHeldPod creates apps/held on node, running, with a PodDisruptionBudget that refuses
// its eviction until lift is called.
func createHeldPod(t *testing.T, ctx context.Context, c *sandbox.Cluster, node string, others ...*corev1.Pod) (lift func()) {
	t.Helper()
	held := newPod("apps", "held", node, ownedBy("ReplicaSet", "db"))
	held.Labels = map[string]string{"app": "db"}
	createPods(t, ctx, c, append([]*corev1.Pod{held}, others...)...)
	lift = sandboxtest.BlockEvictions(t, ctx, c, "apps", map[string]string{"app": "db"})
	// A budget protects only running pods: a pending one is evicted whatever it says.
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := c.Client.CoreV1().Pods("apps").Get(ctx, "held", metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning, nil
	})
	if err != nil {
		t.Fatalf("the held pod never ran: %v", err)
	}
	return lift
}

// A deadline brought forward while a pod is already leaving cuts that pod's grace period, so
// it ends before the new deadline rather than under a vanishing instance.
func TestTightenedDeadlineCutsTheGraceOfLeavingPods(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 2*time.Minute)
	c, _ := sandboxtest.Shared(t, sandbox.ClusterOptions{})
	// A node no kubelet (nor kwok) runs: its pods' deletions keep the grace period they
	// were given, so it can be read.
	const node = "unattended"
	if _, err := c.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// "slow" is evicted by the drain; "leaving" was deleted before it, by someone else.
	createPods(t, ctx, c, newPod("apps", "slow", node, ownedBy("ReplicaSet", "slow"), grace(600)),
		newPod("apps", "leaving", node, ownedBy("ReplicaSet", "leaving"), grace(600)))
	pods := c.Client.CoreV1().Pods("apps")
	if err := pods.Delete(ctx, "leaving", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	graceLeft := func(name string) (int64, bool) {
		p, err := pods.Get(ctx, name, metav1.GetOptions{})
		if err != nil || p.DeletionGracePeriodSeconds == nil {
			return 0, false
		}
		return *p.DeletionGracePeriodSeconds, true
	}

	d := New(c.Client, Options{Policy: Policy{DeleteLocalData: true}, PodGracePeriod: -1})
	deadline := NewDeadline(time.Now().Add(time.Hour))
	done := make(chan error, 1)
	go func() {
		_, err := d.DrainUntil(ctx, node, deadline, Terms{})
		done <- err
	}()
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		_, evicted := graceLeft("slow")
		return evicted, nil
	})
	if err != nil {
		t.Fatalf("the pod was never evicted: %v", err)
	}
	for _, name := range []string{"slow", "leaving"} {
		if g, _ := graceLeft(name); g != 600 {
			t.Fatalf("%s: deleted with a grace period of %d s, want the pod's own 600 s", name, g)
		}
	}
	deadline.Tighten(time.Now().Add(20 * time.Second))
	for _, name := range []string{"slow", "leaving"} {
		err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			g, _ := graceLeft(name)
			return g <= 20, nil
		})
		if g, _ := graceLeft(name); err != nil {
			t.Fatalf("%s: grace period still %d s after the deadline moved to 20 s from now", name, g)
		}
	}
	// What a kubelet does once the pods have stopped.
	zero := int64(0)
	for _, name := range []string{"slow", "leaving"} {
		if err := pods.Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("drain: %v", err)
	}
}

// A pod marked not to disrupt leaves last under a reclaim, at the deadline minus its grace
// period (earlier when the deadline moves earlier); under a notice that is no reclaim it
// stays, and the drain reports it as held.
func TestDoNotDisruptLeavesLastAndOnlyUnderAReclaim(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 2*time.Minute)
	c, _ := sandboxtest.Shared(t, sandbox.ClusterOptions{})
	nodes, err := c.AddNodes(ctx, sandbox.NodeSpec{Index: 1}, sandbox.NodeSpec{Index: 2}, sandbox.NodeSpec{Index: 3})
	if err != nil {
		t.Fatal(err)
	}
	// Pods web-i and batch-i on node i (pod names must not carry the nodes' dots). The pinned
	// pod belongs to a StatefulSet: kwok completes Job pods at once, and a finished pod holds
	// nothing.
	podsOn := func(i int) string {
		node := nodes[i].Name
		createPods(t, ctx, c, newPod("apps", fmt.Sprint("web-", i), node, ownedBy("ReplicaSet", "web")),
			newPod("apps", fmt.Sprint("batch-", i), node, ownedBy("StatefulSet", "batch"), annotated(AnnotationDoNotDisrupt, "true"), grace(3)))
		return node
	}
	outcome := func(res *Result, name string) PodOutcome {
		for _, p := range res.Pods {
			if p.Pod.Name == name {
				return p
			}
		}
		t.Fatalf("%s was not selected: %+v", name, res.Pods)
		return PodOutcome{}
	}
	// A quorum read: the watch cache may not hold pods created a moment ago yet.
	d := New(c.Client, Options{Policy: Policy{DeleteLocalData: true}, PodGracePeriod: -1, Lister: APILister{Client: c.Client, Quorum: true}})

	t.Run("reclaim", func(t *testing.T) {
		node := podsOn(0)
		start := time.Now()
		deadline := start.Add(12 * time.Second)
		res, err := d.DrainUntil(ctx, node, NewDeadline(deadline), Terms{Reclaim: true})
		if err != nil {
			t.Fatalf("drain: %v", err)
		}
		web, batch := outcome(res, "web-0"), outcome(res, "batch-0")
		if at := web.EvictedAt.Sub(start); at > 3*time.Second {
			t.Errorf("the ordinary pod was evicted %v after the start; want at once", at)
		}
		// Its turn: the deadline (12 s) minus its grace period (3 s) minus the margin (2 s).
		if at := batch.EvictedAt.Sub(start); at < 6*time.Second || at > 9*time.Second {
			t.Errorf("the pod marked not to disrupt was evicted %v after the start; want about 7 s", at)
		}
		if batch.GoneAt.IsZero() || batch.GoneAt.After(deadline) {
			t.Errorf("the pod marked not to disrupt was gone at %v, deadline %v", batch.GoneAt, deadline)
		}
		if len(res.Held()) != 0 {
			t.Errorf("held under a reclaim: %+v", res.Held())
		}
	})

	t.Run("no reclaim", func(t *testing.T) {
		node := podsOn(1)
		start := time.Now()
		res, err := d.DrainUntil(ctx, node, NewDeadline(start.Add(time.Minute)), Terms{})
		if err != nil {
			t.Fatalf("drain: %v", err)
		}
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("the drain took %v; the held pod must not be waited for", took)
		}
		held := res.Held()
		if len(held) != 1 || held[0].Pod.Name != "batch-1" {
			t.Fatalf("held: %+v; want the pod marked not to disrupt (skipped %+v, pods %+v)", held, res.Skipped, res.Pods)
		}
		p, err := c.Client.CoreV1().Pods("apps").Get(ctx, "batch-1", metav1.GetOptions{})
		if err != nil || p.DeletionTimestamp != nil {
			t.Errorf("the held pod was disturbed: %v %v", err, p.GetDeletionTimestamp())
		}
		if _, err := c.Client.CoreV1().Pods("apps").Get(ctx, "web-1", metav1.GetOptions{}); err == nil {
			t.Error("the ordinary pod is still there")
		}
	})

	t.Run("deadline brought forward", func(t *testing.T) {
		node := podsOn(2)
		deadline := NewDeadline(time.Now().Add(10 * time.Minute))
		done := make(chan *Result, 1)
		go func() {
			res, err := d.DrainUntil(ctx, node, deadline, Terms{Reclaim: true})
			if err != nil {
				t.Errorf("drain: %v", err)
			}
			done <- res
		}()
		// The drain is under way: the ordinary pod is leaving, and batch-2 waits for its turn.
		sandboxtest.UntilPod(t, ctx, c.Client, "apps", "web-2", "web-2 evicted", func(p *corev1.Pod) bool { return p == nil || p.DeletionTimestamp != nil })
		tightened := time.Now()
		deadline.Tighten(tightened.Add(8 * time.Second))
		res := <-done
		if res == nil {
			return
		}
		if at := outcome(res, "batch-2").EvictedAt.Sub(tightened); at < 2*time.Second || at > 5*time.Second {
			t.Errorf("evicted %v after the deadline moved to 8 s from then; want about 3 s", at)
		}
	})
}

// patchAfterList lists like the default lister, then changes one pod the drain will skip, so
// the drain's watch (which starts from the list's resourceVersion) reports it as modified.
type patchAfterList struct {
	APILister
	pod types.NamespacedName
}

func (l patchAfterList) PodsOnNode(ctx context.Context, node string) ([]*Pod, string, error) {
	pods, rv, err := l.APILister.PodsOnNode(ctx, node)
	if err != nil {
		return nil, "", err
	}
	patch := []byte(`{"metadata":{"labels":{"restarted":"yes"}}}`)
	if _, err := l.Client.CoreV1().Pods(l.pod.Namespace).Patch(ctx, l.pod.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return nil, "", err
	}
	return pods, rv, nil
}

// A DaemonSet pod that changes during the drain is decided again from the watch, but the
// result names it once: each skipped pod is reported (and evented) a single time.
func TestSkippedPodChangingMidDrainIsReportedOnce(t *testing.T) {
	t.Parallel()
	ctx, c, node := oneNodeCluster(t, 2*time.Minute, sandbox.ClusterOptions{})
	createPods(t, ctx, c,
		newPod("apps", "web-0", node, ownedBy("ReplicaSet", "web")),
		newPod("apps", "web-1", node, ownedBy("ReplicaSet", "web")),
		newPod("kube-system", "logs", node, ownedBy("DaemonSet", "logs")),
	)
	lister := patchAfterList{APILister: APILister{Client: c.Client}, pod: types.NamespacedName{Namespace: "kube-system", Name: "logs"}}
	d := New(c.Client, Options{Policy: Policy{IgnoreDaemonSets: true}, PodGracePeriod: -1, Lister: lister})
	res, err := d.Drain(ctx, node, time.Now().Add(time.Minute))
	if err != nil {
		t.Fatalf("drain: %v", err)
	}
	if len(res.Pods) != 2 {
		t.Errorf("evicted %d pods, want the 2 ReplicaSet pods: %+v", len(res.Pods), res.Pods)
	}
	if len(res.Skipped) != 1 || res.Skipped[0].Pod.Name != "logs" || res.Skipped[0].Reason != ReasonDaemonSet {
		t.Errorf("skipped %+v, want the DaemonSet pod once", res.Skipped)
	}
}
