// SPDX-License-Identifier: Apache-2.0

package agent_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"lifeboat.dev/lifeboat/internal/agent"
	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/episode"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/record"
	"lifeboat.dev/lifeboat/internal/source/imds"
	"lifeboat.dev/lifeboat/test/sandbox"
	"lifeboat.dev/lifeboat/test/sandbox/fakeaws"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

const spotPath = "/latest/meta-data/spot/instance-action"

// world is one subtest's node, its instance-metadata mock and a client for the agent.
type world struct {
	c        *sandbox.Cluster
	node     string
	instance string
	proxy    *sandbox.IMDSProxy
	user     string
	client   kubernetes.Interface
	logs     *sandboxtest.LogBuffer
	metrics  *metrics.Metrics
}

var worlds atomic.Int32 // each world its own node and user

func newWorld(t testing.TB, c *sandbox.Cluster, mockArgs []string) *world {
	t.Helper()
	index := int(worlds.Add(1))
	ctx := context.Background()
	spec := sandbox.NodeSpec{Index: index}
	created, err := c.AddNodes(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	instance := episode.InstanceIDOf(created[0])
	m := sandboxtest.IMDS(t, sandbox.IMDSOptions{InstanceID: instance, Hostname: created[0].Name, Args: mockArgs})
	user := fmt.Sprintf("lifeboat-agent-%d", index)
	rc, err := c.UserConfig(user, "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	rc.QPS, rc.Burst = 100, 200
	return &world{c: c, node: created[0].Name, instance: instance, proxy: sandboxtest.IMDSProxy(t, m), user: user,
		client: kubernetes.NewForConfigOrDie(rc), logs: &sandboxtest.LogBuffer{}, metrics: metrics.New()}
}

// start runs an agent until the returned stop is called (or the test ends).
func (w *world) start(t testing.TB, env ...string) (a *agent.Agent, stop func() error) {
	t.Helper()
	defaults := []string{"NODE_NAME", w.node, "INSTANCE_METADATA_URL", w.proxy.URL, "IMDS_POLL_INTERVAL", "200ms", "LOG_LEVEL", "debug"}
	cfg := sandboxtest.Config(t, config.ModeAgent, append(defaults, env...)...)
	logger := slog.New(slog.NewTextHandler(w.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	a = agent.New(agent.Options{Config: cfg, Client: w.client, IMDS: imds.NewClient(cfg.MetadataURL, cfg.MetadataTries, false), Logger: logger,
		FailingAfter: 2 * time.Second, Metrics: w.metrics})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var once sync.Once
	var result error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case result = <-done:
			case <-time.After(10 * time.Second):
				result = errors.New("agent did not stop within 10 s")
			}
		})
		return result
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("agent log:\n%s", w.logs)
		}
	})
	return a, stop
}

func (w *world) addPods(t testing.TB, pods ...*corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	for _, p := range pods {
		if err := w.c.EnsureNamespace(ctx, p.Namespace); err != nil {
			t.Fatal(err)
		}
		p.Spec.NodeName = w.node
		p.Spec.Containers = []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}
		if _, err := w.c.Client.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

func replicaSetPods(ns, prefix string, n int) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range n {
		out = append(out, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%d", prefix, i),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: prefix, UID: types.UID("rs-" + prefix), Controller: ptr.To(true)}}}})
	}
	return out
}

func (w *world) record(t testing.TB) (record.Record, *corev1.Node) {
	t.Helper()
	n, err := w.c.Client.CoreV1().Nodes().Get(context.Background(), w.node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := record.Read(n)
	if err != nil {
		t.Fatal(err)
	}
	return r, n
}

func (w *world) waitPhase(t testing.TB, phase record.Phase, timeout time.Duration) record.Record {
	t.Helper()
	var r record.Record
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		r, _ = w.record(t)
		return r.Phase >= phase, nil
	})
	if err != nil {
		t.Fatalf("node %s never reached phase %s (record %+v)", w.node, phase, r)
	}
	return r
}

