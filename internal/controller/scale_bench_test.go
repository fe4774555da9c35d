// SPDX-License-Identifier: Apache-2.0

package controller_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/cloud/controlleronly"
	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/controller"
	"lifeboat.dev/lifeboat/internal/daemon"
	"lifeboat.dev/lifeboat/internal/episode"
	"lifeboat.dev/lifeboat/internal/kube/pacing"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/record"
	"lifeboat.dev/lifeboat/internal/version"
	"lifeboat.dev/lifeboat/test/sandbox"
	"lifeboat.dev/lifeboat/test/sandbox/fakeaws"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// BenchmarkAZReclaim is an Availability Zone reclaimed at once: LIFEBOAT_SCALE_NODES kwok
// nodes (default 2000), of which LIFEBOAT_SCALE_NOTICES (default 1000, zone us-east-1a; the
// others are in us-east-1b and c) get a Spot interruption warning, all put on the queue at
// the same moment. Each notice node runs LIFEBOAT_SCALE_PODS ReplicaSet pods (default 20: one
// of each of that many ReplicaSets, spread one per node) and every node one DaemonSet pod,
// which Lifeboat leaves in place (IGNORE_DAEMON_SETS). Pods are created bound to their nodes
// (no scheduler) and no controller-manager runs: nothing replaces an evicted pod, so this
// measures the evictions alone, not a cluster rescheduling 20,000 pods. Without the
// controller-manager there is no node lifecycle controller either, so no node turns NotReady
// mid-run. kwok, as the sandbox runs it, keeps no node Leases and rewrites a node's status
// only every 10 to 20 minutes: the API server is spared the heartbeats 2000 kubelets would
// send (a Lease renewal each every 10 s, 200 writes/s).
//
// In the same run, before Lifeboat starts and with kwok running, it calibrates the API server:
// cordon-style merge patches of the nodes outside the zone (then reverted), and evictions of
// pods kept for it on those nodes (LIFEBOAT_SCALE_CALIBRATION_PODS, default 32000: enough for
// every step, and the long step after them, to last its full time at up to 600/s at 64 in
// flight; a step cut short measures only its first seconds, before the deletions its
// evictions cause have caught up), at 4, 8,
// 16, 32 and 64 concurrent requests without a client rate limit, LIFEBOAT_SCALE_CALIBRATION
// patches a step (default 600) and evictions for LIFEBOAT_SCALE_CALIBRATION_SECONDS a step
// (default 10: long enough to pay for the deletions they cause, see azCalibration), until 429s appear or
// the rate stops rising (two steps in a row less than 10 % above the best before them: more
// requests in flight only wait longer, their latency grows with their number). The best rate is what the
// server gives one client of that identity. A long eviction step follows at the best step's
// concurrency (LIFEBOAT_SCALE_CALIBRATION_LONG_SECONDS, default 30; 0: none), bearing the
// deletions its own evictions cause as the burst does (see azCalibration), and runs again once
// the burst is over, on new pods, with nothing of the burst left running (the closing step):
// the goal's yardstick is the two steps' mean. (A rule on latency alone, the p99 doubled from
// the first step, stopped on a noisy first step before the throughput peaked.)
//
// Lifeboat then runs in this process with default settings (WORKERS 10, KUBE_API_QPS 100,
// KUBE_API_BURST 200), its clients built as cmd/lifeboat builds them (main, cordon, lease,
// events, each counted by kube.Instrumented). It and the calibration authenticate as service
// accounts, so API Priority and Fairness classifies them as in a cluster (the built-in
// service-accounts FlowSchema, priority level workload-low); the set-up runs as
// system:masters. The report: set-up and calibration times; from the notices' sending, the
// time until every notice node is cordoned, until every eviction is accepted (each pod
// terminating or gone), until the pods are gone, until every node's record says drained;
// Lifeboat's Kubernetes requests by verb and resource with their 429s, its AWS and SQS calls;
// its peak heap and resident memory and the CPU time of this process (harness included) and
// of the sandbox's processes; its eviction and cordon rates against the calibrated ones, and
// the sustained comparison (evictions counted until their pods were gone, on both sides), and
// the API server's CPU per moved pod against the long step's (its cost, not its pace);
// whether the evictions fit in the two-minute Spot warning; the Events (on nodes and on every
// moved pod) and the nodes' condition writes, all in the background lane, counted once they
// settle after the burst (LIFEBOAT_SCALE_EVENTS=false leaves both out, for the difference).
// Numbers are printed, never asserted.
//
//	make bench-scale
//	LIFEBOAT_SCALE_NODES=100 LIFEBOAT_SCALE_NOTICES=50 LIFEBOAT_SCALE_PODS=5 LIFEBOAT_SCALE_CALIBRATION=100 \
//	LIFEBOAT_SCALE_CALIBRATION_PODS=1500 LIFEBOAT_SCALE_CALIBRATION_SECONDS=2 LIFEBOAT_SCALE_CALIBRATION_LONG_SECONDS=5 make bench-scale
//
// Two runs, each in a world of its own (LIFEBOAT_SCALE_KILL: both, the default; off; only):
// no-kill, and leader-killed; in each a second replica waits as a warm standby
// (LIFEBOAT_SCALE_STANDBY=killed: in the killed run only), and in the second the leader
// is killed (its API connection cut, its work cancelled, its Lease not released) once
// LIFEBOAT_SCALE_KILL_AT percent of the evictions were accepted (default 25). The killed run
// reports the stall, the longest pause from the kill on before the next accepted eviction,
// beside the lease duration, and when the last eviction was accepted beside the run without
// a kill; and what the standby cost while it waited (live heap, requests).
func BenchmarkAZReclaim(b *testing.B) {
	sc := azScaleFromEnv(b)
	for _, run := range azRuns(b, os.Getenv("LIFEBOAT_SCALE_KILL")) {
		b.Run(run, func(b *testing.B) {
			for range b.N {
				azReclaim(b, sc, run == azRunKilled)
			}
		})
	}
}

// azScale is the benchmark's size (see BenchmarkAZReclaim).
type azScale struct {
	nodes, notices, pods int
	calibration          int           // node patches per calibration step
	evictionStep         time.Duration // how long each eviction step of the calibration lasts
	longStep             time.Duration // how long the calibration's long eviction step lasts (0: none)
	calibrationPods      int           // pods kept for the eviction steps
	killAt               int           // percent of the evictions accepted when the killed run kills the leader
	// standbyAlways has a warm standby wait in the run without a kill too, so that the two
	// runs differ by the kill alone: on the benchmark's shared cores the standby's caches cost
	// CPU that a standby on a node of its own would not take from the API server.
	standbyAlways bool
	// kwokNice is kwok's niceness (sandbox.ClusterOptions.KwokNice): kwok stands in for every
	// kubelet, which in a cluster run on machines of their own, and on the shared cores its
	// one watch of every pod fell behind the burst: the API server closed it again and again,
	// each close a relist of every scheduled pod, and that decided the run's pace.
	kwokNice int
	// pacingStart, when above 0, is the request budget's start, and so the least the queue at
	// the server lowers it to (LIFEBOAT_SCALE_PACING_START; 0: the binary's, pacing.DefaultStart):
	// an experiment on the bound, not a setting users have.
	pacingStart int
	// serverProfile, when set, is the prefix of the API server's CPU profiles over the
	// calibration's long step and over the burst (LIFEBOAT_SCALE_SERVER_PROFILE, azServerProfiler).
	serverProfile string
}

// pacing is the budget's options as the binary builds them, with the start the run asks for.
func (sc azScale) pacing(cfg *config.Config, m *metrics.Metrics) pacing.Options {
	o := daemon.Pacing(cfg, m)
	o.Start = sc.pacingStart
	return o
}

func azScaleFromEnv(b *testing.B) azScale {
	get := func(name string, def, minimum int) int {
		v := os.Getenv(name)
		if v == "" {
			return def
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < minimum {
			b.Fatalf("%s=%q: want a whole number, at least %d", name, v, minimum)
		}
		return n
	}
	sc := azScale{
		nodes:           get("LIFEBOAT_SCALE_NODES", 2000, 2),
		notices:         get("LIFEBOAT_SCALE_NOTICES", 1000, 1),
		pods:            get("LIFEBOAT_SCALE_PODS", 20, 1),
		calibration:     get("LIFEBOAT_SCALE_CALIBRATION", 600, 20),
		evictionStep:    time.Duration(get("LIFEBOAT_SCALE_CALIBRATION_SECONDS", 10, 1)) * time.Second,
		longStep:        time.Duration(get("LIFEBOAT_SCALE_CALIBRATION_LONG_SECONDS", 30, 0)) * time.Second,
		calibrationPods: get("LIFEBOAT_SCALE_CALIBRATION_PODS", 32000, 100),
		killAt:          get("LIFEBOAT_SCALE_KILL_AT", 25, 1),
		kwokNice:        get("LIFEBOAT_SCALE_KWOK_NICE", -10, -20),
		pacingStart:     get("LIFEBOAT_SCALE_PACING_START", 0, 0),
		serverProfile:   os.Getenv("LIFEBOAT_SCALE_SERVER_PROFILE"),
	}
	if sc.kwokNice > 0 {
		b.Fatalf("LIFEBOAT_SCALE_KWOK_NICE=%d: want 0 (the usual priority) or below", sc.kwokNice)
	}
	switch v := os.Getenv("LIFEBOAT_SCALE_STANDBY"); v {
	case "", "both":
		sc.standbyAlways = true
	case "killed":
	default:
		b.Fatalf("LIFEBOAT_SCALE_STANDBY=%q: want both or killed", v)
	}
	if sc.notices >= sc.nodes {
		b.Fatalf("LIFEBOAT_SCALE_NOTICES (%d) must be less than LIFEBOAT_SCALE_NODES (%d): the other nodes carry the calibration", sc.notices, sc.nodes)
	}
	return sc
}

const (
	// azSetupWorkers creates the world's objects in parallel.
	azSetupWorkers = 32
	// azBurstLimit is how long the burst may take before the benchmark reports what it has.
	azBurstLimit = 20 * time.Minute
	// azSpotWarning is the time between a Spot warning and the instance's end.
	azSpotWarning = 2 * time.Minute
	// Identities: service accounts (APF's service-accounts FlowSchema), by client certificate.
	azLifeboatUser    = "system:serviceaccount:lifeboat:lifeboat-controller"
	azCalibrationUser = "system:serviceaccount:lifeboat:calibration"
)

// azCalibrationSteps are the concurrency steps of the calibration.
var azCalibrationSteps = []int{4, 8, 16, 32, 64}

// azWorld is what the set-up built.
type azWorld struct {
	notice, other []*corev1.Node
	workload      []string // namespace/name of the ReplicaSet pods on the notice nodes
	calibration   []string // names of the calibration pods, in namespace "calibration"
	calOwner      metav1.OwnerReference
}

// calibrationPod is calibration pod number k, on the nodes outside the zone in turn.
func (w *azWorld) calibrationPod(k int) *corev1.Pod {
	labels := map[string]string{"app": w.calOwner.Name}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "calibration", Name: "cal-" + strconv.Itoa(k), Labels: labels, OwnerReferences: []metav1.OwnerReference{w.calOwner}},
		Spec: corev1.PodSpec{NodeName: w.other[k%len(w.other)].Name, Containers: []corev1.Container{{Name: "c", Image: "img"}}}}
}

