// SPDX-License-Identifier: Apache-2.0

package controller_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/cloud/controlleronly"
	"lifeboat.dev/lifeboat/internal/controller"
	"lifeboat.dev/lifeboat/internal/daemon"
	"lifeboat.dev/lifeboat/internal/episode"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/test/sandbox"
	"lifeboat.dev/lifeboat/test/sandbox/fakeaws"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// BenchmarkNodeRepair measures what node repair costs a cluster of 1,000 nodes: first the
// load while every node is healthy (ENABLE_NODE_REPAIR on, 30 s: the Kubernetes and AWS
// requests it adds; it watches the informer the controller already has, so none are
// expected), then 10 nodes (3 pods each) whose KernelReady turns False past its duration:
// the requests until each is drained and marked Unhealthy, per repaired node.
//
//	go test -run '^$' -bench NodeRepair -benchtime 1x -timeout 30m ./internal/controller
func BenchmarkNodeRepair(b *testing.B) {
	for range b.N {
		repairBench(b, 1000, 10, 3)
	}
}

func repairBench(b *testing.B, nodeCount, sickCount, podsPerNode int) {
	b.StopTimer()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
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
	sick := nodes[:sickCount]
	for _, n := range nodes {
		fake.AddInstance(fakeaws.Instance{ID: episode.InstanceIDOf(n), PrivateDNSName: n.Name, Tags: benchTags, AutoScalingGroup: "workers"})
	}
	for _, n := range sick {
		for i := range podsPerNode {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: fmt.Sprintf("app-%d-%s", i, n.Name)},
				Spec: corev1.PodSpec{NodeName: n.Name, Containers: []corev1.Container{{Name: "c", Image: "img"}}}}
			if _, err := c.Client.CoreV1().Pods("shop").Create(ctx, p, metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	}
	awsCfg := benchAWSConfig(fake.URL())
	cfg := benchConfig(b, q.QueueURLs["lifeboat"], fake.URL(), "ENABLE_NODE_REPAIR", "true", "NODE_REPAIR_CONDITIONS", "KernelReady=False:1m",
		"NODE_REPAIR_MAX_PARALLEL", "0")
	m := metrics.New()
	base, err := c.UserConfig("lifeboat-bench", "system:masters")
	if err != nil {
		b.Fatal(err)
	}
	clients, err := daemon.KubeClients(base, cfg, m)
	if err != nil {
		b.Fatal(err)
	}
	ctl := controller.New(controller.Options{Config: cfg, Client: clients.Main, Queue: awssqs.NewFromConfig(awsCfg),
		EC2: controlleronly.NewAWSEC2(awsCfg), AutoScaling: cloud.NewAWSAutoScaling(awsCfg), Logger: benchLogger(b), Metrics: m,
		Handler: episode.Options{CordonClient: clients.Cordon}})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- ctl.Run(runCtx) }()
	defer func() { stop(); <-done }()

	time.Sleep(5 * time.Second) // the informers have listed
	idleStart, idleAWS := time.Now(), awsCalls(fake)
	time.Sleep(30 * time.Second)
	idleEnd := time.Now()
	idleAWSCalls := awsCalls(fake) - idleAWS

	b.StartTimer()
	start, startAWS := time.Now(), awsCalls(fake)
	since := metav1.NewTime(time.Now().Add(-time.Hour))
	for _, n := range sick {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			got, err := c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			got.Status.Conditions = append(got.Status.Conditions, corev1.NodeCondition{Type: "KernelReady", Status: corev1.ConditionFalse,
				Reason: "KernelBug", LastHeartbeatTime: metav1.Now(), LastTransitionTime: since})
			_, err = c.Client.CoreV1().Nodes().UpdateStatus(ctx, got, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 5*time.Minute, true, func(context.Context) (bool, error) {
		for _, n := range sick {
			if fake.UnhealthyMarks(episode.InstanceIDOf(n)) == 0 {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		b.Fatal("not every sick node was repaired")
	}
	end := time.Now()
	b.StopTimer()
	repairAWSCalls := awsCalls(fake) - startAWS

	events, err := c.AuditEvents(sandbox.ByUser("lifeboat-bench"))
	if err != nil {
		b.Fatal(err)
	}
	idle, repair, byKind := 0, 0, map[string]int{}
	for _, e := range events {
		switch {
		case e.ObjectRef == nil:
		case !e.StageTimestamp.Before(idleStart) && e.StageTimestamp.Before(idleEnd):
			idle++
		case !e.StageTimestamp.Before(start) && !e.StageTimestamp.After(end):
			repair++
			byKind[e.Verb+" "+e.ObjectRef.Resource+"/"+e.ObjectRef.Subresource]++
		}
	}
	b.Logf("repair requests by kind: %v; AWS calls while healthy: %d, during the repairs: %d", byKind, idleAWSCalls, repairAWSCalls)
	b.ReportMetric(end.Sub(start).Seconds(), "s-all-repaired")
	b.ReportMetric(float64(repair)/float64(sickCount), "kube-requests/repaired-node")
	b.ReportMetric(float64(repairAWSCalls)/float64(sickCount), "aws-calls/repaired-node")
	b.ReportMetric(float64(idle)*60/idleEnd.Sub(idleStart).Seconds(), "kube-requests/min-1000-healthy")
	b.ReportMetric(float64(idleAWSCalls)*60/idleEnd.Sub(idleStart).Seconds(), "aws-calls/min-1000-healthy")
}

// awsCalls counts the EC2 and Auto Scaling calls the fake answered (the queue's are not
// repair's).
func awsCalls(fake *fakeaws.Server) int {
	n := 0
	for _, c := range fake.Calls() {
		switch c.Action {
		case "ReceiveMessage", "DeleteMessage", "DeleteMessageBatch", "ChangeMessageVisibility", "ChangeMessageVisibilityBatch", "GetQueueAttributes", "GetQueueUrl":
		default:
			n++
		}
	}
	return n
}