// evictionsByPod counts the agent's eviction requests per pod, from the audit log.
func (w *world) evictionsByPod(t testing.TB) map[string]int {
	t.Helper()
	events, err := w.c.AuditEvents(sandbox.ByUser(w.user))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, e := range events {
		if e.Verb == "create" && e.ObjectRef != nil && e.ObjectRef.Subresource == "eviction" {
			out[e.ObjectRef.Name]++
		}
	}
	return out
}

func (w *world) nodeWrites(t testing.TB) int {
	t.Helper()
	events, err := w.c.AuditEvents(sandbox.ByUser(w.user))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range events {
		// The node condition's writes (the status) follow the phases in the background: what the
		// record and the cordon cost is counted here.
		if e.ObjectRef != nil && e.ObjectRef.Resource == "nodes" && e.ObjectRef.Subresource == "" && (e.Verb == "patch" || e.Verb == "update") {
			n++
		}
	}
	return n
}

// podLists counts the agent's reads of pods (lists and watches), from the audit log.
func (w *world) podLists(t testing.TB) int {
	t.Helper()
	events, err := w.c.AuditEvents(sandbox.ByUser(w.user))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range events {
		if e.ObjectRef != nil && e.ObjectRef.Resource == "pods" && e.ObjectRef.Subresource == "" && e.Verb == "list" {
			n++
		}
	}
	return n
}

func podsLeft(t testing.TB, w *world) []string {
	t.Helper()
	list, err := w.c.Client.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{FieldSelector: "spec.nodeName=" + w.node})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range list.Items {
		names = append(names, p.Name)
	}
	return names
}

// longRun is how many polls the "for a while" scenarios last: a few seconds in `make test`,
// two minutes of polls at the fastest interval with LIFEBOAT_LONG=1 (the fault suite).
func longRun() int64 {
	if os.Getenv("LIFEBOAT_LONG") != "" {
		return 1200
	}
	return 30
}

// awaitPolls waits until the agent's polls of path (an imds.Path*) have had n more answers:
// what a "while" means to an agent that reads instance metadata at its own pace. It fails
// the test after a minute.
func (w *world) awaitPolls(t testing.TB, path string, n int64) {
	t.Helper()
	full := "/latest/meta-data/" + path
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute+time.Duration(n)*time.Second)
	defer cancel()
	if want := w.proxy.Answered(full) + n; !w.proxy.AwaitAnswered(ctx, full, want) {
		t.Fatalf("%s answered %d times, want %d", full, w.proxy.Answered(full), want)
	}
}