func azReclaim(b *testing.B, sc azScale, kill bool) {
	b.StopTimer()
	ctx, cancel := context.WithTimeout(context.Background(), 55*time.Minute)
	defer cancel()
	var report strings.Builder
	say := func(format string, args ...any) { fmt.Fprintf(&report, format+"\n", args...) }
	defer func() { b.Logf("AZ reclaim report\n%s", report.String()) }()

	setupStart := time.Now()
	// The API server logs each watch it closes as too slow, naming the watch (azClosedWatches).
	c := sandboxtest.Cluster(b, sandbox.ClusterOptions{
		APIServerArgs: append([]string{"--vmodule=cache_watcher=1"}, azServerProfileArgs(sc.serverProfile)...),
		KwokNice:      sc.kwokNice,
	})
	serverProfilePrefix := sc.serverProfile
	if kill && serverProfilePrefix != "" {
		serverProfilePrefix += ".killed" // the run without a kill keeps its own
	}
	serverProfiles := azNewServerProfiler(serverProfilePrefix, c)
	defer func() {
		for _, err := range serverProfiles.wait() {
			b.Error(err)
		}
	}()
	q := sandboxtest.SQS(b, sandbox.SQSOptions{Queues: []string{"lifeboat"}})
	fake := sandboxtest.FakeAWS(b, q.Endpoint)
	w, err := azBuildWorld(ctx, c, fake, sc)
	if err != nil {
		b.Fatalf("set-up: %v", err)
	}
	setupTook := time.Since(setupStart)
	say("world: %d nodes (%d in the reclaimed zone), %d ReplicaSet pods on the zone's nodes (%d each), %d DaemonSet pods, %d calibration pods; "+
		"no scheduler, no controller-manager: evicted pods are not replaced", sc.nodes, sc.notices, len(w.workload), sc.pods, sc.nodes, len(w.calibration))
	kwokPriority := "the usual priority"
	if c.KwokNice != 0 {
		kwokPriority = fmt.Sprintf("niceness %d, ahead of the control plane (it stands in for kubelets on machines of their own)", c.KwokNice)
	} else if sc.kwokNice != 0 {
		kwokPriority += fmt.Sprintf(" (LIFEBOAT_SCALE_KWOK_NICE=%d needs root)", sc.kwokNice)
	}
	say("kwok: %s", kwokPriority)
	say("set-up: %s (sandbox, nodes, objects created by %d goroutines, kwok marking every pod Running)", setupTook.Round(100*time.Millisecond), azSetupWorkers)

	// Both identities are service accounts to API Priority and Fairness, cluster-admin to RBAC.
	for _, user := range []string{azLifeboatUser, azCalibrationUser} {
		name := strings.ReplaceAll(user, ":", "-")
		binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
		if _, err := c.Client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	saGroups := []string{"system:serviceaccounts", "system:serviceaccounts:lifeboat"}

	// What the cluster shows, from two watches (the harness keeps no copies of the objects).
	// They run from before the calibration until after its closing step, so that the
	// yardstick's evictions bear the harness's watch of every pod as Lifeboat's do.
	progress := newAZProgress(w)
	meta, err := metadata.NewForConfig(c.AdminConfig)
	if err != nil {
		b.Fatal(err)
	}
	watchCtx, stopWatching := context.WithCancel(ctx)
	defer stopWatching()
	if err := progress.watch(watchCtx, c.Client, meta); err != nil {
		b.Fatal(err)
	}

	calStart := time.Now()
	apfBefore := azAPF(ctx, c.Client)
	cal, err := azCalibrate(ctx, c, w, sc, saGroups, serverProfiles)
	if err != nil {
		b.Fatalf("calibration: %v", err)
	}
	calTook := time.Since(calStart)
	apfCal := azAPF(ctx, c.Client)
	say("calibration: %s, as %s (unlimited client rate, one connection), kwok running; API Priority and Fairness rejections meanwhile: %s",
		calTook.Round(100*time.Millisecond), azCalibrationUser, azFormat(azDiff(apfCal.rejected, apfBefore.rejected)))
	settled := func(s azStep) string {
		if s.settled == 0 {
			return ""
		}
		out := fmt.Sprintf("; waiting for the budgets' watch cache %s; pods gone after %s = %.0f/s", s.cacheWait, s.settled.Round(10*time.Millisecond), float64(s.requests)/s.settled.Seconds())
		if s.sandboxCPU != nil {
			out += fmt.Sprintf("; the API server's CPU until then %.1f s", s.sandboxCPU[azServerProcess])
		}
		if s.ranOut {
			out += " (ran out of calibration pods: LIFEBOAT_SCALE_CALIBRATION_PODS)"
		}
		return out
	}
	for _, kind := range []struct {
		name  string
		steps []azStep
		best  float64
	}{{"node patches", cal.patches, cal.bestPatches}, {"evictions", cal.evictions, cal.bestEvictions}} {
		say("  %s: best %.0f/s", kind.name, kind.best)
		for _, s := range kind.steps {
			say("    %2d in flight: %4d requests in %6s = %6.0f/s, p50 %s, p99 %s, 429s %d, other errors %d%s", s.workers, s.requests,
				s.took.Round(time.Millisecond), s.rate(), s.p50.Round(100*time.Microsecond), s.p99.Round(100*time.Microsecond), s.throttled, s.errors, settled(s))
		}
		if last := kind.steps[len(kind.steps)-1]; len(kind.steps) < len(azCalibrationSteps) {
			why := "the rate stopped rising"
			switch {
			case last.throttled > 0:
				why = "429s"
			case last.ranOut:
				why = "no calibration pods left"
			}
			say("    stopped at %d in flight: %s", last.workers, why)
		}
	}
	if s := cal.long; s != nil {
		say("  evictions, long step: %d in flight for %s: %d requests = %.0f/s over the step, %.0f/s between the 10th and 90th percentile of its answers (as Lifeboat's rate is counted), p50 %s, p99 %s, 429s %d, other errors %d%s",
			s.workers, s.took.Round(time.Millisecond), s.requests, s.rate(), cal.longEvictions, s.p50.Round(100*time.Microsecond), s.p99.Round(100*time.Microsecond), s.throttled, s.errors, settled(*s))
	}

	// Lifeboat, built as cmd/lifeboat builds it.
	awsCfg := benchAWSConfig(fake.URL())
	queueURL := q.QueueURLs["lifeboat"]
	visible := azVisible(b)
	cfg := benchConfig(b, queueURL, fake.URL(), append(azLeaseSettings(b), "EMIT_KUBERNETES_EVENTS", fmt.Sprint(visible), "NODE_CONDITION", fmt.Sprint(visible))...)
	m := metrics.New()
	base, err := c.UserConfig(azLifeboatUser, saGroups...)
	if err != nil {
		b.Fatal(err)
	}
	base.UserAgent = version.UserAgent()
	killSwitch := &azKillSwitch{}
	if kill {
		base.Wrap(killSwitch.wrap)
	}
	clients, err := daemon.KubeClientsPaced(base, sc.pacing(cfg, m), m) // as the binary builds them
	if err != nil {
		b.Fatal(err)
	}
	if sc.pacingStart > 0 {
		say("request budget: start %d, and so the least a queue at the server lowers it to (LIFEBOAT_SCALE_PACING_START; the binary's is %d)", sc.pacingStart, pacing.DefaultStart)
	}
	logs := &azLogCounter{counts: map[string]int{}, samples: map[string]string{}}
	ctl := controller.New(controller.Options{Config: cfg, Client: clients.Main, LeaseClient: clients.Lease, Queue: awssqs.NewFromConfig(awsCfg),
		EC2: controlleronly.NewAWSEC2(awsCfg), AutoScaling: cloud.NewAWSAutoScaling(awsCfg), Logger: slog.New(logs), Metrics: m,
		Handler: azHandler(b, clients, cfg, m)})

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- ctl.RunWithLeaderElection(runCtx) }()
	stopped := false
	stopController := func() {
		if !stopped {
			stopped = true
			stop()
			<-done
		}
	}
	defer stopController()
	leadStart := time.Now()
	_ = wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
		return m.Value("lifeboat_leader") >= 1 && ctl.Healthy() == nil, nil
	})
	leading := time.Since(leadStart)
	// A controller meets a burst long after it started: its first list of every pod is over.
	_ = wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) { return controller.PodsSynced(ctl), nil })
	if ctx.Err() != nil {
		b.Fatal("the controller did not lead and consume the queue")
	}
	say("controller: leading and consuming after %s (node informer synced on %d nodes), the drains' pod informer synced after %s",
		leading.Round(10*time.Millisecond), sc.nodes, time.Since(leadStart).Round(10*time.Millisecond))
	var standby *azStandby
	stopStandby := func() {}
	if kill || sc.standbyAlways {
		standbyBase, err := c.UserConfig(azLifeboatUser, saGroups...)
		if err != nil {
			b.Fatal(err)
		}
		standbyBase.UserAgent = version.UserAgent()
		standbyCtx, cancelStandby := context.WithCancel(ctx)
		standby = azStartStandby(standbyCtx, b, sc, standbyBase, cfg, queueURL, fake)
		stopStandby = sync.OnceFunc(func() { cancelStandby(); <-standby.done })
		defer stopStandby()
	}

	// The burst.
	bodies := make([]string, len(w.notice))
	for i, n := range w.notice {
		bodies[i] = spotMessage(episode.InstanceIDOf(n))
	}
	// The API server's CPU while nothing is asked of it (its upkeep, kwok's and the informers'
	// watches), taken off both sides of the CPU per moved pod: a burst and a step measured
	// until their last pod went include stretches of little else.
	idleFrom := azChildCPU()
	time.Sleep(azIdleSample)
	serverIdle := (azChildCPU()[azServerProcess] - idleFrom[azServerProcess]) / azIdleSample.Seconds()
	before := azSnapshot(m, fake)
	var standbyBefore azCounts
	if standby != nil {
		standbyBefore = azSnapshot(standby.metrics, fake)
	}
	latencyBefore := azClientLatency(m)
	// The soft memory limit cmd/lifeboat sets in the chart's container (90 % of its limit).
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(azSoftMemoryLimit))
	runtime.GC()
	debug.FreeOSMemory()
	hwmReset := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil // VmHWM from here
	baseHeap, _ := azHeapAndStacks()
	cpuBefore, childBefore := azProcessCPU(), azChildCPU()
	var peakHeap, peakStacks, peakLive, peakRSS uint64
	peakGoroutines := 0
	// The budget's bound, requests in flight and queue, every 5 s from the sending.
	var budgetLine, sentLine []string
	nextBudget := time.Now()
	// The leading replica's budget: the standby's after a kill. The requests are both
	// replicas' (the standby sends only Lease reads until it leads).
	leadingBudget := clients.Budget
	requestsSent := func(labels ...string) float64 {
		v := m.Value("lifeboat_kube_requests_total", labels...)
		if standby != nil {
			v += standby.metrics.Value("lifeboat_kube_requests_total", labels...)
		}
		return v
	}
	lastEvicted := requestsSent("resource", "pods/eviction", "code", "201")
	lastOther := requestsSent() - lastEvicted
	sampleBudget := func() {
		if time.Now().Before(nextBudget) {
			return
		}
		nextBudget = nextBudget.Add(5 * time.Second)
		inFlight, waiting := 0, 0
		for _, l := range pacing.Lanes {
			inFlight += leadingBudget.InFlight(l)
			waiting += leadingBudget.Waiting(l)
		}
		budgetLine = append(budgetLine, fmt.Sprintf("%.0f/%d/%d", leadingBudget.Limit(), inFlight, waiting))
		// What went out in those 5 s: evictions accepted, and every other answered request.
		evicted := requestsSent("resource", "pods/eviction", "code", "201")
		all := requestsSent()
		sentLine = append(sentLine, fmt.Sprintf("%.0f/%.0f", evicted-lastEvicted, all-evicted-lastOther))
		lastEvicted, lastOther = evicted, all-evicted
	}
	live := []rtmetrics.Sample{{Name: "/gc/heap/live:bytes"}}
	// LIFEBOAT_SCALE_HEAP_PROFILE names a file for the heap profile at the peak live heap
	// (rewritten at most every 5 s while the peak grows): what the memory is.
	heapProfile, lastProfile, lastGoroutines := os.Getenv("LIFEBOAT_SCALE_HEAP_PROFILE"), time.Time{}, time.Time{}
	sample := func() {
		heap, stacks := azHeapAndStacks()
		peakHeap, peakStacks = max(peakHeap, heap), max(peakStacks, stacks)
		rtmetrics.Read(live)
		if live[0].Value.Kind() == rtmetrics.KindUint64 {
			if now := live[0].Value.Uint64(); now > peakLive && heapProfile != "" && time.Since(lastProfile) >= 5*time.Second {
				if err := azWriteProfile("heap", heapProfile, 0); err != nil {
					b.Errorf("heap profile: %v", err)
				}
				lastProfile = time.Now()
			}
			peakLive = max(peakLive, live[0].Value.Uint64())
		}
		rss, _ := azProcStatus("VmRSS")
		peakRSS = max(peakRSS, rss)
		if n := runtime.NumGoroutine(); n > peakGoroutines && heapProfile != "" && time.Since(lastGoroutines) >= 5*time.Second {
			// Beside the heap profile, the goroutines at their peak: whose stacks they are.
			if err := azWriteProfile("goroutine", heapProfile+".goroutines", 1); err != nil {
				b.Errorf("goroutine profile: %v", err)
			}
			lastGoroutines = time.Now()
		}
		peakGoroutines = max(peakGoroutines, runtime.NumGoroutine())
	}

	// LIFEBOAT_SCALE_CPU_PROFILE names a file for a CPU profile of this process over
	// azCPUProfileFor of the burst: from the sending, or from LIFEBOAT_SCALE_CPU_PROFILE_FROM.
	cpuProfile := azNewCPUProfile(b)
	defer cpuProfile.stop()

	b.StartTimer()
	start := time.Now()
	sendQueue := awssqs.NewFromConfig(awsCfg)
	if err := azInParallel(ctx, (len(bodies)+99)/100, 8, func(ctx context.Context, i int) error {
		return sendBatches(ctx, sendQueue, queueURL, bodies[i*100:min((i+1)*100, len(bodies))])
	}); err != nil {
		b.Fatal(err)
	}
	sent := time.Since(start)
	// Leadership lost would end RunWithLeaderElection; the metrics are not scraped meanwhile
	// (a scrape counts the episodes of every Node).
	leaderLost := false
	limit := time.After(azBurstLimit)
	timedOut := false
	nextBudget = start
	// The API server's view once every zone node is cordoned: how long its requests took
	// there and waited in its queues during the cordons, against the whole burst's.
	var apfCordoned *azAPFState
	var latencyCordoned map[string]azMean
	var killedAt time.Time
	watching := done // the replica that leads: the standby's after a kill
	var ledAfter time.Duration
	acceptedAtKill, leaseAtKill := 0, 0.0
	standbyLed := false
	leaseWrites := func() float64 {
		return m.Value("lifeboat_kube_requests_total", "client", "lease", "verb", "update", "code", "200")
	}
	for ctx.Err() == nil && !timedOut && !leaderLost && !progress.finished() {
		sample()
		sampleBudget()
		if n := progress.acceptedCount(); kill && killedAt.IsZero() && n*100 >= sc.killAt*len(w.workload) {
			// SIGKILL: nothing more reaches the API server, no release; the work stops.
			killSwitch.killed.Store(true)
			killedAt, acceptedAtKill, leaseAtKill = time.Now(), n, leaseWrites()
			standby.killed()
			leadingBudget = standby.budget
			stop() // its RunWithLeaderElection sends to done, which nothing reads any more
			watching, stopped = standby.done, true
		}
		if !kill && standby != nil && standby.ctl.Leading() {
			standbyLed = true // a change of leader without a kill
		}
		if !killedAt.IsZero() && ledAfter == 0 && standby.ctl.Leading() {
			ledAfter = time.Since(killedAt)
			standby.takeover = &azTakeover{}
		}
		standby.sampleTakeover()
		if apfCordoned == nil && progress.allCordoned() {
			s := azAPF(ctx, c.Client)
			apfCordoned, latencyCordoned = &s, azClientLatency(m)
		}
		cpuProfile.tick(b, time.Since(start), !killedAt.IsZero())
		if cpuProfile.due(time.Since(start), !killedAt.IsZero()) {
			serverProfiles.start(ctx, "burst", 0)
		}
		select {
		case <-limit:
			timedOut = true
		case err := <-watching:
			leaderLost, stopped = true, true
			b.Errorf("the controller stopped during the burst: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	b.StopTimer()
	end := time.Now()
	sample()
	cpuUsed := azProcessCPU() - cpuBefore
	childAfter := azChildCPU()
	hwm, _ := azProcStatus("VmHWM")
	after := azSnapshot(m, fake)
	// The standby's requests as the burst ends: once the leader below is stopped and releases
	// the Lease, the standby takes it over, and those requests are not the burst's.
	var standbyAtEnd map[string]float64
	if standby != nil {
		standbyAtEnd = standby.requests()
	}
	apfAfter := azAPF(ctx, c.Client)
	// The Events and conditions still to go are the leading replica's: after a kill, the
	// standby's (the killed one's retries never reach the server).
	leadingMetrics := m
	if !killedAt.IsZero() {
		leadingMetrics = standby.metrics
	}
	settledBackground := azBackgroundSettled(ctx, leadingMetrics)
	final := azSnapshot(m, fake)
	bgBefore, bgFinal := before, final // both replicas' in the killed run
	if kill && standby != nil {
		bgBefore, bgFinal = before.plus(standbyBefore), final.plus(azSnapshot(standby.metrics, fake))
	}
	stopController()
	burst := end.Sub(start)

	// Times and rates, from the watches.
	p := progress.result(start)
	// The closing step, with no replica left running (the long step before the burst had
	// none); the harness's watches go on, as they ran through that step too.
	stopStandby()
	closeStart := time.Now()
	if err := cal.close(ctx, sc); err != nil {
		b.Errorf("the calibration's closing step: %v", err)
	}
	closeTook := time.Since(closeStart)
	stopWatching()
	say("burst: %d Spot warnings sent in %s (8 senders, 10 to a SendMessageBatch); measured for %s%s", len(bodies), sent.Round(time.Millisecond),
		burst.Round(100*time.Millisecond), map[bool]string{true: fmt.Sprintf(" (STOPPED at the %s limit, unfinished)", azBurstLimit), false: ""}[timedOut])
	show := func(d time.Duration, n, of int) string {
		if n < of {
			return fmt.Sprintf("not reached (%d of %d)", n, of)
		}
		return d.Round(10 * time.Millisecond).String()
	}
	say("  all %d zone nodes cordoned:        %s", sc.notices, show(p.cordoned, p.nCordoned, sc.notices))
	say("  all %d evictions accepted:         %s (every ReplicaSet pod on them terminating or gone)", len(w.workload), show(p.accepted, p.nAccepted, len(w.workload)))
	say("  all those pods gone:               %s", show(p.gone, p.nGone, len(w.workload)))
	say("  every node's record drained:       %s", show(p.drained, p.nDrained, sc.notices))
	needEvict, needCordon := float64(len(w.workload)), float64(sc.notices)
	lbEvict, lbCordon := p.evictionRate, p.cordonRate
	evictFraction, cordonFraction := lbEvict/cal.bestEvictions, lbCordon/cal.bestPatches
	say("rates (10th to 90th percentile of each; whole-run averages from the sending in brackets):")
	say("  cordons:   Lifeboat %6.1f/s (%.1f/s), calibrated node patches %6.0f/s: %.0f%%", lbCordon, needCordon/p.cordoned.Seconds(), cal.bestPatches, 100*cordonFraction)
	say("  evictions: Lifeboat %6.1f/s (%.1f/s), calibrated evictions   %6.0f/s: %.0f%%", lbEvict, needEvict/p.accepted.Seconds(), cal.bestEvictions, 100*evictFraction)
	longFraction := 0.0
	if cal.longEvictions > 0 {
		longFraction = lbEvict / cal.longEvictions
		say("  evictions: Lifeboat %6.1f/s, the calibration's long step (%d in flight for %s, bearing its own deletions) %6.0f/s: %.0f%%",
			lbEvict, cal.long.workers, cal.long.took.Round(time.Second), cal.longEvictions, 100*longFraction)
	}
	// The goal's yardstick: the long step before the burst and again after it, their mean.
	yardstickFraction := 0.0
	if s := cal.closing; s != nil {
		yardstickFraction = lbEvict / cal.yardstick()
		say("  evictions, closing step (the long step again once the burst was over, %s with its pods' creation): %d in flight for %s: %d requests = %.0f/s over the step, %.0f/s between the 10th and 90th percentile of its answers, p50 %s, p99 %s, 429s %d, other errors %d%s",
			closeTook.Round(100*time.Millisecond), s.workers, s.took.Round(time.Millisecond), s.requests, s.rate(), cal.closingEvictions,
			s.p50.Round(100*time.Microsecond), s.p99.Round(100*time.Microsecond), s.throttled, s.errors, settled(*s))
		say("  evictions: Lifeboat %6.1f/s, the long steps' mean (before %.0f/s, after %.0f/s, the server's drift between them %+.0f%%) %6.0f/s: %.0f%% (the goal: 95 %%)",
			lbEvict, cal.longEvictions, cal.closingEvictions, 100*(cal.closingEvictions/cal.longEvictions-1), cal.yardstick(), 100*yardstickFraction)
	}
	// An eviction's answer comes before the work it causes: kwok deletes the pod, and every
	// watcher hears both. The calibration's steps are answered before that work is done; the
	// burst pays for it while it evicts.
	say("  pods gone:  Lifeboat %6.1f/s, calibrated evictions with kwok's deletions %6.0f/s: %.0f%%", p.goneRate, cal.bestSettled, 100*p.goneRate/cal.bestSettled)
	// What each moved pod cost the API server: its cost, where the rates above are its pace
	// (on the shared cores, the CPU it gets divided by this). The burst's cordons, conditions
	// and the Events sent before its end are in its share; the long step has none.
	serverCPUPerPod, longServerCPUPerPod := 0.0, 0.0
	if p.nGone == len(w.workload) && len(w.workload) > 0 {
		serverCPUPerPod = 1000 * (childAfter[azServerProcess] - childBefore[azServerProcess] - serverIdle*burst.Seconds()) / needEvict
	}
	if cal.long != nil {
		longServerCPUPerPod = cal.long.serverCPUPerPod(serverIdle)
	}
	if cal.closing != nil && longServerCPUPerPod > 0 {
		if closing := cal.closing.serverCPUPerPod(serverIdle); closing > 0 {
			say("  the API server's CPU per moved pod in the closing step: %.2f ms (the long step before the burst %.2f ms)", closing, longServerCPUPerPod)
			longServerCPUPerPod = (longServerCPUPerPod + closing) / 2
		}
	}
	if serverCPUPerPod > 0 && longServerCPUPerPod > 0 {
		say("  the API server's CPU per moved pod, until the pods were gone, its idle %.2f cores (sampled for %s before the burst) taken off: Lifeboat's burst %.2f ms (cordons, conditions and Events included), the long steps %.2f ms: the plain evictor's cost is %.0f%% of Lifeboat's",
			serverIdle, azIdleSample, serverCPUPerPod, longServerCPUPerPod, 100*longServerCPUPerPod/serverCPUPerPod)
	} else if p.nGone == len(w.workload) {
		// Said rather than left out: an idle sample taken while the server still collected the
		// replicas' first lists takes off more than the burst's own share.
		say("  the API server's CPU per moved pod: not given, its idle %.2f cores (sampled for %s before the burst) leave nothing of the burst's %.1f s or the long steps' (burst %.2f ms, long steps %.2f ms)",
			serverIdle, azIdleSample, childAfter[azServerProcess]-childBefore[azServerProcess], serverCPUPerPod, longServerCPUPerPod)
	}
	// The sustained comparison. A calibration step's evictions are answered within its ten
	// seconds, but at 64 in flight its pods took about twice that to go: kwok deletes each pod
	// its eviction marks, through the same server, and that work was left for after the step.
	// A burst of a minute pays for it as it goes. So both sides are counted until the pods are
	// gone: the calibration's best step (its pods over the time from its start until the last
	// was gone) and the whole burst (every pod over the time from the sending until the last
	// was gone, cordons and tail included).
	sustained, sustainedFraction, floorGone := 0.0, 0.0, needEvict/cal.bestSettled
	if p.nGone == len(w.workload) && p.gone > 0 && cal.bestSettled > 0 { // else 0: nothing to compare
		sustained = needEvict / p.gone.Seconds()
		sustainedFraction = sustained / cal.bestSettled
	}
	say("  sustained, evictions counted until their pods were gone: Lifeboat %6.1f/s (all in %s), the calibration's best step %6.0f/s: %.0f%%; the goal, all gone within 1.25 × %.0f ÷ %.0f/s = %.1f s: %v",
		sustained, show(p.gone, p.nGone, len(w.workload)), cal.bestSettled, 100*sustainedFraction, needEvict, cal.bestSettled, 1.25*floorGone,
		sustainedFraction > 0 && p.gone.Seconds() <= 1.25*floorGone)
	if evictFraction > 1 || cordonFraction > 1 {
		say("  (above 100%%: the server gave more to Lifeboat's mix than to the calibration's steps of one kind)")
	}
	floorEvict, floorCordon := needEvict/cal.bestEvictions, needCordon/cal.bestPatches
	say("  needed ÷ calibrated: %.0f evictions ÷ %.0f/s = %.1f s; %.0f cordons ÷ %.0f/s = %.1f s; the goal, 1.25 × that for the evictions: %.1f s (took %s)",
		needEvict, cal.bestEvictions, floorEvict, needCordon, cal.bestPatches, floorCordon, 1.25*floorEvict, show(p.accepted, p.nAccepted, len(w.workload)))
	say("  request budget every 5 s from the sending (bound / requests in flight / waiting; the leading replica's, the standby's after a kill): %s", strings.Join(budgetLine, " "))
	say("  requests answered in each 5 s (evictions accepted / all others): %s", strings.Join(sentLine, " "))
	say("  budget changes: %.0f raised on demand, %.0f halved on a 429 or 503, %.0f lowered on a queue at the server",
		after.budgetChanges[pacing.ReasonDemand]-before.budgetChanges[pacing.ReasonDemand], after.budgetChanges[pacing.ReasonThrottled]-before.budgetChanges[pacing.ReasonThrottled],
		after.budgetChanges[pacing.ReasonQueueing]-before.budgetChanges[pacing.ReasonQueueing])
	within := p.nAccepted == len(w.workload) && p.accepted <= azSpotWarning
	say("  all evictions accepted within the %s Spot warning: %v, %d of %d (%.0f%%) were (the calibrated server could have: %v)", azSpotWarning, within,
		p.acceptedBy(azSpotWarning), len(w.workload), 100*float64(p.acceptedBy(azSpotWarning))/needEvict, floorEvict+floorCordon <= azSpotWarning.Seconds())
	say("  evictions accepted per 30 s from the sending: %s", timeline(p.acceptedAfter, 30*time.Second))
	say("  nodes cordoned per second from the sending: %s", timeline(p.cordonedAfter, time.Second))

	// Requests and calls, over the burst.
	kubeByKind, kubeByClient := map[string]float64{}, map[string]float64{}
	throttledByKind := map[string]float64{}
	var kubeTotal, kube429 float64
	for k, v := range after.kube {
		v -= before.kube[k]
		if v == 0 {
			continue
		}
		kind := k.verb + " " + k.resource
		kubeByKind[kind] += v
		kubeByClient[k.client] += v
		kubeTotal += v
		if k.code == "429" {
			throttledByKind[kind] += v
			kube429 += v
		} else if k.code != "200" && k.code != "201" {
			kubeByKind[kind+" "+k.code] += v
		}
	}
	say("Kubernetes requests by Lifeboat during the burst: %.0f (%.1f per notice), 429s %.0f; by client %s", kubeTotal, kubeTotal/needCordon, kube429, azFormat(kubeByClient))
	for _, kind := range azSortedKeys(kubeByKind) {
		say("  %-32s %7.0f   429s %.0f", kind, kubeByKind[kind], throttledByKind[kind])
	}
	azBackgroundReport(ctx, say, c.Client, bgBefore, bgFinal, visible, sc.notices, settledBackground)
	say("API Priority and Fairness during the burst: rejections (priority level, flow schema, reason) %s; workload-low's seat limit now %.0f (nominal %.0f); "+
		"peak nodes draining at once %d, %s", azFormat(azDiff(apfAfter.rejected, apfCal.rejected)),
		apfAfter.currentSeats["workload-low"], apfAfter.nominalSeats["workload-low"], p.peakDraining,
		map[bool]string{true: "their pods followed by one shared pod informer", false: "each drain with its own pod list and watch (USE_APISERVER_CACHE=false)"}[cfg.UseAPIServerCache])
	// Everyone's writes, kwok's among them: what else the server worked through meanwhile.
	served := azDiff(apfAfter.requests, apfCal.requests)
	for k, v := range served {
		if v < float64(len(w.notice)) {
			delete(served, k) // the few hundred of anything else
		}
	}
	say("the API server during the burst, every client (requests by verb and resource, lists and watches aside, at least one per notice): %s; by flow schema: %s",
		azFormat(served), azFormat(azDiff(apfAfter.dispatched, apfCal.dispatched)))
	say("  lists by resource %s; watches closed on a slow watcher %s", azFormat(azDiff(apfAfter.lists, apfCal.lists)),
		azFormat(azDiff(apfAfter.terminatedWatchers, apfCal.terminatedWatchers)))
	if gc, over := apfAfter.gc.minus(apfCal.gc), apfAfter.at.Sub(apfCal.at); gc.count > 0 && over > 0 {
		say("  the API server's Go garbage collections from the calibration's end to the burst's: %.0f in %s (one every %.1f s), stop-the-world pauses %.0f ms in all",
			gc.count, over.Round(100*time.Millisecond), over.Seconds()/gc.count, 1000*gc.sum)
	}
	if closed := azClosedWatches(b, filepath.Join(c.Dir, "kube-apiserver.log"), start); closed != "" {
		say("    which (the API server's log, from the sending): %s", closed)
	}
	latencyAfter := azClientLatency(m)
	if apfCordoned != nil {
		say("  mean time until all were cordoned: %s", azLatencyLine(apfCal, *apfCordoned, latencyBefore, latencyCordoned))
		say("  mean time after that:              %s", azLatencyLine(*apfCordoned, apfAfter, latencyCordoned, latencyAfter))
	}
	describe := after.fakeDescribe - before.fakeDescribe
	say("AWS: %d DescribeInstances requests at the fake EC2 API; Lifeboat's count, one per lookup (whose IDs go out in chunks): %s", describe, azFormat(azDiff(after.aws, before.aws)))
	say("SQS: Lifeboat %s; the fake endpoint saw %d calls in all, %d of them the harness's SendMessageBatch", azFormat(azDiff(after.sqs, before.sqs)),
		after.fakeSQS-before.fakeSQS, (len(bodies)+9)/10)
	say("Lifeboat's outcomes: evictions %s; actions %s; drains %s; drain claims (renewed only once another origin waits) %s", azFormat(azDiff(after.evictions, before.evictions)),
		azFormat(azDiff(after.actions, before.actions)), azFormat(azDiff(after.drains, before.drains)), azFormat(azDiff(after.claims, before.claims)))
	renewals, renewing := after.kube[azKubeKey{"lease", "update", "leases", "200"}]-before.kube[azKubeKey{"lease", "update", "leases", "200"}], burst
	if kill && !killedAt.IsZero() {
		renewals, renewing = leaseAtKill-before.kube[azKubeKey{"lease", "update", "leases", "200"}], killedAt.Sub(start)
	}
	say("Lease: %.0f renewals during the burst (%.1f a minute, retry period %s), leader lost: %v", renewals, renewals/renewing.Minutes(), cfg.LeaseRetryPeriod, leaderLost)
	if kill {
		azKilledReport(b, say, standby, cfg, p, killedAt.Sub(start), ledAfter, acceptedAtKill, renewals, renewing.Minutes())
	} else if p.nAccepted == len(w.workload) {
		azKeepPlain(p.acceptedAfter)
	}
	if !kill && standby != nil {
		say("standby (LIFEBOAT_SCALE_STANDBY=both): led during the run without a kill: %v (want false: no change of leader); Ready %s after its start; its requests during the burst: %s",
			standbyLed, standby.synced.Round(10*time.Millisecond), azFormat(azDiff(standbyAtEnd, standby.atSync)))
	}
	hwmNote := "since the burst began (reset through /proc/self/clear_refs)"
	if !hwmReset {
		hwmNote = "since the process began (could not reset it)"
	}
	say("memory (in-process, so the harness's node watch, pod-metadata watch and bookkeeping are included; Go's soft memory limit %.0f MiB, as the chart's container sets it): "+
		"runtime HeapInuse %.1f MiB before the burst, peak %.1f MiB; peak live heap after a GC %.1f MiB; goroutine stacks peak %.1f MiB (sampled every 100 ms); "+
		"VmRSS peak %.1f MiB (sampled); VmHWM %.1f MiB %s; goroutines peak %d",
		mib(azSoftMemoryLimit), mib(baseHeap), mib(peakHeap), mib(peakLive), mib(peakStacks), float64(peakRSS)/1024, float64(hwm)/1024, hwmNote, peakGoroutines)
	var childCPU []string
	for _, name := range azSortedKeys(childAfter) {
		childCPU = append(childCPU, fmt.Sprintf("%s %.1f s", name, childAfter[name]-childBefore[name]))
	}
	say("CPU during the burst (%s on %d cores = %.0f core-seconds): this process %.1f s (getrusage user+system: Lifeboat plus the harness's watches and sampling); %s",
		burst.Round(100*time.Millisecond), runtime.NumCPU(), burst.Seconds()*float64(runtime.NumCPU()), cpuUsed, strings.Join(childCPU, ", "))
	say("Lifeboat's warnings and errors: %s", logs)

	b.ReportMetric(setupTook.Seconds(), "setup-s")
	b.ReportMetric(calTook.Seconds(), "calibration-s")
	b.ReportMetric(p.cordoned.Seconds(), "cordoned-s")
	b.ReportMetric(p.accepted.Seconds(), "evictions-accepted-s")
	b.ReportMetric(p.gone.Seconds(), "pods-gone-s")
	b.ReportMetric(kubeTotal, "kube-requests")
	b.ReportMetric(kube429, "kube-429s")
	b.ReportMetric(float64(describe), "describe-instances")
	b.ReportMetric(cal.bestPatches, "calibrated-patches/s")
	b.ReportMetric(cal.bestEvictions, "calibrated-evictions/s")
	b.ReportMetric(lbEvict, "lifeboat-evictions/s")
	b.ReportMetric(lbCordon, "lifeboat-cordons/s")
	b.ReportMetric(evictFraction, "rate-fraction")
	b.ReportMetric(cal.longEvictions, "calibrated-long-evictions/s")
	b.ReportMetric(longFraction, "long-rate-fraction")
	b.ReportMetric(cal.closingEvictions, "calibrated-closing-evictions/s")
	b.ReportMetric(yardstickFraction, "long-mean-rate-fraction")
	b.ReportMetric(serverCPUPerPod, "server-cpu-ms/pod")
	b.ReportMetric(longServerCPUPerPod, "long-server-cpu-ms/pod")
	b.ReportMetric(sustainedFraction, "sustained-fraction")
	b.ReportMetric(mib(peakHeap), "peak-heap-MiB")
	b.ReportMetric(mib(peakLive), "peak-live-heap-MiB")
	b.ReportMetric(float64(p.acceptedBy(azSpotWarning)), "evictions-within-2m")
	b.ReportMetric(float64(hwm)/1024, "peak-rss-MiB")
	b.ReportMetric(cpuUsed, "cpu-s")
	if timedOut || p.nGone < len(w.workload) {
		b.Errorf("the burst did not finish within %s: %d of %d pods gone", azBurstLimit, p.nGone, len(w.workload))
	}
}

func mib(n uint64) float64 { return float64(n) / (1 << 20) }

// azBuildWorld creates the nodes (in parallel), their instances, the workloads and the
// calibration pods, and waits until kwok has every pod Running.
func azBuildWorld(ctx context.Context, c *sandbox.Cluster, fake *fakeaws.Server, sc azScale) (*azWorld, error) {
	w := &azWorld{}
	specs := make([]sandbox.NodeSpec, sc.nodes)
	for i := range specs {
		zone := "us-east-1a"
		if i >= sc.notices {
			zone = []string{"us-east-1b", "us-east-1c"}[i%2]
		}
		specs[i] = sandbox.NodeSpec{Index: i + 1, Zone: zone}
	}
	all := make([]*corev1.Node, sc.nodes)
	const chunk = 50
	if err := azInParallel(ctx, (sc.nodes+chunk-1)/chunk, 16, func(ctx context.Context, i int) error {
		added, err := c.AddNodes(ctx, specs[i*chunk:min((i+1)*chunk, sc.nodes)]...)
		copy(all[i*chunk:], added)
		return err
	}); err != nil {
		return nil, err
	}
	// Kept for the run in this process, whose memory the report measures: only what the
	// harness reads of them, their names and instances.
	for i, n := range all {
		all[i] = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name}, Spec: corev1.NodeSpec{ProviderID: n.Spec.ProviderID}}
	}
	w.notice, w.other = all[:sc.notices], all[sc.notices:]
	for _, n := range all {
		fake.AddInstance(fakeaws.Instance{ID: episode.InstanceIDOf(n), PrivateDNSName: n.Name, Tags: benchTags})
	}

	rc := rest.CopyConfig(c.AdminConfig)
	rc.QPS = -1 // no client rate limit: azSetupWorkers bounds the requests in flight
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	for _, ns := range []string{"shop", "calibration"} {
		if err := c.EnsureNamespace(ctx, ns); err != nil {
			return nil, err
		}
	}
	template := func(labels map[string]string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img"}}}}
	}
	replicaSet := func(ns, name string, replicas int) (metav1.OwnerReference, error) {
		labels := map[string]string{"app": name}
		rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
			Spec: appsv1.ReplicaSetSpec{Replicas: ptrTo(int32(replicas)), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: template(labels)}}
		created, err := client.AppsV1().ReplicaSets(ns).Create(ctx, rs, metav1.CreateOptions{})
		if err != nil {
			return metav1.OwnerReference{}, err
		}
		return metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: name, UID: created.UID, Controller: ptrTo(true), BlockOwnerDeletion: ptrTo(true)}, nil
	}
	apps := make([]metav1.OwnerReference, sc.pods)
	for j := range apps {
		if apps[j], err = replicaSet("shop", fmt.Sprintf("app-%d", j), sc.notices); err != nil {
			return nil, err
		}
	}
	w.calOwner, err = replicaSet("calibration", "calibration", 0)
	if err != nil {
		return nil, err
	}
	dsLabels := map[string]string{"app": "node-agent"}
	ds, err := client.AppsV1().DaemonSets("kube-system").Create(ctx, &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "node-agent"},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: dsLabels}, Template: template(dsLabels)}}, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	dsOwner := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID, Controller: ptrTo(true), BlockOwnerDeletion: ptrTo(true)}

	short := func(n *corev1.Node) string { return strings.TrimSuffix(n.Name, ".ec2.internal") }
	calibrationPods := azWarmup + sc.calibrationPods
	workload := sc.notices * sc.pods
	pod := func(i int) *corev1.Pod {
		var ns, name string
		var node *corev1.Node
		var owner metav1.OwnerReference
		switch {
		case i < workload:
			node, owner = w.notice[i/sc.pods], apps[i%sc.pods]
			ns, name = "shop", owner.Name+"-"+short(node)
		case i < workload+sc.nodes:
			node, owner = all[i-workload], dsOwner
			ns, name = "kube-system", "node-agent-"+short(node)
		default:
			return w.calibrationPod(i - workload - sc.nodes)
		}
		labels := map[string]string{"app": owner.Name}
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, OwnerReferences: []metav1.OwnerReference{owner}},
			Spec: corev1.PodSpec{NodeName: node.Name, Containers: []corev1.Container{{Name: "c", Image: "img"}}}}
	}
	total := workload + sc.nodes + calibrationPods
	for i := range total {
		if p := pod(i); p.Namespace == "shop" {
			w.workload = append(w.workload, p.Namespace+"/"+p.Name)
		} else if p.Namespace == "calibration" {
			w.calibration = append(w.calibration, p.Name)
		}
	}
	if err := azInParallel(ctx, total, azSetupWorkers, func(ctx context.Context, i int) error {
		p := pod(i)
		_, err := client.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
		return err
	}); err != nil {
		return nil, err
	}
	if err := azWaitRunning(ctx, client); err != nil {
		return nil, err
	}
	return w, nil
}

