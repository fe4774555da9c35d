// SPDX-License-Identifier: Apache-2.0

package controller_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/cloud/controlleronly"
	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/controller"
	"lifeboat.dev/lifeboat/internal/episode"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// writeCounter counts the requests of a client that are not reads (GET, LIST, WATCH).
type writeCounter struct{ writes atomic.Int64 }

func (w *writeCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(r *http.Request) (*http.Response, error) {
		if r.Method != http.MethodGet {
			w.writes.Add(1)
		}
		return rt.RoundTrip(r)
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// replica is one controller replica run with leader election, in this process.
type replica struct {
	ctl    *controller.Controller
	writes *writeCounter // its requests but the Lease's
	stop   context.CancelFunc
	done   chan error
	logs   *sandboxtest.LogBuffer
}

// startReplica starts a replica named name (its POD_NAME) with the settings; leaseWrap, when
// set, wraps the transport of its Lease client.
func (w *intakeWorld) startReplica(t *testing.T, ctx context.Context, name string, leaseWrap func(http.RoundTripper) http.RoundTripper, settings ...string) *replica {
	t.Helper()
	cfg := sandboxtest.Config(t, config.ModeController, append([]string{"ENABLE_SQS_TERMINATION_DRAINING", "true", "QUEUE_URL", w.queueURL,
		"AWS_REGION", "us-east-1", "AWS_ENDPOINT", w.fake.URL(), "CLUSTER_NAME", "sandbox", "POD_NAME", name, "NAMESPACE", "kube-system"}, settings...)...)
	rc, err := w.c.UserConfig("lifeboat-"+name, "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	r := &replica{writes: &writeCounter{}, done: make(chan error, 1), logs: &sandboxtest.LogBuffer{}}
	leaseConfig := rest.CopyConfig(rc)
	if leaseWrap != nil {
		leaseConfig.Wrap(leaseWrap)
	}
	lease := kubernetes.NewForConfigOrDie(leaseConfig)
	rc.Wrap(r.writes.wrap)
	awsCfg := sandboxtest.AWSConfig(w.fake.URL())
	r.ctl = controller.New(controller.Options{Config: cfg, Client: kubernetes.NewForConfigOrDie(rc), LeaseClient: lease, Queue: awssqs.NewFromConfig(awsCfg),
		EC2: controlleronly.NewAWSEC2(awsCfg), AutoScaling: cloud.NewAWSAutoScaling(awsCfg), Logger: slog.New(slog.NewTextHandler(r.logs, nil)),
		Metrics: metrics.New(), Handler: episode.Options{}})
	runCtx, cancel := context.WithCancel(ctx)
	r.stop = cancel
	go func() { r.done <- r.ctl.RunWithLeaderElection(runCtx) }()
	t.Cleanup(func() {
		cancel()
		<-r.done
		if t.Failed() {
			t.Logf("%s log:\n%s", name, r.logs)
		}
	})
	return r
}

// podEvictions follows the pods of a node and keeps when each was first seen terminating
// or gone: when its eviction was accepted.
type podEvictions struct {
	mu sync.Mutex
	at map[string]time.Time
}

func watchEvictions(t *testing.T, ctx context.Context, client kubernetes.Interface, node string) *podEvictions {
	t.Helper()
	pw, err := client.CoreV1().Pods("").Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String()})
	if err != nil {
		t.Fatal(err)
	}
	e := &podEvictions{at: map[string]time.Time{}}
	go func() {
		defer pw.Stop()
		for ev := range pw.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || (ev.Type != watch.Deleted && p.DeletionTimestamp == nil) {
				continue
			}
			e.mu.Lock()
			if _, seen := e.at[p.Name]; !seen {
				e.at[p.Name] = time.Now()
			}
			e.mu.Unlock()
		}
	}()
	return e
}

func (e *podEvictions) of(name string) (time.Time, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	at, ok := e.at[name]
	return at, ok
}