func TestAgentEndToEnd(t *testing.T) {
	c := sandboxtest.Cluster(t, sandbox.ClusterOptions{AuditLog: true})
	inTwoMinutes := func() string { return time.Now().Add(2 * time.Minute).UTC().Format(time.RFC3339) }

	t.Run("spot notice: taint, label, cordon and drain the right node", func(t *testing.T) {
		t.Parallel() // each on a node of its own
		w := newWorld(t, c, []string{"spot", "-a", "terminate", "-t", inTwoMinutes()})
		bystander := newWorld(t, c, []string{"spot", "-a", "terminate", "-t", inTwoMinutes()}) // another node, no agent
		w.addPods(t, replicaSetPods("shop", "web", 5)...)
		ds := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "logs-x",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "logs", UID: "ds-logs", Controller: ptr.To(true)}}}}
		w.addPods(t, ds)
		w.start(t, "TAINT_NODE", "true", "EXCLUDE_FROM_LOAD_BALANCERS", "true")

		r := w.waitPhase(t, record.PhaseDrained, 30*time.Second)
		wantID := "spot-" + w.instance + "-terminate"
		if len(r.Notices) != 1 || r.Notices[0] != wantID {
			t.Errorf("record notices %v, want [%s]", r.Notices, wantID)
		}
		_, n := w.record(t)
		var taint *corev1.Taint
		for i := range n.Spec.Taints {
			if n.Spec.Taints[i].Key == nodes.TaintSpotInterruption {
				taint = &n.Spec.Taints[i]
			}
		}
		if taint == nil || taint.Value != wantID || taint.Effect != corev1.TaintEffectNoSchedule {
			t.Errorf("spot taint %+v", taint)
		}
		if !n.Spec.Unschedulable || n.Labels[nodes.LabelExcludeFromLoadBalancers] != "true" || n.Annotations[nodes.AnnotationCordonedBy] != "true" {
			t.Errorf("node not cordoned and labelled: unschedulable %v labels %v", n.Spec.Unschedulable, n.Labels)
		}
		if left := podsLeft(t, w); len(left) != 1 || left[0] != "logs-x" {
			t.Errorf("pods left %v, want only the DaemonSet pod", left)
		}
		if _, other := bystander.record(t); other.Spec.Unschedulable || len(other.Annotations[record.Annotation]) > 0 {
			t.Error("a node without an agent was touched")
		}
	})

	t.Run("ASG Terminated for a while: each pod evicted once, few node writes", func(t *testing.T) {
		t.Parallel() // each on a node of its own
		w := newWorld(t, c, []string{"asglifecycle", "--asg-termination-delay-sec", "0"})
		w.addPods(t, replicaSetPods("shop", "api", 10)...)
		w.start(t, "ENABLE_ASG_LIFECYCLE_DRAINING", "true", "IMDS_POLL_INTERVAL", "100ms")
		w.waitPhase(t, record.PhaseDrained, 30*time.Second)
		w.awaitPolls(t, imds.PathLifecycleState, longRun()) // IMDS keeps saying Terminated all along
		ev := w.evictionsByPod(t)
		if len(ev) != 10 {
			t.Errorf("%d pods evicted, want 10: %v", len(ev), ev)
		}
		for pod, n := range ev {
			if n != 1 {
				t.Errorf("pod %s evicted %d times", pod, n)
			}
		}
		if writes := w.nodeWrites(t); writes > 10 {
			t.Errorf("%d node writes, want at most 10", writes)
		} else {
			t.Logf("node writes: %d; evictions: %d; IMDS requests: %d over %d polls after the drain", writes, len(ev), w.proxy.Requests(), longRun())
		}
		if !strings.Contains(w.logs.String(), "lifecycle hook times out") {
			t.Error("no log line saying the lifecycle hook will time out in agent mode")
		}
	})

	t.Run("ASG Terminated with a hook name: lifecycle action completed once, after the drain", func(t *testing.T) {
		t.Parallel() // each on a node of its own
		w := newWorld(t, c, []string{"asglifecycle", "--asg-termination-delay-sec", "0"})
		fake := sandboxtest.FakeAWS(t, "")
		fake.AddInstance(fakeaws.Instance{ID: w.instance, AutoScalingGroup: "workers"})
		fake.AddLifecycleHook(fakeaws.LifecycleHook{Name: "drain", AutoScalingGroup: "workers"})
		fake.BeginLifecycleAction("drain", "workers", w.instance, "token-1")
		w.addPods(t, replicaSetPods("shop", "worker", 4)...)
		env := []string{"ENABLE_ASG_LIFECYCLE_DRAINING", "true", "ASG_LIFECYCLE_HOOK_NAME", "drain", "AWS_ENDPOINT", fake.URL(), "AWS_REGION", "us-east-1"}
		_, stop := w.start(t, env...)
		w.waitPhase(t, record.PhaseDrained, 30*time.Second)
		result, completed, _, _ := fake.LifecycleAction("token-1")
		if !completed || result != "CONTINUE" {
			t.Fatalf("lifecycle action completed=%v result=%q", completed, result)
		}
		var completedAt time.Time
		for _, call := range fake.Calls() {
			if call.Action == "CompleteLifecycleAction" {
				completedAt = call.At
			}
		}
		if left := podsLeft(t, w); len(left) != 0 {
			t.Errorf("pods %v still on the node", left)
		}
		if completedAt.IsZero() {
			t.Fatal("no CompleteLifecycleAction call recorded")
		}
		evictions := 0
		for _, e := range auditOf(t, w.c, w.user) {
			if e.ObjectRef != nil && e.ObjectRef.Subresource == "eviction" {
				evictions++
				if !e.StageTimestamp.Before(completedAt) {
					t.Errorf("pod %s evicted at %v, after the lifecycle action was completed at %v", e.ObjectRef.Name, e.StageTimestamp, completedAt)
				}
			}
		}
		if evictions != 4 {
			t.Errorf("%d evictions, want 4", evictions)
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		w.start(t, env...)                          // a restarted agent must not complete it again
		w.awaitPolls(t, imds.PathLifecycleState, 5) // each one says Terminated
		if n := fake.CallCount("autoscaling", "CompleteLifecycleAction"); n != 1 {
			t.Errorf("%d CompleteLifecycleAction calls, want exactly 1", n)
		}
	})

	t.Run("a spot time that moves on every poll is one drain", func(t *testing.T) {
		t.Parallel()                                             // each on a node of its own
		w := newWorld(t, c, []string{"spot", "-a", "terminate"}) // no -t: the mock restates the time each time
		w.addPods(t, replicaSetPods("shop", "cart", 5)...)
		w.start(t)
		r := w.waitPhase(t, record.PhaseDrained, 30*time.Second)
		w.awaitPolls(t, imds.PathSpot, 10) // each one states another time
		if r, _ = w.record(t); len(r.Notices) != 1 {
			t.Errorf("record lists %d notices: %v", len(r.Notices), r.Notices)
		}
		for pod, n := range w.evictionsByPod(t) {
			if n != 1 {
				t.Errorf("pod %s evicted %d times", pod, n)
			}
		}
	})

	t.Run("an agent stopped mid-drain is resumed by the next one without repeating", func(t *testing.T) {
		t.Parallel() // each on a node of its own
		w := newWorld(t, c, []string{"spot", "-a", "terminate", "-t", inTwoMinutes()})
		// Workload pods hold a finalizer: once evicted they stay terminating, so the drain
		// waits on them before the critical tier, and the first agent can be stopped there.
		stuck := replicaSetPods("shop", "slow", 3)
		for _, p := range stuck {
			p.Finalizers = []string{"lifeboat.dev/test-hold"}
		}
		w.addPods(t, stuck...)
		critical := replicaSetPods("kube-system", "dns", 2)
		for _, p := range critical {
			p.Spec.PriorityClassName = "system-cluster-critical"
		}
		w.addPods(t, critical...)

		_, stop := w.start(t)
		err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			return len(w.evictionsByPod(t)) == 3, nil
		})
		if err != nil {
			t.Fatalf("first agent never evicted the workload tier: %v", w.evictionsByPod(t))
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if r, _ := w.record(t); r.Phase != record.PhaseDraining {
			t.Fatalf("after the stop the record says %s, want draining", r.Phase)
		}
		listed := w.podLists(t)
		w.start(t)
		// The second agent has taken the drain up again: it has read the node's pods.
		err = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			return w.podLists(t) > listed, nil
		})
		if err != nil {
			t.Fatal("the second agent never read the node's pods")
		}
		for _, p := range stuck { // let the terminating pods finish
			patch := []byte(`{"metadata":{"finalizers":null}}`)
			if _, err := w.c.Client.CoreV1().Pods(p.Namespace).Patch(context.Background(), p.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		w.waitPhase(t, record.PhaseDrained, 30*time.Second)
		ev := w.evictionsByPod(t)
		if len(ev) != 5 {
			t.Errorf("evicted %v, want all 5 pods", ev)
		}
		for pod, n := range ev {
			if n != 1 {
				t.Errorf("pod %s evicted %d times across the restart", pod, n)
			}
		}
		if left := podsLeft(t, w); len(left) != 0 {
			t.Errorf("pods left: %v", left)
		}
	})

	t.Run("failing instance metadata: no crash, unhealthy, then recovery", func(t *testing.T) {
		t.Parallel() // each on a node of its own
		w := newWorld(t, c, []string{"spot", "-a", "terminate", "-t", inTwoMinutes()})
		w.addPods(t, replicaSetPods("shop", "db", 2)...)
		w.proxy.Hide(spotPath)
		a, _ := w.start(t)
		waitHealthy := func(want bool) {
			t.Helper()
			err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
				return (a.Healthy() == nil) == want, nil
			})
			if err != nil {
				t.Fatalf("healthy never became %v: %v", want, a.Healthy())
			}
		}
		waitHealthy(true)
		for _, f := range []sandbox.IMDSFault{sandbox.IMDSServerError, sandbox.IMDSGarbage} {
			w.proxy.SetFault(f)
			waitHealthy(false)
			// The agent backs off, and goes on polling: a wait for its polls fails if it stopped.
			w.awaitPolls(t, imds.PathSpot, max(longRun()/100, 1))
			w.proxy.SetFault(sandbox.IMDSHealthy)
			waitHealthy(true)
		}
		w.proxy.Show(spotPath)
		w.waitPhase(t, record.PhaseDrained, 30*time.Second)
		failed := w.metrics.Value("lifeboat_imds_polls_total", "path", imds.PathSpot, "result", "error")
		ok := w.metrics.Value("lifeboat_imds_polls_total", "path", imds.PathSpot, "result", "ok")
		if failed < 2 || ok < 2 {
			t.Errorf("lifeboat_imds_polls_total for the spot path: %v errors, %v ok; want both counted", failed, ok)
		}
		if n := w.metrics.Value("lifeboat_notices_total", "kind", "spot_interruption", "source", "imds"); n != 1 {
			t.Errorf("lifeboat_notices_total = %v, want 1", n)
		}
		logs := w.logs.String()
		for _, want := range []string{"instance metadata poll failed", "500", "instance metadata answers again"} {
			if !strings.Contains(logs, want) {
				t.Errorf("logs lack %q", want)
			}
		}
	})

	t.Run("scheduled reboot: drained, then uncordoned once the node has rebooted", func(t *testing.T) {
		t.Parallel() // each on a node of its own
		w := newWorld(t, c, []string{"events", "--code", "system-reboot", "--state", "active", "--not-before", inTwoMinutes()})
		w.addPods(t, replicaSetPods("shop", "batch", 3)...)
		uptime := filepath.Join(t.TempDir(), "uptime")
		if err := os.WriteFile(uptime, []byte("86400.00 170000.00\n"), 0o600); err != nil { // up for a day
			t.Fatal(err)
		}
		// The fastest poll interval: the scheduled-events path is read every tenth.
		_, stop := w.start(t, "TAINT_NODE", "true", "UPTIME_FROM_FILE", uptime, "IMDS_POLL_INTERVAL", "100ms")
		r := w.waitPhase(t, record.PhaseDrained, 30*time.Second)
		if r.RebootAfter.IsZero() || len(r.Notices) != 1 || !strings.HasPrefix(r.Notices[0], "sched-"+w.instance) {
			t.Fatalf("record %+v", r)
		}
		if _, n := w.record(t); n.Labels[nodes.LabelUncordonAfterReboot] != "true" {
			t.Errorf("labels %v lack %s", n.Labels, nodes.LabelUncordonAfterReboot)
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		// The instance reboots: the agent starts again with a fresh uptime, one that puts the
		// boot after the time the record waits for a reboot from. The mock still reports the
		// event as active, which must not cordon the node again.
		up := time.Since(r.RebootAfter) / 2
		if err := os.WriteFile(uptime, fmt.Appendf(nil, "%.3f 0.10\n", up.Seconds()), 0o600); err != nil {
			t.Fatal(err)
		}
		w.start(t, "TAINT_NODE", "true", "UPTIME_FROM_FILE", uptime, "IMDS_POLL_INTERVAL", "100ms")
		err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
			_, n := w.record(t)
			return !n.Spec.Unschedulable, nil
		})
		if err != nil {
			t.Fatal("node still cordoned after its reboot")
		}
		_, n := w.record(t)
		for _, tn := range n.Spec.Taints {
			if tn.Key == nodes.TaintScheduledMaintenance {
				t.Errorf("scheduled-maintenance taint left: %+v", tn)
			}
		}
		if _, ok := n.Annotations[nodes.AnnotationCordonedBy]; ok {
			t.Error("cordon marker left")
		}
		if _, ok := n.Labels[nodes.LabelUncordonAfterReboot]; ok {
			t.Error("uncordon-after-reboot label left")
		}
		w.awaitPolls(t, imds.PathScheduled, 2) // polls of the still-active event
		if r, n := w.record(t); n.Spec.Unschedulable || !r.AllReleased() {
			t.Errorf("after the reboot: unschedulable %v, record %+v", n.Spec.Unschedulable, r)
		}
	})

	t.Run("canceled scheduled event: Lifeboat's cordon is undone once, an admin's is kept", func(t *testing.T) {
		t.Parallel() // each on a node of its own
		active := []string{"events", "--code", "system-maintenance", "--state", "active", "--not-before", inTwoMinutes()}
		w := newWorld(t, c, active)
		w.start(t, "CORDON_ONLY", "true", "TAINT_NODE", "true", "IMDS_POLL_INTERVAL", "100ms")
		w.waitPhase(t, record.PhaseCordoned, 30*time.Second)
		canceled := sandboxtest.IMDS(t, sandbox.IMDSOptions{InstanceID: w.instance, Args: []string{"events", "--code", "system-maintenance", "--state", "canceled", "--not-before", inTwoMinutes()}})
		if err := w.proxy.SetTarget(canceled.URL); err != nil {
			t.Fatal(err)
		}
		err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			r, n := w.record(t)
			return !n.Spec.Unschedulable && len(r.Released) == 1, nil
		})
		if err != nil {
			t.Fatalf("node not released after the event was canceled")
		}
		_, n := w.record(t)
		if len(n.Spec.Taints) != 0 {
			t.Errorf("taints left: %v", n.Spec.Taints)
		}
		// An administrator cordons the node now; the canceled event, still reported on
		// every poll, must not undo that.
		if _, err := nodes.NewWriter(w.c.Client).Apply(context.Background(), w.node, nil, "admin cordon", func(n *corev1.Node) { n.Spec.Unschedulable = true }); err != nil {
			t.Fatal(err)
		}
		w.awaitPolls(t, imds.PathScheduled, 2) // each one says canceled
		if _, n := w.record(t); !n.Spec.Unschedulable {
			t.Error("an administrator's cordon was undone")
		}
	})

	t.Run("rebalance recommendation with monitoring only: cordoned, not drained", func(t *testing.T) {
		t.Parallel()             // each on a node of its own
		w := newWorld(t, c, nil) // the root command serves a rebalance recommendation
		w.addPods(t, replicaSetPods("shop", "queue", 2)...)
		w.start(t, "ENABLE_REBALANCE_MONITORING", "true", "ENABLE_SPOT_INTERRUPTION_DRAINING", "false", "ENABLE_SCHEDULED_EVENT_DRAINING", "false", "TAINT_NODE", "true")
		r := w.waitPhase(t, record.PhaseCordoned, 30*time.Second)
		w.awaitPolls(t, imds.PathRebalance, 2) // each one recommends again
		if r, _ = w.record(t); r.Phase != record.PhaseCordoned || r.Notices[0] != "rebalance-"+w.instance {
			t.Errorf("record %+v, want cordoned for the rebalance notice", r)
		}
		if left := podsLeft(t, w); len(left) != 2 {
			t.Errorf("pods left %v: monitoring must not drain", left)
		}
	})

	t.Run("NODE_NAME of another instance is refused", func(t *testing.T) {
		t.Parallel() // each on a node of its own
		w := newWorld(t, c, []string{"spot", "-a", "terminate", "-t", inTwoMinutes()})
		other := newWorld(t, c, nil)
		w.node = other.node // wrong wiring: this instance's metadata, another node's name
		cfg := sandboxtest.Config(t, config.ModeAgent, "NODE_NAME", w.node, "INSTANCE_METADATA_URL", w.proxy.URL)
		m := metrics.New()
		a := agent.New(agent.Options{Config: cfg, Client: w.client, IMDS: imds.NewClient(w.proxy.URL, 3, false), Logger: slog.New(slog.NewTextHandler(w.logs, nil)), Metrics: m})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := a.Run(ctx); !errors.Is(err, agent.ErrWrongNode) {
			t.Fatalf("Run: %v, want ErrWrongNode", err)
		}
		if got := m.Value("lifeboat_instance_claims_refused_total", "check", "instance_metadata"); got != 1 {
			t.Errorf("lifeboat_instance_claims_refused_total{check=instance_metadata} = %v, want 1", got)
		}
		if _, n := other.record(t); n.Spec.Unschedulable {
			t.Error("the other node was cordoned")
		}
	})
}