// azWaitRunning waits until kwok has marked every pod Running (a status write each), so that
// it is idle when a measurement begins.
func azWaitRunning(ctx context.Context, client kubernetes.Interface) error {
	for {
		pending, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{ResourceVersion: "0",
			FieldSelector: fields.OneTermNotEqualSelector("status.phase", string(corev1.PodRunning)).String()})
		if err != nil {
			return err
		}
		if len(pending.Items) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d pods not Running: %w", len(pending.Items), ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

func ptrTo[T any](v T) *T { return &v }

// azInParallel runs f for 0..n-1 on up to workers goroutines; the first error stops it.
func azInParallel(ctx context.Context, n, workers int, f func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := f(ctx, i); err != nil {
					cancel(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return context.Cause(ctx)
}

// azStep is one concurrency step of the calibration.
type azStep struct {
	workers, requests int
	errors, throttled int // failed requests; 429 answers (client-go retries those)
	took              time.Duration
	p50, p99          time.Duration
	// settled is, for evictions, the time from the step's start until kwok had deleted its
	// pods too: the server's work an eviction causes, not only its answer.
	settled time.Duration
	ranOut  bool // a timed step that used up its pool before its time was over
	// answered are when a timed step's requests were answered.
	answered []time.Time
	// cacheWait is, for evictions, how long the server's consistent lists of the disruption
	// budgets waited for its watch cache during the step (see azAPFState.cacheWait).
	cacheWait azMean
	// sandboxCPU is, for evictions, the CPU seconds each sandbox process used from the step's
	// start until its pods were gone (azChildCPU).
	sandboxCPU map[string]float64
}

// azServerProcess is the sandbox process whose CPU per evicted pod the report compares.
const azServerProcess = "kube-apiserver"

// azIdleSample is how long the API server's idle CPU is sampled before the burst.
const azIdleSample = 5 * time.Second

// serverCPUPerPod is the API server's CPU per evicted pod over the step, its deletions
// included and its idle CPU (cores) taken off, in milliseconds (0 when not measured).
func (s azStep) serverCPUPerPod(idle float64) float64 {
	if s.requests-s.errors <= 0 || s.sandboxCPU == nil {
		return 0
	}
	return 1000 * (s.sandboxCPU[azServerProcess] - idle*s.settled.Seconds()) / float64(s.requests-s.errors)
}

// rate is the accepted requests per second.
func (s azStep) rate() float64 { return float64(s.requests-s.errors) / s.took.Seconds() }

// azCodes counts HTTP status codes seen by a client (a kube.RequestObserver).
type azCodes struct {
	mu    sync.Mutex
	codes map[string]int
}

func (a *azCodes) KubeRequest(_, _, _, code string, _ bool, _ time.Duration) {
	a.mu.Lock()
	a.codes[code]++
	a.mu.Unlock()
}

func (a *azCodes) take(code string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := a.codes[code]
	a.codes = map[string]int{}
	return n
}

// azRunTimedStep sends requests with do, workers at a time, for d or until next has no more
// (do gets next's numbers), and times them.
func azRunTimedStep(ctx context.Context, workers int, d time.Duration, next func() (int, bool), codes *azCodes, do func(ctx context.Context, i int) error) azStep {
	codes.take("")
	var (
		mu       sync.Mutex
		lat      []time.Duration
		answered []time.Time
		errs     int
		ranOut   bool
	)
	start := time.Now()
	end := start.Add(d)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil && time.Now().Before(end) {
				i, ok := next()
				if !ok {
					mu.Lock()
					ranOut = true
					mu.Unlock()
					return
				}
				t := time.Now()
				err := do(ctx, i)
				took := time.Since(t)
				mu.Lock()
				lat = append(lat, took)
				answered = append(answered, t.Add(took))
				if err != nil {
					errs++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	s := azStep{workers: workers, requests: len(lat), errors: errs, took: time.Since(start), throttled: codes.take("429"), ranOut: ranOut, answered: answered}
	if len(lat) > 0 {
		slices.Sort(lat)
		s.p50, s.p99 = lat[len(lat)/2], lat[min(len(lat)-1, len(lat)*99/100)]
	}
	return s
}

// azRunStep sends n requests with do, workers at a time, and times them.
func azRunStep(ctx context.Context, workers, n int, codes *azCodes, do func(ctx context.Context, i int) error) azStep {
	codes.take("")
	lat := make([]time.Duration, n)
	var errs atomic.Int64
	start := time.Now()
	_ = azInParallel(ctx, n, workers, func(ctx context.Context, i int) error {
		t := time.Now()
		if err := do(ctx, i); err != nil {
			errs.Add(1)
		}
		lat[i] = time.Since(t)
		return nil
	})
	s := azStep{workers: workers, requests: n, errors: int(errs.Load()), took: time.Since(start), throttled: codes.take("429")}
	slices.Sort(lat)
	s.p50, s.p99 = lat[n/2], lat[min(n-1, n*99/100)]
	return s
}

// azProgress follows the notice nodes and their ReplicaSet pods through two watches, keeping
// only when each reached each stage.
type azProgress struct {
	mu                                    sync.Mutex
	nodes, pods                           map[string]int
	cordoned, drained, accepted, gone     []time.Time
	nCordoned, nDrained, nAccepted, nGone int
	phase                                 []record.Phase // of each node's record
	draining, peakDraining                int
	watchErr                              error
}

func newAZProgress(w *azWorld) *azProgress {
	p := &azProgress{nodes: map[string]int{}, pods: map[string]int{},
		cordoned: make([]time.Time, len(w.notice)), drained: make([]time.Time, len(w.notice)), phase: make([]record.Phase, len(w.notice)),
		accepted: make([]time.Time, len(w.workload)), gone: make([]time.Time, len(w.workload))}
	for i, n := range w.notice {
		p.nodes[n.Name] = i
	}
	for i, name := range w.workload {
		p.pods[name] = i
	}
	return p
}

// watch starts watching nodes and pods from now until ctx ends.
// The pods are followed by their metadata alone: the harness shares the process whose memory
// and CPU the report gives, and a watch decoding every pod in full is its largest cost.
func (p *azProgress) watch(ctx context.Context, client kubernetes.Interface, meta metadata.Interface) error {
	start := func(list func(ctx context.Context) (string, error), w cache.WatchFuncWithContext, handle func(watch.Event, time.Time)) error {
		rv, err := list(ctx)
		if err != nil {
			return err
		}
		rw, err := watchtools.NewRetryWatcherWithContext(ctx, rv, &cache.ListWatch{WatchFuncWithContext: w})
		if err != nil {
			return err
		}
		go func() {
			defer rw.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case ev, ok := <-rw.ResultChan():
					if !ok {
						return
					}
					if ev.Type == watch.Error {
						p.mu.Lock()
						p.watchErr = fmt.Errorf("watch: %v", ev.Object)
						p.mu.Unlock()
						continue
					}
					handle(ev, time.Now())
				}
			}
		}()
		return nil
	}
	err := start(func(ctx context.Context) (string, error) {
		l, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			return "", err
		}
		return l.ResourceVersion, nil
	}, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		return client.CoreV1().Nodes().Watch(ctx, o)
	}, func(ev watch.Event, at time.Time) {
		n, ok := ev.Object.(*corev1.Node)
		if !ok {
			return
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		i, ok := p.nodes[n.Name]
		if !ok {
			return
		}
		if n.Spec.Unschedulable && p.cordoned[i].IsZero() {
			p.cordoned[i] = at
			p.nCordoned++
		}
		r, _ := record.Read(n)
		if r.Phase == record.PhaseDrained && p.drained[i].IsZero() {
			p.drained[i] = at
			p.nDrained++
		}
		if was := p.phase[i]; was != r.Phase {
			if was == record.PhaseDraining {
				p.draining--
			}
			if r.Phase == record.PhaseDraining {
				p.draining++
				p.peakDraining = max(p.peakDraining, p.draining)
			}
			p.phase[i] = r.Phase
		}
	})
	if err != nil {
		return err
	}
	// Every namespace's, as kwok's and Lifeboat's are: the calibration's pods too.
	pods := meta.Resource(corev1.SchemeGroupVersion.WithResource("pods"))
	return start(func(ctx context.Context) (string, error) {
		l, err := pods.List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			return "", err
		}
		return l.ResourceVersion, nil
	}, func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		return pods.Watch(ctx, o)
	}, func(ev watch.Event, at time.Time) {
		pod, ok := ev.Object.(*metav1.PartialObjectMetadata)
		if !ok {
			return
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		i, ok := p.pods[pod.Namespace+"/"+pod.Name]
		if !ok {
			return
		}
		if (pod.DeletionTimestamp != nil || ev.Type == watch.Deleted) && p.accepted[i].IsZero() {
			p.accepted[i] = at
			p.nAccepted++
		}
		if ev.Type == watch.Deleted && p.gone[i].IsZero() {
			p.gone[i] = at
			p.nGone++
		}
	})
}

// finished reports whether every pod is gone and every node's record says drained.
// allCordoned reports whether every zone node has been seen cordoned.
func (p *azProgress) allCordoned() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.nCordoned == len(p.cordoned)
}

