// SPDX-License-Identifier: Apache-2.0

package controller_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/cloud/controlleronly"
	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/controller"
	"lifeboat.dev/lifeboat/internal/record"
	"lifeboat.dev/lifeboat/test/sandbox"
	"lifeboat.dev/lifeboat/test/sandbox/fakeaws"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// TestHeartbeatsResumeAfterRestart: a termination hook whose drain is held up by a
// PodDisruptionBudget gets heartbeats; a controller stopped mid-drain and a new one started
// go on counting from the node's record; the hook is completed once, after which heartbeats
// stop.
func TestHeartbeatsResumeAfterRestart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	h := newHeldHook(t, ctx, "token-1")
	c, fake, queue, queueURL, awsCfg, node, lift := h.c, h.fake, h.queue, h.queueURL, h.awsCfg, h.node, h.lift

	// HEARTBEAT_INTERVAL=30 and HEARTBEAT_UNTIL=3600 count in units of 10 ms here: a heartbeat
	// every 0.3 s.
	cfg := sandboxtest.Config(t, config.ModeController, "ENABLE_SQS_TERMINATION_DRAINING", "true", "QUEUE_URL", queueURL,
		"AWS_REGION", "us-east-1", "AWS_ENDPOINT", fake.URL(), "SQS_MSG_VISIBILITY_TIMEOUT_SEC", "2",
		"HEARTBEAT_INTERVAL", "30", "HEARTBEAT_UNTIL", "3600")
	logs := &sandboxtest.LogBuffer{}
	start := func() (stop func()) {
		ctl := controller.New(controller.Options{Config: cfg, Client: kubernetes.NewForConfigOrDie(c.AdminConfig), Queue: queue, EC2: controlleronly.NewAWSEC2(awsCfg), AutoScaling: cloud.NewAWSAutoScaling(awsCfg), Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
		controller.SetHeartbeatUnit(ctl, 10*time.Millisecond)
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- ctl.Run(runCtx) }()
		return func() {
			cancel()
			if err := <-done; err != nil && runCtx.Err() == nil {
				t.Errorf("controller: %v", err)
			}
		}
	}
	defer func() {
		if t.Failed() {
			t.Logf("controller logs:\n%s", logs.String())
		}
	}()
	heartbeats := func() int { _, _, n, _ := fake.LifecycleAction("token-1"); return n }
	waitFor := func(what string, timeout time.Duration, cond func() bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) { return cond(), nil }); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	readRecord := func() record.Record {
		got, err := c.Client.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		r, err := record.Read(got)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	stop := start()
	waitFor("three heartbeats from the first controller", 30*time.Second, func() bool { return heartbeats() >= 3 })
	stop()
	before := readRecord()
	if before.Heartbeat == nil || before.Heartbeat.Count < 2 || before.Phase != record.PhaseDraining {
		t.Fatalf("record after the first controller: %+v, want phase draining and the heartbeats counted", before)
	}
	sentBefore := heartbeats()

	stop = start()
	defer func() { stop() }()
	waitFor("heartbeats from the second controller", 30*time.Second, func() bool { return heartbeats() >= sentBefore+2 })
	if r := readRecord(); r.Heartbeat == nil || r.Heartbeat.Count <= before.Heartbeat.Count {
		t.Errorf("the record's heartbeat count went from %d to %+v: the second controller started over", before.Heartbeat.Count, r.Heartbeat)
	}
	if !strings.Contains(logs.String(), "resuming lifecycle heartbeats") {
		t.Error("the second controller did not resume from the record")
	}
	if _, completed, _, _ := fake.LifecycleAction("token-1"); completed {
		t.Fatal("the lifecycle action was completed while its pod was still on the node")
	}

	lift()
	waitFor("the lifecycle action completed after the drain", 60*time.Second, func() bool {
		_, completed, _, _ := fake.LifecycleAction("token-1")
		return completed
	})
	final := heartbeats()
	time.Sleep(time.Second) // several intervals
	if n := heartbeats(); n != final {
		t.Errorf("%d heartbeats after the action was completed", n-final)
	}
	if n := fake.CallCount("autoscaling", "CompleteLifecycleAction"); n != 1 {
		t.Errorf("%d CompleteLifecycleAction calls, want 1", n)
	}
}

// heldHook is a termination hook whose drain a PodDisruptionBudget holds: node, in Auto
// Scaling group "workers" with hook "drain", runs one pod its budget protects (evictions are
// refused until lift, since no controller-manager computes the budget's status), and the
// hook's message is on the queue.
type heldHook struct {
	c        *sandbox.Cluster
	fake     *fakeaws.Server
	awsCfg   aws.Config
	queue    *awssqs.Client
	queueURL string
	node     *corev1.Node
	instance string
	lift     func()
}

func newHeldHook(t *testing.T, ctx context.Context, token string) heldHook {
	t.Helper()
	var h heldHook
	h.c, _ = sandboxtest.Shared(t, sandbox.ClusterOptions{})
	q := sandboxtest.SQS(t, sandbox.SQSOptions{Queues: []string{"lifeboat"}, VisibilityTimeout: 2})
	h.fake = sandboxtest.FakeAWS(t, q.Endpoint)
	h.node, h.instance = sandboxtest.TerminatingNode(t, ctx, h.c, h.fake, map[string]string{"aws-node-termination-handler/managed": ""}, token)
	if err := h.c.EnsureNamespace(ctx, "db"); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "primary", Labels: map[string]string{"app": "db"}},
		Spec: corev1.PodSpec{NodeName: h.node.Name, Containers: []corev1.Container{{Name: "c", Image: "img"}}}}
	if _, err := h.c.Client.CoreV1().Pods("db").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.lift = sandboxtest.BlockEvictions(t, ctx, h.c, "db", map[string]string{"app": "db"})
	h.awsCfg = sandboxtest.AWSConfig(h.fake.URL())
	h.queue = awssqs.NewFromConfig(h.awsCfg)
	h.queueURL = q.QueueURLs["lifeboat"]
	if _, err := h.queue.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: &h.queueURL, MessageBody: aws.String(hookMessage(h.instance, token))}); err != nil {
		t.Fatal(err)
	}
	return h
}
