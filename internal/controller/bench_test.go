// SPDX-License-Identifier: Apache-2.0

package controller_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/cloud/controlleronly"
	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/controller"
	"lifeboat.dev/lifeboat/internal/daemon"
	"lifeboat.dev/lifeboat/internal/episode"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/record"
	"lifeboat.dev/lifeboat/test/sandbox"
	"lifeboat.dev/lifeboat/test/sandbox/fakeaws"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// BenchmarkQueueBurst sends 300 Spot notices at once for 300 nodes with 3 pods each to a
// leading controller and reports the time until all are cordoned and all drained, the API
// requests they took (per notice), the Lease's renewals, and AWS calls, at the default
// WORKERS (10), at WORKERS=100, with 500 scheduled episodes pending (recorded on their
// nodes, due in three days) when the burst comes, and with the hand-back's waits on: every
// instance in one of three target groups (10 s deregistration delay), deregistered as the
// notices are sent, so every node is held until its target has drained.
//
//	go test -run '^$' -bench QueueBurst -benchtime 1x -timeout 30m ./internal/controller
func BenchmarkQueueBurst(b *testing.B) {
	const nodes, podsPerNode = 300, 3
	for _, run := range []struct{ workers, pending, targetGroups int }{{10, 0, 0}, {100, 0, 0}, {10, 500, 0}, {10, 0, 3}} {
		name := fmt.Sprintf("workers=%d/pending=%d", run.workers, run.pending)
		if run.targetGroups > 0 {
			name += fmt.Sprintf("/target-groups=%d", run.targetGroups)
		}
		b.Run(name, func(b *testing.B) {
			for range b.N {
				burst(b, nodes, podsPerNode, run.workers, run.pending, run.targetGroups)
			}
		})
	}
}

// benchTargetDelay is the deregistration delay of the burst's target groups.
const benchTargetDelay = 10 * time.Second

// benchTags are the tags of every benchmark instance: managed by Lifeboat, owned by cluster
// "sandbox".
var benchTags = map[string]string{"aws-node-termination-handler/managed": "", "kubernetes.io/cluster/sandbox": "owned"}