// acceptedCount is how many evictions have been seen accepted.
func (p *azProgress) acceptedCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.nAccepted
}

func (p *azProgress) finished() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.nGone == len(p.gone) && p.nDrained == len(p.drained)
}

// azTimes are the burst's times from the notices' sending, and Lifeboat's rates.
type azTimes struct {
	cordoned, accepted, gone, drained     time.Duration
	nCordoned, nAccepted, nGone, nDrained int
	cordonRate, evictionRate, goneRate    float64         // between the 10th and 90th percentile
	peakDraining                          int             // nodes whose record said draining at once
	acceptedAfter, cordonedAfter          []time.Duration // from the sending, in no order
}

// acceptedBy counts the evictions accepted within d of the sending.
func (t azTimes) acceptedBy(d time.Duration) int {
	n := 0
	for _, a := range t.acceptedAfter {
		if a <= d {
			n++
		}
	}
	return n
}

// timeline counts the events (times from the sending) in each interval of the given length.
func timeline(after []time.Duration, every time.Duration) string {
	var counts []int
	for _, a := range after {
		i := int(a / every)
		for len(counts) <= i {
			counts = append(counts, 0)
		}
		counts[i]++
	}
	parts := make([]string, len(counts))
	for i, n := range counts {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, " ")
}

func (p *azProgress) result(start time.Time) azTimes {
	p.mu.Lock()
	defer p.mu.Unlock()
	last := func(ts []time.Time) time.Duration {
		var d time.Duration
		for _, t := range ts {
			if !t.IsZero() {
				d = max(d, t.Sub(start))
			}
		}
		return d
	}
	since := func(ts []time.Time) []time.Duration {
		var after []time.Duration
		for _, t := range ts {
			if !t.IsZero() {
				after = append(after, t.Sub(start))
			}
		}
		return after
	}
	return azTimes{acceptedAfter: since(p.accepted), cordonedAfter: since(p.cordoned), cordoned: last(p.cordoned), accepted: last(p.accepted), gone: last(p.gone), drained: last(p.drained),
		nCordoned: p.nCordoned, nAccepted: p.nAccepted, nGone: p.nGone, nDrained: p.nDrained,
		cordonRate: azSustainedRate(p.cordoned), evictionRate: azSustainedRate(p.accepted), goneRate: azSustainedRate(p.gone), peakDraining: p.peakDraining}
}