// Two replicas: the leader drains the node its own pod runs on. Its own pod is evicted
// last there, after every other pod's eviction was accepted; its eviction stops the leader
// (as the kubelet's SIGTERM does), which releases the Lease after its work has stopped. The
// standby, its caches synced all along without a write, takes over within a retry period and
// finishes the episode: exactly one hand-over, and nothing written by the old leader after
// it returned.
func TestStandbyTakesOverAfterOwnPodEvictedLast(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	w := newIntakeWorld(t, ctx, 1)
	node := w.nodes[0]
	w.addPods(t, ctx, node, "web", 3)
	own := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "lifeboat-a"},
		Spec: corev1.PodSpec{NodeName: node.Name, Containers: []corev1.Container{{Name: "c", Image: "img"}}}}
	if _, err := w.c.Client.CoreV1().Pods("kube-system").Create(ctx, own, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	evictions := watchEvictions(t, ctx, w.c.Client, node.Name)
	lease := func() (holder string, transitions int32) {
		l, err := w.c.Client.CoordinationV1().Leases("kube-system").Get(ctx, config.DefaultLeaseName, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return "", 0
		}
		return *l.Spec.HolderIdentity, *l.Spec.LeaseTransitions
	}
	waitFor := func(what string, timeout time.Duration, cond func() bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, timeout, true, func(context.Context) (bool, error) { return cond(), nil }); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}

	a := w.startReplica(t, ctx, "lifeboat-a", nil)
	waitFor("lifeboat-a leads", time.Minute, func() bool { h, _ := lease(); return h == "lifeboat-a" })
	b := w.startReplica(t, ctx, "lifeboat-b", nil)
	waitFor("the standby is ready (caches synced)", time.Minute, func() bool { return b.ctl.Healthy() == nil })
	_, transitions := lease()

	w.send(t, ctx, spotMessage(episode.InstanceIDOf(node)))
	waitFor("the leader's own pod is evicted", time.Minute, func() bool { _, ok := evictions.of("lifeboat-a"); return ok })
	bWrites := b.writes.writes.Load() // the standby's, through the drain
	a.stop()                          // the kubelet's SIGTERM
	var returned time.Time
	select {
	case err := <-a.done:
		returned = time.Now()
		a.done <- err // for the cleanup
		if err != nil {
			t.Errorf("the old leader returned %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the old leader did not stop within 10 s of its SIGTERM")
	}
	aWrites := a.writes.writes.Load()
	waitFor("lifeboat-b takes the released Lease", 5*time.Second, func() bool { h, _ := lease(); return h == "lifeboat-b" })
	took := time.Since(returned)
	w.waitDrained(t, ctx, node, w.waitRecordedNotice(t, ctx, node))

	ownAt, _ := evictions.of("lifeboat-a")
	for _, name := range []string{"web-0-" + node.Name, "web-1-" + node.Name, "web-2-" + node.Name, "app-" + node.Name} {
		at, ok := evictions.of(name)
		if !ok || !at.Before(ownAt) {
			t.Errorf("%s: eviction accepted at %v (seen %v), the leader's own pod at %v; want every other pod first", name, at, ok, ownAt)
		}
	}
	if h, tr := lease(); h != "lifeboat-b" || tr != transitions+1 {
		t.Errorf("Lease held by %q after %d transitions (%d before the drain); want lifeboat-b after exactly one hand-over", h, tr, transitions)
	}
	if bWrites != 0 {
		t.Errorf("the standby made %d writes before it led; want none", bWrites)
	}
	if after := a.writes.writes.Load(); after != aWrites {
		t.Errorf("the old leader made %d writes after it returned", after-aWrites)
	}
	t.Logf("own pod evicted last; the standby led %s after the old leader returned", took.Round(time.Millisecond))
}

// A leader whose Lease renewals stop getting through (its API server lost, for its Lease
// client alone here) stops its work at the renew deadline, before the Lease can run out for
// a standby, and writes nothing after: client-go's elector alone would cancel the work only
// after its own give-up and a release attempt, up to a renew deadline later still.
func TestUnrenewedLeaseStopsWorkBeforeItRunsOut(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := newIntakeWorld(t, ctx, 1)
	var cut atomic.Bool
	cutter := func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(r *http.Request) (*http.Response, error) {
			if cut.Load() {
				return nil, errors.New("cut off from the API server")
			}
			return rt.RoundTrip(r)
		})
	}
	a := w.startReplica(t, ctx, "lifeboat-a", cutter, "LEADER_ELECTION_LEASE_DURATION", "4s", "LEADER_ELECTION_RENEW_DEADLINE", "2s",
		"LEADER_ELECTION_RETRY_PERIOD", "500ms")
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) { return a.ctl.Healthy() == nil && a.ctl.Leading(), nil })
	if err != nil {
		t.Fatal("lifeboat-a never led and consumed the queue")
	}
	cut.Store(true)
	cutAt := time.Now()
	select {
	case err := <-a.done:
		a.done <- err
		took := time.Since(cutAt)
		l, lerr := w.c.Client.CoordinationV1().Leases("kube-system").Get(ctx, config.DefaultLeaseName, metav1.GetOptions{})
		if lerr != nil {
			t.Fatal(lerr)
		}
		runsOut := l.Spec.RenewTime.Add(4 * time.Second)
		t.Logf("returned %v, %s after the cut; the Lease runs out %s after that", err, took.Round(time.Millisecond), runsOut.Sub(time.Now()).Round(time.Millisecond))
		if !time.Now().Before(runsOut) {
			t.Errorf("the work stopped at %v, after the Lease ran out at %v", time.Now(), runsOut)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the leader still works 10 s after its Lease renewals stopped getting through (lease 4 s, renew deadline 2 s)")
	}
	writes := a.writes.writes.Load()
	time.Sleep(time.Second)
	if after := a.writes.writes.Load(); after != writes {
		t.Errorf("%d writes after the work stopped", after-writes)
	}
	if !strings.Contains(a.logs.String(), "the Lease went unrenewed") {
		t.Errorf("no log line says why the work stopped:\n%s", a.logs)
	}
}