// benchConfig is the controller's configuration for a benchmark: the queue, the fake AWS
// endpoint and cluster "sandbox", then the extra name/value pairs; everything else default.
// benchLogger is the controller's logger in a benchmark: discarded, unless
// LIFEBOAT_BENCH_LOG names a file for its log (JSON, debug level, appended), to see what a slow
// iteration did.
func benchLogger(b *testing.B) *slog.Logger {
	path := os.Getenv("LIFEBOAT_BENCH_LOG")
	if path == "" {
		return slog.New(slog.DiscardHandler)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		b.Fatalf("LIFEBOAT_BENCH_LOG: %v", err)
	}
	b.Cleanup(func() { f.Close() })
	return slog.New(slog.NewJSONHandler(f, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// benchAWSConfig is the sandbox's AWS configuration with the SDK's standard retries, as the
// binary has (the tests' configuration makes one attempt per call, so that injected faults
// are seen). Now and then the SDK's HTTP client finds its connection closed while it reads an
// answer ("use of closed network connection", on the client's side); the standard retryer
// retries that, and with one attempt a burst's batched DescribeInstances failed on it, which
// held every notice of the batch for a retry.
func benchAWSConfig(endpoint string) aws.Config {
	cfg := sandboxtest.AWSConfig(endpoint)
	cfg.RetryMaxAttempts = 0
	return cfg
}

func benchConfig(b *testing.B, queueURL, awsEndpoint string, extra ...string) *config.Config {
	b.Helper()
	return sandboxtest.Config(b, config.ModeController, append([]string{"QUEUE_URL", queueURL, "AWS_REGION", "us-east-1",
		"AWS_ENDPOINT", awsEndpoint, "CLUSTER_NAME", "sandbox"}, extra...)...)
}

// sendBatches puts the message bodies on the queue, ten to a SendMessageBatch call, one call
// after the other.
func sendBatches(ctx context.Context, queue *awssqs.Client, queueURL string, bodies []string) error {
	for i := 0; i < len(bodies); i += 10 {
		var entries []sqstypes.SendMessageBatchRequestEntry
		for j, body := range bodies[i:min(i+10, len(bodies))] {
			entries = append(entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(j)), MessageBody: aws.String(body)})
		}
		if _, err := queue.SendMessageBatch(ctx, &awssqs.SendMessageBatchInput{QueueUrl: &queueURL, Entries: entries}); err != nil {
			return err
		}
	}
	return nil
}

func burst(b *testing.B, nodeCount, podsPerNode, workers, pendingCount, targetGroups int) {
	b.StopTimer()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c := sandboxtest.Cluster(b, sandbox.ClusterOptions{AuditLog: true})
	q := sandboxtest.SQS(b, sandbox.SQSOptions{Queues: []string{"lifeboat"}, VisibilityTimeout: 30})
	fake := sandboxtest.FakeAWS(b, q.Endpoint)
	specs := make([]sandbox.NodeSpec, nodeCount+pendingCount)
	for i := range specs {
		specs[i] = sandbox.NodeSpec{Index: i + 1}
	}
	all, err := c.AddNodes(ctx, specs...)
	if err != nil {
		b.Fatal(err)
	}
	nodes, pending := all[:nodeCount], all[nodeCount:]
	if err := c.EnsureNamespace(ctx, "shop"); err != nil {
		b.Fatal(err)
	}
	for _, n := range all {
		fake.AddInstance(fakeaws.Instance{ID: episode.InstanceIDOf(n), PrivateDNSName: n.Name, Tags: benchTags})
		for i := range podsPerNode {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: n.Name[:len(n.Name)-len(".ec2.internal")] + "-" + strconv.Itoa(i)},
				Spec: corev1.PodSpec{NodeName: n.Name, Containers: []corev1.Container{{Name: "c", Image: "img"}}}}
			if _, err := c.Client.CoreV1().Pods("shop").Create(ctx, p, metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	}
	awsCfg := benchAWSConfig(fake.URL())
	queue := awssqs.NewFromConfig(awsCfg)
	queueURL := q.QueueURLs["lifeboat"]
	send := func(bodies []string) {
		if err := sendBatches(ctx, queue, queueURL, bodies); err != nil {
			b.Fatal(err)
		}
	}
	cfg := benchConfig(b, queueURL, fake.URL(), "WORKERS", strconv.Itoa(workers), "SQS_MSG_VISIBILITY_TIMEOUT_SEC", "30")
	client := func(user string, qps float32, burst int) kubernetes.Interface {
		rc, err := c.UserConfig(user, "system:masters")
		if err != nil {
			b.Fatal(err)
		}
		rc.QPS, rc.Burst = qps, burst
		return kubernetes.NewForConfigOrDie(rc)
	}
	// The clients the binary has, sharing one budget: drains and records, cordons, Events;
	// the Lease has its own user here, so its renewals are counted apart.
	m := metrics.New()
	base, err := c.UserConfig("lifeboat-bench", "system:masters")
	if err != nil {
		b.Fatal(err)
	}
	clients, err := daemon.KubeClients(base, cfg, m)
	if err != nil {
		b.Fatal(err)
	}
	groups := make([]string, targetGroups)
	for i := range groups {
		groups[i] = fake.AddTargetGroup(fakeaws.TargetGroup{Name: fmt.Sprintf("web-%d", i), DeregistrationDelay: benchTargetDelay})
	}
	for i, n := range nodes {
		if targetGroups > 0 {
			if err := fake.RegisterTarget(groups[i%targetGroups], episode.InstanceIDOf(n), 80); err != nil {
				b.Fatal(err)
			}
		}
	}
	handler := episode.Options{CordonClient: clients.Cordon, StatusClient: clients.Events} // node conditions in the background lane, as the binary writes them
	if targetGroups > 0 {
		handler.DetachWaits = daemon.DetachWaits(ctx, cfg, config.ModeController, clients.Main, m, slog.New(slog.DiscardHandler))
	}
	ctl := controller.New(controller.Options{Config: cfg, Client: clients.Main, LeaseClient: client("lifeboat-bench-lease", 5, 10),
		Queue: queue, EC2: controlleronly.NewAWSEC2(awsCfg), AutoScaling: cloud.NewAWSAutoScaling(awsCfg), Logger: benchLogger(b), Metrics: m, Handler: handler})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- ctl.RunWithLeaderElection(runCtx) }()
	defer func() {
		stop()
		<-done
	}()

	// The pending episodes: AWS Health scheduled changes naming ten instances each, due in
	// three days, recorded on their nodes before the burst comes.
	var changes []string
	due := time.Now().Add(72 * time.Hour)
	for i := 0; i < len(pending); i += 10 {
		var ids []string
		for _, n := range pending[i:min(i+10, len(pending))] {
			ids = append(ids, episode.InstanceIDOf(n))
		}
		changes = append(changes, fakeaws.HealthScheduledChange(fmt.Sprintf("maintenance-%d", i), "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED", due, due.Add(2*time.Hour), "", "", ids...))
	}
	send(changes)
	count := func(ns []*corev1.Node) (cordoned, drained, scheduled int) {
		want := map[string]bool{}
		for _, n := range ns {
			want[n.Name] = true
		}
		list, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		for i := range list.Items {
			n := &list.Items[i]
			if !want[n.Name] {
				continue
			}
			r, _ := record.Read(n)
			if n.Spec.Unschedulable {
				cordoned++
			}
			if r.Phase == record.PhaseDrained {
				drained++
			}
			if len(r.Intents) > 0 && r.Phase == record.PhaseDraining {
				scheduled++
			}
		}
		return cordoned, drained, scheduled
	}
	// Polled until ctx ends: an error here is ctx's, said below.
	_ = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		if m.Value("lifeboat_leader") < 1 {
			return false, nil
		}
		_, _, scheduled := count(pending)
		return scheduled == len(pending), nil
	})
	if ctx.Err() != nil {
		b.Fatal("the controller did not lead, or did not record the pending episodes")
	}

	b.StartTimer()
	start := time.Now()
	bodies := make([]string, len(nodes))
	for i, n := range nodes {
		bodies[i] = spotMessage(episode.InstanceIDOf(n))
	}
	send(bodies)
	// As Auto Scaling would on its way to terminating them: each target drains for the delay.
	for i, n := range nodes {
		if targetGroups > 0 {
			fake.DeregisterTarget(groups[i%targetGroups], episode.InstanceIDOf(n))
		}
	}
	var allCordoned, allDrained time.Duration
	leaderLost := false
	for allDrained == 0 && ctx.Err() == nil {
		cordoned, drained, _ := count(nodes)
		if cordoned == nodeCount && allCordoned == 0 {
			allCordoned = time.Since(start)
		}
		if drained == nodeCount {
			allDrained = time.Since(start)
		}
		leaderLost = leaderLost || m.Value("lifeboat_leader") < 1
		time.Sleep(100 * time.Millisecond)
	}
	b.StopTimer()
	end := time.Now()
	var mem runtime.MemStats
	runtime.ReadMemStats(&mem)
	_, drainedEarly, _ := count(pending)

	events, err := c.AuditEvents(sandbox.ByUser("lifeboat-bench"))
	if err != nil {
		b.Fatal(err)
	}
	byKind := map[string]int{}
	requests := 0
	var firstCordon, lastCordon time.Time
	for _, e := range events {
		if e.ObjectRef == nil || e.StageTimestamp.Before(start) || e.StageTimestamp.After(end) {
			continue // the pending episodes' intake, before the burst
		}
		requests++
		kind := e.Verb + " " + e.ObjectRef.Resource
		if e.ObjectRef.Subresource != "" {
			kind += "/" + e.ObjectRef.Subresource
		}
		if e.ResponseStatus != nil && e.ResponseStatus.Code >= 300 {
			kind += " " + strconv.Itoa(e.ResponseStatus.Code)
		}
		byKind[kind]++
		if kind == "patch nodes" {
			if firstCordon.IsZero() || e.StageTimestamp.Before(firstCordon) {
				firstCordon = e.StageTimestamp
			}
			lastCordon = e.StageTimestamp
		}
	}
	renewals, longestGap := leaseRenewals(b, c, start, end)
	b.Logf("requests by kind: %v; node patches from %s to %s; lease renewals %d, longest gap %s, leader lost: %v; pending drained early: %d",
		byKind, firstCordon.Format("15:04:05.000"), lastCordon.Format("15:04:05.000"), renewals, longestGap, leaderLost, drainedEarly)
	if leaderLost || drainedEarly > 0 {
		b.Errorf("the burst cost the Lease (%v) or drained a pending episode early (%d)", leaderLost, drainedEarly)
	}
	b.ReportMetric(allCordoned.Seconds(), "s-all-cordoned")
	b.ReportMetric(allDrained.Seconds(), "s-all-drained")
	b.ReportMetric(float64(requests), "kube-requests")
	b.ReportMetric(float64(requests)/float64(nodeCount), "kube-requests/notice")
	b.ReportMetric(longestGap.Seconds(), "s-longest-lease-gap")
	b.ReportMetric(float64(fake.CallCount("ec2", "DescribeInstances")), "DescribeInstances")
	b.ReportMetric(float64(fake.CallCount("sqs", "")), "sqs-calls")
	b.ReportMetric(float64(mem.HeapInuse)/(1<<20), "heap-MiB")
	if targetGroups > 0 {
		// Every node waited for its target: the drain and the hand-back together.
		b.ReportMetric(float64(fake.CallCount("elasticloadbalancing", "DescribeTargetHealth")), "DescribeTargetHealth")
		b.ReportMetric(float64(fake.CallCount("elasticloadbalancing", "DescribeTargetGroups")), "DescribeTargetGroups")
		b.ReportMetric(m.Value("lifeboat_handback_wait_seconds", "wait", "targets", "outcome", "released"), "target-waits-released")
	}
}

// leaseRenewals counts the Lease's successful renewals between start and end and the longest
// time between two of them (the elector renews every 2 s; it gives up after 10 s).
func leaseRenewals(b *testing.B, c *sandbox.Cluster, start, end time.Time) (int, time.Duration) {
	events, err := c.AuditEvents(sandbox.ByUser("lifeboat-bench-lease"))
	if err != nil {
		b.Fatal(err)
	}
	var count int
	var longest time.Duration
	last := start
	for _, e := range events {
		if e.ObjectRef == nil || e.ObjectRef.Resource != "leases" || e.Verb != "update" || e.StageTimestamp.Before(start) || e.StageTimestamp.After(end) ||
			(e.ResponseStatus != nil && e.ResponseStatus.Code >= 300) {
			continue
		}
		count++
		longest = max(longest, e.StageTimestamp.Sub(last))
		last = e.StageTimestamp
	}
	return count, max(longest, end.Sub(last))
}