// azSustainedRate is the rate of the events between their 10th and 90th percentile (all of
// them when there are fewer than 20), so that the ramp-up and the tail do not count.
func azSustainedRate(ts []time.Time) float64 {
	var seen []time.Time
	for _, t := range ts {
		if !t.IsZero() {
			seen = append(seen, t)
		}
	}
	if len(seen) < 2 {
		return 0
	}
	slices.SortFunc(seen, func(a, b time.Time) int { return a.Compare(b) })
	lo, hi := 0, len(seen)-1
	if len(seen) >= 20 {
		lo, hi = len(seen)/10, len(seen)*9/10
	}
	d := seen[hi].Sub(seen[lo])
	if d <= 0 {
		return 0
	}
	return float64(hi-lo) / d.Seconds()
}

// azKubeKey is one series of lifeboat_kube_requests_total.
type azKubeKey struct{ client, verb, resource, code string }

// azCounts are the counters read before and after the burst.
type azCounts struct {
	kube                                 map[azKubeKey]float64
	aws, sqs, evictions, actions, drains map[string]float64
	budgetChanges, claims                map[string]float64
	eventsDropped                        map[string]float64 // by object and reason
	fakeDescribe, fakeSQS                int
}

// plus adds o's Kubernetes requests and dropped Events to c's (two replicas' together).
func (c azCounts) plus(o azCounts) azCounts {
	sum := c
	sum.kube, sum.eventsDropped = maps.Clone(c.kube), maps.Clone(c.eventsDropped)
	for k, v := range o.kube {
		sum.kube[k] += v
	}
	for k, v := range o.eventsDropped {
		sum.eventsDropped[k] += v
	}
	return sum
}

