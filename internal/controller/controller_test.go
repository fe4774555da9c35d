// SPDX-License-Identifier: Apache-2.0

package controller_test

import (
	"context"
	"fmt"
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
	"lifeboat.dev/lifeboat/internal/episode"
	"lifeboat.dev/lifeboat/internal/record"
	"lifeboat.dev/lifeboat/test/sandbox"
	"lifeboat.dev/lifeboat/test/sandbox/fakeaws"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

const foreign = "i-0f0f0f0f0f0f0f0f0"

func spotMessage(instance string) string {
	return fmt.Sprintf(`{"version":"0","id":"e-%s","detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","account":"000000000000","time":"%s","region":"us-east-1","resources":[],"detail":{"instance-id":"%s","instance-action":"terminate"}}`,
		instance, time.Now().UTC().Format(time.RFC3339), instance)
}

func hookMessage(instance, token string) string {
	return lifecycleMessage(instance, token, "drain", "autoscaling:EC2_INSTANCE_TERMINATING")
}

func lifecycleMessage(instance, token, hook, transition string) string {
	return fmt.Sprintf(`{"Origin":"AutoScalingGroup","Destination":"EC2","Service":"AWS Auto Scaling","Time":"%s","AccountId":"000000000000","RequestId":"r-%s","LifecycleActionToken":"%s","AutoScalingGroupName":"workers","LifecycleHookName":"%s","EC2InstanceId":"%s","LifecycleTransition":"%s"}`,
		time.Now().UTC().Format(time.RFC3339), token, token, hook, instance, transition)
}

func TestControllerEndToEnd(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, _ := sandboxtest.Shared(t, sandbox.ClusterOptions{AuditLog: true})
	q := sandboxtest.SQS(t, sandbox.SQSOptions{Queues: []string{"lifeboat"}, VisibilityTimeout: 5})
	fake := sandboxtest.FakeAWS(t, q.Endpoint)
	nodes, err := c.AddNodes(ctx, sandbox.NodeSpec{Index: 1}, sandbox.NodeSpec{Index: 2}, sandbox.NodeSpec{Index: 3})
	if err != nil {
		t.Fatal(err)
	}
	ours := map[string]string{"aws-node-termination-handler/managed": "", "kubernetes.io/cluster/sandbox": "owned"}
	for _, n := range nodes {
		fake.AddInstance(fakeaws.Instance{ID: episode.InstanceIDOf(n), PrivateDNSName: n.Name, AutoScalingGroup: "workers", Tags: ours})
	}
	// Another cluster's instance: in EC2, with a lifecycle action pending, but no node here.
	fake.AddInstance(fakeaws.Instance{ID: foreign, PrivateDNSName: "ip-10-9-0-1.ec2.internal", AutoScalingGroup: "workers",
		Tags: map[string]string{"aws-node-termination-handler/managed": "", "kubernetes.io/cluster/other": "owned"}})
	fake.AddLifecycleHook(fakeaws.LifecycleHook{Name: "drain", AutoScalingGroup: "workers"})
	// An instance being launched: its node joins only later.
	launching := sandbox.NodeSpec{Index: 4}
	launchingID := strings.TrimPrefix(launching.ProviderID(), "aws:///us-east-1a/")
	fake.AddInstance(fakeaws.Instance{ID: launchingID, PrivateDNSName: launching.Node().Name, AutoScalingGroup: "workers", Tags: ours})
	fake.AddLifecycleHook(fakeaws.LifecycleHook{Name: "launch", AutoScalingGroup: "workers", Transition: "autoscaling:EC2_INSTANCE_LAUNCHING"})
	fake.BeginLifecycleAction("launch", "workers", launchingID, "token-launch")
	spotNode, hookNode, quiet := nodes[0], nodes[1], nodes[2]
	fake.BeginLifecycleAction("drain", "workers", episode.InstanceIDOf(hookNode), "token-ours")
	fake.BeginLifecycleAction("drain", "workers", foreign, "token-foreign")
	if err := c.EnsureNamespace(ctx, "shop"); err != nil {
		t.Fatal(err)
	}
	for _, n := range []*corev1.Node{spotNode, hookNode, quiet} {
		for i := range 3 {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: fmt.Sprintf("%s-%d", n.Name[:11], i)},
				Spec: corev1.PodSpec{NodeName: n.Name, Containers: []corev1.Container{{Name: "c", Image: "img"}}}}
			if _, err := c.Client.CoreV1().Pods("shop").Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}

	awsCfg := sandboxtest.AWSConfig(fake.URL())
	queue := awssqs.NewFromConfig(awsCfg)
	queueURL := q.QueueURLs["lifeboat"]
	for _, body := range []string{spotMessage(episode.InstanceIDOf(spotNode)), hookMessage(episode.InstanceIDOf(hookNode), "token-ours"),
		hookMessage(foreign, "token-foreign"), hookMessage(episode.InstanceIDOf(hookNode), "token-ours"), /* a duplicate */
		lifecycleMessage(launchingID, "token-launch", "launch", "autoscaling:EC2_INSTANCE_LAUNCHING")} {
		if _, err := queue.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: &queueURL, MessageBody: aws.String(body)}); err != nil {
			t.Fatal(err)
		}
	}

	cfg := sandboxtest.Config(t, config.ModeController, "ENABLE_SQS_TERMINATION_DRAINING", "true", "QUEUE_URL", queueURL, "AWS_REGION", "us-east-1",
		"AWS_ENDPOINT", fake.URL(), "CLUSTER_NAME", "sandbox", "TAINT_NODE", "true", "SQS_MSG_VISIBILITY_TIMEOUT_SEC", "5")
	rc, err := c.UserConfig("lifeboat-controller", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	logs := &sandboxtest.LogBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, nil))
	ctl := controller.New(controller.Options{Config: cfg, Client: kubernetes.NewForConfigOrDie(rc), Queue: queue, EC2: controlleronly.NewAWSEC2(awsCfg), AutoScaling: cloud.NewAWSAutoScaling(awsCfg), Logger: logger})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- ctl.RunWithLeaderElection(runCtx) }()
	defer func() {
		stop()
		<-done
		if t.Failed() {
			t.Logf("controller log:\n%s", logs.String())
		}
	}()

	drained := func(n *corev1.Node) func(context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			got, err := c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			r, _ := record.Read(got)
			return r.Phase == record.PhaseDrained, nil
		}
	}
	for _, n := range []*corev1.Node{spotNode, hookNode} {
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 45*time.Second, true, drained(n)); err != nil {
			t.Fatalf("node %s never drained", n.Name)
		}
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		_, completed, _, _ := fake.LifecycleAction("token-ours")
		return completed, nil
	})
	if err != nil {
		t.Fatal("our lifecycle action was never completed")
	}
	if _, completed, _, _ := fake.LifecycleAction("token-launch"); completed {
		t.Error("the launch hook was completed before its node joined")
	}
	if _, err := c.AddNodes(ctx, launching); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		_, completed, _, _ := fake.LifecycleAction("token-launch")
		return completed, nil
	})
	if err != nil {
		t.Fatal("the launch hook was not completed once its node was Ready")
	}
	time.Sleep(6 * time.Second) // past the visibility timeout: duplicates and redeliveries are processed too

	if _, completed, _, _ := fake.LifecycleAction("token-foreign"); completed {
		t.Error("the foreign instance's lifecycle action was completed")
	}
	completions := 0
	for _, call := range fake.Calls() {
		if call.Action == "CompleteLifecycleAction" {
			// By instance id: the token is not kept on the Node.
			if tok := call.Params.Get("LifecycleActionToken"); tok != "" {
				t.Errorf("CompleteLifecycleAction sent the token %q", tok)
			}
			if id := call.Params.Get("InstanceId"); id == launchingID {
				continue
			} else if completions++; id != episode.InstanceIDOf(hookNode) {
				t.Errorf("CompleteLifecycleAction for %q", id)
			}
		}
	}
	if completions != 1 {
		t.Errorf("%d CompleteLifecycleAction calls for one lifecycle action (sent twice), want 1", completions)
	}
	if got, _ := c.Client.CoreV1().Nodes().Get(ctx, quiet.Name, metav1.GetOptions{}); got.Spec.Unschedulable || len(got.Spec.Taints) != 0 {
		t.Errorf("a node without a notice was touched: %+v", got.Spec)
	}
	evictions := map[string]int{}
	events, _ := c.AuditEvents(sandbox.ByUser("lifeboat-controller"))
	for _, e := range events {
		if e.ObjectRef != nil && e.ObjectRef.Subresource == "eviction" {
			evictions[e.ObjectRef.Name]++
		}
	}
	if len(evictions) != 6 {
		t.Errorf("evicted %v, want the 6 pods of the two nodes", evictions)
	}
	for pod, n := range evictions {
		if n != 1 {
			t.Errorf("pod %s evicted %d times", pod, n)
		}
	}
	if !strings.Contains(logs.String(), "notice is not for this cluster") {
		t.Error("no log line refusing the foreign notice")
	}
	t.Logf("CompleteLifecycleAction calls: %d; DescribeInstances calls: %d", completions, fake.CallCount("ec2", "DescribeInstances"))
}
