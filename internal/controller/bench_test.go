package controller_test

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/controller"
	"lifeboat.dev/lifeboat/internal/interruption"
	"lifeboat.dev/lifeboat/internal/sandbox"
	"lifeboat.dev/lifeboat/internal/sandbox/fakeaws"
	"lifeboat.dev/lifeboat/internal/sandbox/sandboxtest"
)

// BenchmarkQueueBurst sends 300 spot notices at once for 300 nodes with 3 pods each and
// reports the time until all are cordoned and all drained, Lifeboat's API requests, and AWS
// calls by type, at the default WORKERS (10) and at WORKERS=100.
//
//	go test -run '^$' -bench QueueBurst -benchtime 1x -timeout 30m ./internal/controller
func BenchmarkQueueBurst(b *testing.B) {
	const nodes, podsPerNode = 300, 3
	for _, workers := range []int{10, 100} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			for range b.N {
				burst(b, nodes, podsPerNode, workers)
			}
		})
	}
}

func burst(b *testing.B, nodeCount, podsPerNode, workers int) {
	b.StopTimer()
	b.Setenv("AWS_ACCESS_KEY_ID", "AKIDSANDBOX")
	b.Setenv("AWS_SECRET_ACCESS_KEY", "sandbox-secret")
	b.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c := sandboxtest.Cluster(b, sandbox.ClusterOptions{AuditLog: true})
	q := sandboxtest.SQS(b, sandbox.SQSOptions{Queues: []string{"lifeboat"}, VisibilityTimeout: 30})
	fake := sandboxtest.FakeAWS(b, q.Endpoint)
	specs := make([]sandbox.NodeSpec, nodeCount)
	for i := range specs {
		specs[i] = sandbox.NodeSpec{Index: i + 1}
	}
	nodes, err := c.AddNodes(ctx, specs...)
	if err != nil {
		b.Fatal(err)
	}
	if err := c.EnsureNamespace(ctx, "shop"); err != nil {
		b.Fatal(err)
	}
	tags := map[string]string{"aws-node-termination-handler/managed": "", "kubernetes.io/cluster/sandbox": "owned"}
	for _, n := range nodes {
		fake.AddInstance(fakeaws.Instance{ID: interruption.InstanceIDOf(n), PrivateDNSName: n.Name, Tags: tags})
		for i := range podsPerNode {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: n.Name[:len(n.Name)-len(".ec2.internal")] + "-" + strconv.Itoa(i)},
				Spec: corev1.PodSpec{NodeName: n.Name, Containers: []corev1.Container{{Name: "c", Image: "img"}}}}
			if _, err := c.Client.CoreV1().Pods("shop").Create(ctx, p, metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	}
	awsCfg := sandboxtest.AWSConfig(fake.URL())
	queue := awssqs.NewFromConfig(awsCfg)
	queueURL := q.QueueURLs["lifeboat"]
	for i := 0; i < len(nodes); i += 10 {
		var entries []sqstypes.SendMessageBatchRequestEntry
		for j, n := range nodes[i:min(i+10, len(nodes))] {
			entries = append(entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(j)), MessageBody: aws.String(spotMessage(interruption.InstanceIDOf(n)))})
		}
		if _, err := queue.SendMessageBatch(ctx, &awssqs.SendMessageBatchInput{QueueUrl: &queueURL, Entries: entries}); err != nil {
			b.Fatal(err)
		}
	}
	cfg := sandboxtest.Config(b, config.ModeController, "QUEUE_URL", queueURL, "AWS_REGION", "us-east-1", "AWS_ENDPOINT", fake.URL(),
		"CLUSTER_NAME", "sandbox", "WORKERS", strconv.Itoa(workers), "SQS_MSG_VISIBILITY_TIMEOUT_SEC", "30")
	rc, err := c.UserConfig("lifeboat-bench", "system:masters")
	if err != nil {
		b.Fatal(err)
	}
	rc.QPS, rc.Burst = float32(cfg.KubeAPIQPS), cfg.KubeAPIBurst
	ctl := controller.New(cfg, kubernetes.NewForConfigOrDie(rc), queue, cloud.NewAWSEC2(awsCfg), cloud.NewAWSAutoScaling(awsCfg), slog.New(slog.DiscardHandler), nil)
	ctl.Handler().SetCordonClient(kubernetes.NewForConfigOrDie(rc)) // as the binary does

	b.StartTimer()
	start := time.Now()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- ctl.Run(runCtx) }()
	var allCordoned, allDrained time.Duration
	for allDrained == 0 && ctx.Err() == nil {
		list, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		cordoned, drained := 0, 0
		for i := range list.Items {
			if list.Items[i].Spec.Unschedulable {
				cordoned++
			}
			if r, _ := interruption.ReadRecord(&list.Items[i]); r.Phase == interruption.PhaseDrained {
				drained++
			}
		}
		if cordoned == nodeCount && allCordoned == 0 {
			allCordoned = time.Since(start)
		}
		if drained == nodeCount {
			allDrained = time.Since(start)
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.StopTimer()
	var mem runtime.MemStats
	runtime.ReadMemStats(&mem)
	stop()
	<-done

	events, err := c.AuditEvents(sandbox.ByUser("lifeboat-bench"))
	if err != nil {
		b.Fatal(err)
	}
	byKind := map[string]int{}
	var firstCordon, lastCordon time.Time
	for _, e := range events {
		if e.ObjectRef == nil {
			continue
		}
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
	b.Logf("requests by kind: %v; node patches from %s to %s", byKind, firstCordon.Format("15:04:05.000"), lastCordon.Format("15:04:05.000"))
	b.ReportMetric(allCordoned.Seconds(), "s-all-cordoned")
	b.ReportMetric(allDrained.Seconds(), "s-all-drained")
	b.ReportMetric(float64(len(events)), "kube-requests")
	b.ReportMetric(float64(fake.CallCount("ec2", "DescribeInstances")), "DescribeInstances")
	b.ReportMetric(float64(fake.CallCount("sqs", "")), "sqs-calls")
	b.ReportMetric(float64(mem.HeapInuse)/(1<<20), "heap-MiB")
}