func azSnapshot(m *metrics.Metrics, fake *fakeaws.Server) azCounts {
	out := azCounts{kube: map[azKubeKey]float64{}, aws: map[string]float64{}, sqs: map[string]float64{},
		evictions: map[string]float64{}, actions: map[string]float64{}, drains: map[string]float64{}, budgetChanges: map[string]float64{},
		eventsDropped: map[string]float64{}, claims: map[string]float64{}, fakeDescribe: fake.CallCount("ec2", "DescribeInstances"), fakeSQS: fake.CallCount("sqs", "")}
	families, err := m.Registry.Gather()
	if err != nil {
		return out
	}
	for _, f := range families {
		for _, s := range f.GetMetric() {
			l := map[string]string{}
			for _, lp := range s.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			v := s.GetCounter().GetValue()
			switch f.GetName() {
			case "lifeboat_kube_requests_total":
				out.kube[azKubeKey{l["client"], l["verb"], l["resource"], l["code"]}] += v
			case "lifeboat_aws_calls_total":
				out.aws[l["operation"]+" "+l["result"]] += v
			case "lifeboat_sqs_calls_total":
				out.sqs[l["event"]+" "+l["result"]] += v
			case "lifeboat_evictions_total":
				out.evictions[l["result"]] += v
			case "lifeboat_actions_total":
				out.actions[l["action"]+" "+l["result"]] += v
			case "lifeboat_drain_duration_seconds":
				out.drains[l["result"]] += float64(s.GetHistogram().GetSampleCount())
			case "lifeboat_kube_request_limit_changes_total":
				out.budgetChanges[l["reason"]] += v
			case "lifeboat_events_dropped_total":
				out.eventsDropped[l["object"]+" "+l["reason"]] += v
			case "lifeboat_drain_claims_total":
				out.claims[l["event"]] += v
			}
		}
	}
	return out
}

