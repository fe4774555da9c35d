// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/test/sandbox"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// Two controller replicas: the leader is stopped in the middle of a drain that a
// PodDisruptionBudget holds up — killed (SIGKILL), or asked to stop (SIGTERM: it exits 0
// within 10 s and releases the Lease) — and the standby takes the Lease, the message comes
// back to it, and it finishes. The lifecycle action is completed once, the message deleted
// once, and no pod is evicted twice.
func TestControllerFailover(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the binary and starts the sandbox")
	}
	bin := filepath.Join(t.TempDir(), "lifeboat")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	for _, sig := range []os.Signal{os.Kill, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) { t.Parallel(); failover(t, bin, sig) }) // each on a cluster of its own
	}
}

func failover(t *testing.T, bin string, stopSignal os.Signal) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, _ := sandboxtest.Shared(t, sandbox.ClusterOptions{AuditLog: true})
	q := sandboxtest.SQS(t, sandbox.SQSOptions{Queues: []string{"lifeboat"}, VisibilityTimeout: 5})
	fake := sandboxtest.FakeAWS(t, q.Endpoint)
	node, instance := sandboxtest.TerminatingNode(t, ctx, c, fake,
		map[string]string{"aws-node-termination-handler/managed": "", "kubernetes.io/cluster/sandbox": "owned"}, "token-1")
	if err := c.EnsureNamespace(ctx, "shop"); err != nil {
		t.Fatal(err)
	}
	for i, app := range []string{"web", "web", "db"} {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: fmt.Sprintf("%s-%d", app, i), Labels: map[string]string{"app": app}},
			Spec: corev1.PodSpec{NodeName: node.Name, Containers: []corev1.Container{{Name: "c", Image: "img"}}}}
		if _, err := c.Client.CoreV1().Pods("shop").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	lift := sandboxtest.BlockEvictions(t, ctx, c, "shop", map[string]string{"app": "db"})
	queueURL := q.QueueURLs["lifeboat"]
	// Exactly the chart's RBAC: the replicas drain, complete and hold the Lease with it.
	grantShippedRBAC(t, ctx, c, "lifeboat", "default")
	rc, err := c.UserConfig("lifeboat")
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := c.WriteKubeconfig(kubeconfig, rc); err != nil {
		t.Fatal(err)
	}
	logs := map[string]*sandboxtest.LogBuffer{}
	readyURL := map[string]string{}
	start := func(name string) *exec.Cmd {
		probes := sandboxtest.FreePort(t) // probes are on by default: each replica needs its own port here
		readyURL[name] = fmt.Sprintf("http://127.0.0.1:%d/readyz", probes)
		cmd := exec.Command(bin, "controller")
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "POD_NAME="+name, "NAMESPACE=default", "NODE_NAME=elsewhere",
			fmt.Sprintf("PROBES_SERVER_PORT=%d", probes), "PROBES_SERVER_BIND_ADDRESS=127.0.0.1",
			"QUEUE_URL="+queueURL, "AWS_REGION=us-east-1", "AWS_ENDPOINT="+fake.URL(), "CLUSTER_NAME=sandbox",
			"SQS_MSG_VISIBILITY_TIMEOUT_SEC=5", "AWS_EC2_METADATA_DISABLED=true", "AWS_ACCESS_KEY_ID=AKIDSANDBOX",
			"AWS_SECRET_ACCESS_KEY=sandbox-secret", "LOG_LEVEL=debug")
		logs[name] = &sandboxtest.LogBuffer{}
		cmd.Stdout, cmd.Stderr = logs[name], logs[name]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	defer func() {
		if t.Failed() {
			for name, l := range logs {
				t.Logf("%s log:\n%s", name, l.String())
			}
		}
	}()
	holder := func() string {
		l, err := c.Client.CoordinationV1().Leases("default").Get(ctx, config.DefaultLeaseName, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	waitFor := func(what string, timeout time.Duration, cond func() bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) { return cond(), nil }); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}

	leader := start("replica-a")
	waitFor("replica-a leads", 60*time.Second, func() bool { return holder() == "replica-a" })
	start("replica-b")
	// Both replicas are Ready: the leader consumes the queue, the standby can take over.
	for _, name := range []string{"replica-a", "replica-b"} {
		waitFor(name+" is ready", 30*time.Second, func() bool {
			resp, err := http.Get(readyURL[name])
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		})
	}
	queue := awssqs.NewFromConfig(sandboxtest.AWSConfig(fake.URL()))
	body := fmt.Sprintf(`{"Origin":"AutoScalingGroup","Destination":"EC2","Service":"AWS Auto Scaling","Time":"%s","AccountId":"000000000000","RequestId":"r-1","LifecycleActionToken":"token-1","AutoScalingGroupName":"workers","LifecycleHookName":"drain","EC2InstanceId":"%s","LifecycleTransition":"autoscaling:EC2_INSTANCE_TERMINATING"}`,
		time.Now().UTC().Format(time.RFC3339), instance)
	if _, err := queue.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: &queueURL, MessageBody: aws.String(body)}); err != nil {
		t.Fatal(err)
	}
	podGone := func(name string) bool {
		_, err := c.Client.CoreV1().Pods("shop").Get(ctx, name, metav1.GetOptions{})
		return err != nil
	}
	waitFor("the leader evicts the unprotected pods", 60*time.Second, func() bool { return podGone("web-0") && podGone("web-1") })

	stopped := time.Now()
	if err := leader.Process.Signal(stopSignal); err != nil { // SIGKILL: no Lease release, no cleanup
		t.Fatal(err)
	}
	err = leader.Wait()
	if stopSignal == syscall.SIGTERM {
		if err != nil || time.Since(stopped) > 10*time.Second {
			t.Errorf("after SIGTERM the leader exited with %v after %s; want 0 within 10 s", err, time.Since(stopped).Round(time.Millisecond))
		}
		// Released, the Lease goes to the standby at its next try (every 2 s), not after the
		// 15 s a dead leader's Lease takes to expire.
		waitFor("replica-b takes the released Lease", 10*time.Second, func() bool { return holder() == "replica-b" })
	}
	waitFor("replica-b takes the Lease", 60*time.Second, func() bool { return holder() == "replica-b" })
	if _, completed, _, _ := fake.LifecycleAction("token-1"); completed {
		t.Fatal("the lifecycle action was completed while a pod was still on the node")
	}
	lift()
	waitFor("replica-b completes the lifecycle action", 90*time.Second, func() bool {
		_, completed, _, _ := fake.LifecycleAction("token-1")
		return completed && fake.CallCount("sqs", "DeleteMessage") > 0
	})
	time.Sleep(6 * time.Second) // past the visibility timeout: a second delivery would be handled by now

	if n := fake.CallCount("autoscaling", "CompleteLifecycleAction"); n != 1 {
		t.Errorf("%d CompleteLifecycleAction calls, want 1", n)
	}
	if n := fake.CallCount("sqs", "DeleteMessage"); n != 1 {
		t.Errorf("%d DeleteMessage calls, want 1", n)
	}
	audit, err := c.AuditEvents(sandbox.ByUser("lifeboat"))
	if err != nil {
		t.Fatal(err)
	}
	accepted := map[string]int{}
	for _, e := range audit {
		if e.ObjectRef != nil && e.ObjectRef.Subresource == "eviction" && e.ResponseStatus != nil && e.ResponseStatus.Code < 300 {
			accepted[e.ObjectRef.Name]++
		}
	}
	for _, pod := range []string{"web-0", "web-1", "db-2"} {
		if accepted[pod] != 1 {
			t.Errorf("pod %s: %d accepted evictions, want 1 (all: %v)", pod, accepted[pod], accepted)
		}
	}
}