// azClosedWatch is one line of the API server's log at --vmodule=cache_watcher=1: a watch
// closed because its client did not read its events fast enough.
var azClosedWatch = regexp.MustCompile(`^I(\d{4} \d{2}:\d{2}:\d{2}\.\d{6}) .*Forcing (\S+) watcher close due to unresponsiveness: (key: .*)\. len\(c\.input\)`)

// azClosedWatches names the watches the API server closed as too slow from since on, each with
// how many times and when first (from since): the watch's key and selectors tell whose it was
// (kwok's, the harness's, Lifeboat's informers).
func azClosedWatches(b *testing.B, logPath string, since time.Time) string {
	raw, err := os.ReadFile(logPath)
	if err != nil {
		b.Logf("the API server's log: %v", err)
		return ""
	}
	type seen struct {
		count int
		first time.Duration
	}
	byWatch := map[string]*seen{}
	for _, line := range strings.Split(string(raw), "\n") {
		m := azClosedWatch.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		at, err := time.ParseInLocation("0102 15:04:05.000000", m[1], time.Local)
		if err != nil {
			continue
		}
		at = at.AddDate(since.Year(), 0, 0)
		if at.Before(since) {
			continue // the set-up's or the calibration's
		}
		k := m[2] + " " + m[3]
		if byWatch[k] == nil {
			byWatch[k] = &seen{first: at.Sub(since)}
		}
		byWatch[k].count++
	}
	parts := make([]string, 0, len(byWatch))
	for _, k := range azSortedKeys(byWatch) {
		parts = append(parts, fmt.Sprintf("%s ×%d (first at %.1fs)", k, byWatch[k].count, byWatch[k].first.Seconds()))
	}
	return strings.Join(parts, "; ")
}

func azDiff(after, before map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

func azSortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func azFormat(m map[string]float64) string {
	if len(m) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(m))
	for _, k := range azSortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s %.0f", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// azLogCounter is Lifeboat's logger in the benchmark: it counts warnings and errors by
// message and drops the rest.
type azLogCounter struct {
	mu      sync.Mutex
	counts  map[string]int
	samples map[string]string // the first "err" of each message
}

func (l *azLogCounter) Enabled(_ context.Context, level slog.Level) bool {
	return level >= slog.LevelWarn
}
func (l *azLogCounter) Handle(_ context.Context, r slog.Record) error {
	key := r.Level.String() + ": " + r.Message
	l.mu.Lock()
	defer l.mu.Unlock()
	l.counts[key]++
	if _, ok := l.samples[key]; !ok {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "err" {
				l.samples[key] = a.Value.String()
			}
			return true
		})
	}
	return nil
}
func (l *azLogCounter) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *azLogCounter) WithGroup(string) slog.Handler      { return l }

// String lists the messages with their counts and first error.
func (l *azLogCounter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.counts) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range azSortedKeys(l.counts) {
		part := fmt.Sprintf("%q ×%d", k, l.counts[k])
		if e := l.samples[k]; e != "" {
			part += fmt.Sprintf(" (first: %s)", e)
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, "; ")
}

// azWriteProfile writes the named runtime profile to path (the heap as of the last GC;
// debug 1 writes the goroutines as text, grouped by stack).
func azWriteProfile(name, path string, debug int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup(name).WriteTo(f, debug); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// azCPUProfileFor is how much of the burst LIFEBOAT_SCALE_CPU_PROFILE covers.
const azCPUProfileFor = 15 * time.Second

// azCPUProfile is the CPU profile LIFEBOAT_SCALE_CPU_PROFILE asks for: azCPUProfileFor from
// LIFEBOAT_SCALE_CPU_PROFILE_FROM, a time after the sending (default 0: the cordons and the
// first evictions) or "kill" (the new leader's work in the killed run).
type azCPUProfile struct {
	path     string
	from     time.Duration
	fromKill bool
	started  time.Time
	end      func()
}

func azNewCPUProfile(b *testing.B) *azCPUProfile {
	p := &azCPUProfile{path: os.Getenv("LIFEBOAT_SCALE_CPU_PROFILE")}
	switch from := os.Getenv("LIFEBOAT_SCALE_CPU_PROFILE_FROM"); from {
	case "":
	case "kill":
		p.fromKill = true
	default:
		d, err := time.ParseDuration(from)
		if err != nil || d < 0 {
			b.Fatalf("LIFEBOAT_SCALE_CPU_PROFILE_FROM=%q: want a duration after the sending (e.g. 30s) or kill", from)
		}
		p.from = d
	}
	return p
}

// due says whether the profile's time has come (whether or not this process's is asked for).
func (p *azCPUProfile) due(sinceSending time.Duration, killed bool) bool {
	if p.fromKill {
		return killed
	}
	return sinceSending >= p.from
}

// tick starts the profile when its time has come and ends it azCPUProfileFor later.
func (p *azCPUProfile) tick(b *testing.B, sinceSending time.Duration, killed bool) {
	switch {
	case p.path == "" || (p.started.IsZero() && p.end != nil):
	case p.end == nil && p.due(sinceSending, killed):
		end, err := azStartCPUProfile(p.path)
		if err != nil {
			b.Fatalf("CPU profile: %v", err)
		}
		p.started, p.end = time.Now(), end
	case p.end != nil && time.Since(p.started) >= azCPUProfileFor:
		p.stop()
	}
}

// stop ends the profile if it is running.
func (p *azCPUProfile) stop() {
	if p.end != nil && !p.started.IsZero() {
		p.end()
		p.started = time.Time{}
	}
}

// azStartCPUProfile starts the process's CPU profile into path; stop ends it and closes the file.
func azStartCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// azHeapAndStacks are the runtime's HeapInuse and StackInuse.
func azHeapAndStacks() (heap, stacks uint64) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse, ms.StackInuse
}

// azSoftMemoryLimit is the Go runtime's soft memory limit in the chart's controller container:
// cmd/lifeboat sets 90 % of the container's limit (controller.resources.limits.memory, 512Mi).
const azSoftMemoryLimit = 512 << 20 * 9 / 10

// azProcStatus reads a kB field of /proc/self/status (VmRSS, VmHWM).
func azProcStatus(field string) (uint64, error) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			return strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		}
	}
	return 0, errors.New(field + " not in /proc/self/status")
}

// azProcessCPU is this process's user and system CPU time so far, in seconds.
func azProcessCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// azChildCPU is the user and system CPU time so far of each process this one started (the
// sandbox: kube-apiserver, etcd, kwok, goaws), by command name, in seconds.
func azChildCPU() map[string]float64 {
	self := os.Getpid()
	out := map[string]float64{}
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	for _, d := range dirs {
		if _, err := strconv.Atoi(d.Name()); err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(data)
		open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || closing < open || closing+2 > len(s) {
			continue
		}
		f := strings.Fields(s[closing+2:]) // from field 3 (state) on
		if len(f) < 13 {
			continue
		}
		if ppid, _ := strconv.Atoi(f[1]); ppid != self {
			continue
		}
		utime, _ := strconv.ParseFloat(f[11], 64) // field 14, in clock ticks
		stime, _ := strconv.ParseFloat(f[12], 64) // field 15
		out[s[open+1:closing]] += (utime + stime) / 100
	}
	return out
}

// azAPFState is what the API server's metrics say of API Priority and Fairness.
type azAPFState struct {
	rejected                   map[string]float64 // "priority-level flow-schema reason"
	currentSeats, nominalSeats map[string]float64 // by priority level
	// What the server answered, from every client: "verb resource[/subresource]" (watches and
	// lists aside), and by flow schema.
	requests, dispatched map[string]float64
	// Lists by resource, and watches the server closed on a watcher too slow to keep up (which
	// then lists again): a client relisting thousands of pods costs more than the burst's writes.
	lists, terminatedWatchers map[string]float64
	// How long the server took over requests ("verb resource[/subresource]"), and how long
	// they waited in API Priority and Fairness's queues (by priority level).
	took, waited map[string]azMean
	// How long consistent reads waited for the watch cache to catch up with etcd, by resource:
	// an eviction lists its namespace's disruption budgets so, and the cache of a kind that
	// hardly changes catches up on etcd's progress notifications, asked for every 100 ms.
	cacheWait map[string]azMean
	// The server's Go garbage collections so far (go_gc_duration_seconds: cycles, and their
	// stop-the-world pauses in all), and when the metrics were read.
	gc azMean
	at time.Time
}

// azMean is a histogram's sum and count.
type azMean struct{ sum, count float64 }

func (a azMean) minus(b azMean) azMean { return azMean{a.sum - b.sum, a.count - b.count} }

func (a azMean) String() string {
	if a.count <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1fms (%.0f)", 1000*a.sum/a.count, a.count)
}

// azClientLatency is Lifeboat's own view of its requests' latency, by verb (it includes the
// time on the wire and in the client, not the wait for the request budget).
func azClientLatency(m *metrics.Metrics) map[string]azMean {
	out := map[string]azMean{}
	families, err := m.Registry.Gather()
	if err != nil {
		return out
	}
	for _, f := range families {
		if f.GetName() != "lifeboat_kube_request_duration_seconds" {
			continue
		}
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "verb" {
					out[l.GetValue()] = azMean{s.GetHistogram().GetSampleSum(), float64(s.GetHistogram().GetSampleCount())}
				}
			}
		}
	}
	return out
}

// azLatencyLine says, between two readings, how long the server took over node patches, node
// reads and evictions (every client's), how long Lifeboat saw its patches and evictions take,
// and the queue waits by priority level.
func azLatencyLine(from, to azAPFState, clientFrom, clientTo map[string]azMean) string {
	var server, waits []string
	for _, kind := range []string{"patch nodes", "get nodes", "create pods/eviction"} {
		server = append(server, kind+" "+to.took[kind].minus(from.took[kind]).String())
	}
	for _, level := range azSortedKeys(to.waited) {
		if d := to.waited[level].minus(from.waited[level]); d.count > 0 {
			waits = append(waits, level+" "+d.String())
		}
	}
	return fmt.Sprintf("at the server %s (of which waiting for the disruption budgets' watch cache %s); Lifeboat saw patch %s, create %s, get %s; queued by priority level %s",
		strings.Join(server, ", "), to.cacheWait["poddisruptionbudgets"].minus(from.cacheWait["poddisruptionbudgets"]),
		clientTo["patch"].minus(clientFrom["patch"]), clientTo["create"].minus(clientFrom["create"]),
		clientTo["get"].minus(clientFrom["get"]), strings.Join(waits, ", "))
}

// azAddSample adds a histogram's _sum or _count line to m.
func azAddSample(m azMean, name string, v float64) azMean {
	if strings.HasSuffix(name, "_sum") {
		m.sum += v
	} else {
		m.count += v
	}
	return m
}

// azAPF reads the API server's /metrics (as system:masters); empty when that fails.
func azAPF(ctx context.Context, client kubernetes.Interface) azAPFState {
	out := azAPFState{rejected: map[string]float64{}, currentSeats: map[string]float64{}, nominalSeats: map[string]float64{},
		requests: map[string]float64{}, dispatched: map[string]float64{}, lists: map[string]float64{}, terminatedWatchers: map[string]float64{},
		took: map[string]azMean{}, waited: map[string]azMean{}, cacheWait: map[string]azMean{}}
	raw, err := client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return out
	}
	out.at = time.Now()
	for _, line := range strings.Split(string(raw), "\n") {
		name, rest, ok := strings.Cut(line, "{")
		if !ok {
			if name, value, ok := strings.Cut(line, " "); ok {
				v, _ := strconv.ParseFloat(value, 64)
				switch name {
				case "go_gc_duration_seconds_count":
					out.gc.count = v
				case "go_gc_duration_seconds_sum":
					out.gc.sum = v
				}
			}
			continue
		}
		labelText, valueText, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(valueText), 64)
		if err != nil {
			continue
		}
		labels := map[string]string{}
		for _, pair := range strings.Split(labelText, "\",") {
			k, val, _ := strings.Cut(pair, "=\"")
			labels[k] = strings.TrimSuffix(val, "\"")
		}
		switch name {
		case "apiserver_flowcontrol_rejected_requests_total":
			out.rejected[labels["priority_level"]+" "+labels["flow_schema"]+" "+labels["reason"]] += v
		case "apiserver_flowcontrol_current_limit_seats":
			out.currentSeats[labels["priority_level"]] = v
		case "apiserver_flowcontrol_nominal_limit_seats":
			out.nominalSeats[labels["priority_level"]] = v
		case "apiserver_request_total":
			if labels["verb"] == "LIST" && labels["resource"] != "" {
				out.lists[labels["resource"]] += v
			}
			if verb := labels["verb"]; verb != "WATCH" && verb != "LIST" && labels["resource"] != "" {
				resource := labels["resource"]
				if sub := labels["subresource"]; sub != "" {
					resource += "/" + sub
				}
				out.requests[strings.ToLower(verb)+" "+resource] += v
			}
		case "apiserver_terminated_watchers_total":
			out.terminatedWatchers[labels["resource"]] += v
		case "apiserver_flowcontrol_dispatched_requests_total":
			out.dispatched[labels["flow_schema"]] += v
		case "apiserver_request_duration_seconds_sum", "apiserver_request_duration_seconds_count":
			resource := labels["resource"]
			if sub := labels["subresource"]; sub != "" {
				resource += "/" + sub
			}
			verb := strings.ToLower(labels["verb"])
			if verb == "post" {
				verb = "create"
			}
			out.took[verb+" "+resource] = azAddSample(out.took[verb+" "+resource], name, v)
		case "apiserver_watch_cache_read_wait_seconds_sum", "apiserver_watch_cache_read_wait_seconds_count":
			out.cacheWait[labels["resource"]] = azAddSample(out.cacheWait[labels["resource"]], name, v)
		case "apiserver_flowcontrol_request_wait_duration_seconds_sum", "apiserver_flowcontrol_request_wait_duration_seconds_count":
			out.waited[labels["priority_level"]] = azAddSample(out.waited[labels["priority_level"]], name, v)
		}
	}
	return out
}
