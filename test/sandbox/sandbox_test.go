// SPDX-License-Identifier: Apache-2.0

package sandbox_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"lifeboat.dev/lifeboat/test/sandbox"
	"lifeboat.dev/lifeboat/test/sandbox/fakeaws"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// Nodes and pods on the real API server, made Ready and Running by kwok; RBAC is enforced;
// the audit log counts requests per user.
func TestClusterWithKwokNodesAndPods(t *testing.T) {
	ctx := testContext(t)
	c := sandboxtest.Cluster(t, sandbox.ClusterOptions{AuditLog: true})

	specs := []sandbox.NodeSpec{{Index: 1}, {Index: 2}, {Index: 3, Zone: "us-east-1b"}}
	nodes, err := c.AddNodes(ctx, specs...)
	if err != nil {
		t.Fatal(err)
	}
	ips := map[string]bool{}
	for i, n := range nodes {
		if want := specs[i].ProviderID(); n.Spec.ProviderID != want {
			t.Errorf("node %s providerID %q, want %q", n.Name, n.Spec.ProviderID, want)
		}
		if !strings.HasPrefix(n.Spec.ProviderID, "aws:///us-east-1") || !strings.Contains(n.Spec.ProviderID, "/i-") {
			t.Errorf("providerID %q is not aws:///<az>/<instance-id>", n.Spec.ProviderID)
		}
		if !sandbox.IsNodeReady(n) {
			t.Errorf("node %s not Ready", n.Name)
		}
		if len(n.Spec.Taints) != 0 {
			t.Errorf("node %s has taints %v, want none once Ready", n.Name, n.Spec.Taints)
		}
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				ips[a.Address] = true
			}
		}
	}
	if len(ips) != 3 {
		t.Errorf("nodes share addresses: %v", ips)
	}

	if err := c.EnsureNamespace(ctx, "work"); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "web-" + string(rune('a'+i)), Namespace: "work"},
			Spec: corev1.PodSpec{
				NodeName:   nodes[0].Name,
				Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}},
			},
		}
		if _, err := c.Client.CoreV1().Pods("work").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		pods, err := c.Client.CoreV1().Pods("work").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + nodes[0].Name})
		if err != nil {
			return false, err
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == 5, nil
	})
	if err != nil {
		t.Fatalf("pods never all Running on %s: %v", nodes[0].Name, err)
	}

	// A user with no role binding is refused: RBAC is on, so tests can prove least privilege.
	rc, err := c.UserConfig("nobody")
	if err != nil {
		t.Fatal(err)
	}
	_, err = kubernetes.NewForConfigOrDie(rc).CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("unprivileged node list: got %v, want Forbidden", err)
	}

	events, err := c.AuditEvents(sandbox.ByUser("nobody"))
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 1 || events[0].Verb != "list" || events[0].ObjectRef.Resource != "nodes" || events[0].ResponseStatus.Code != 403 {
		t.Errorf("audit events for nobody: %+v, want one forbidden node list", events)
	}

	// A restarted API server answers on the same URL, to the same clients, with the same data;
	// its audit log goes on in the same file.
	url := c.APIServerURL
	if err := c.RestartAPIServer(ctx, 500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if c.APIServerURL != url {
		t.Errorf("URL changed across the restart: %s, then %s", url, c.APIServerURL)
	}
	pods, err := c.Client.CoreV1().Pods("work").List(ctx, metav1.ListOptions{})
	if err != nil || len(pods.Items) != 5 {
		t.Fatalf("after the restart: %v pods listed, err %v; want the 5 from before", len(pods.Items), err)
	}
	if _, err = kubernetes.NewForConfigOrDie(rc).CoreV1().Nodes().List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("unprivileged node list after the restart: got %v, want Forbidden", err)
	}
	if events, err := c.AuditEvents(sandbox.ByUser("nobody")); err != nil || len(events) != 2 {
		t.Errorf("audit events for nobody after the restart: %d (err %v), want 2", len(events), err)
	}
}

// An IMDSv2 spot interruption notice read with the SDK's IMDS client.
func TestIMDSSpotNotice(t *testing.T) {
	ctx := testContext(t)
	const instanceID = "i-0123456789abcdef0"
	noticeTime := time.Now().Add(2 * time.Minute).UTC().Truncate(time.Second).Format(time.RFC3339)
	m := sandboxtest.IMDS(t, sandbox.IMDSOptions{
		InstanceID: instanceID,
		Hostname:   "ip-10-0-0-1.ec2.internal",
		Args:       []string{"spot", "-a", "terminate", "-t", noticeTime},
	})

	// ClientEnabled overrides AWS_EC2_METADATA_DISABLED, which tests set to keep the SDK's
	// credential chain away from the real metadata address.
	client := imds.New(imds.Options{Endpoint: m.URL, EnableFallback: aws.FalseTernary, ClientEnableState: imds.ClientEnabled})
	out, err := client.GetMetadata(ctx, &imds.GetMetadataInput{Path: "spot/instance-action"})
	if err != nil {
		t.Fatalf("spot/instance-action: %v", err)
	}
	var notice struct{ Action, Time string }
	if err := json.NewDecoder(out.Content).Decode(&notice); err != nil {
		t.Fatal(err)
	}
	out.Content.Close()
	if notice.Action != "terminate" || notice.Time != noticeTime {
		t.Errorf("notice %+v, want terminate at %s", notice, noticeTime)
	}

	id, err := client.GetMetadata(ctx, &imds.GetMetadataInput{Path: "instance-id"})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(id.Content)
	if string(b) != instanceID {
		t.Errorf("instance-id %q, want %q", b, instanceID)
	}

	// IMDSv1 (no token) is refused: the mock enforces v2 as real instances can.
	resp, err := http.Get(m.URL + "/latest/meta-data/instance-id")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("IMDSv1 request: %s, want 401", resp.Status)
	}
}

// A message through the SQS server, reached through the fake AWS endpoint exactly as an
// NTH-style single AWS_ENDPOINT would route it; then EC2 and Auto Scaling calls on the same URL.
func TestSQSAndFakeAWSOnOneEndpoint(t *testing.T) {
	ctx := testContext(t)
	q := sandboxtest.SQS(t, sandbox.SQSOptions{Queues: []string{"lifeboat"}, VisibilityTimeout: 1})
	fake := sandboxtest.FakeAWS(t, q.Endpoint)
	cfg := sandboxtest.AWSConfig(fake.URL())

	sqsClient := sqs.NewFromConfig(cfg)
	queueURL := q.QueueURLs["lifeboat"]
	body := `{"version":"0","id":"e-1","detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","detail":{"instance-id":"i-1"}}`
	sent, err := sqsClient.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &queueURL, MessageBody: &body})
	if err != nil {
		t.Fatalf("send: %v", err)
	}
	got, err := sqsClient.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &queueURL, MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
	if err != nil {
		t.Fatalf("receive: %v", err)
	}
	if len(got.Messages) != 1 || *got.Messages[0].Body != body || *got.Messages[0].MessageId != *sent.MessageId {
		t.Fatalf("received %+v, want the sent message %s", got.Messages, *sent.MessageId)
	}
	if _, err := sqsClient.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &queueURL, ReceiptHandle: got.Messages[0].ReceiptHandle}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	time.Sleep(1200 * time.Millisecond) // past the visibility timeout: a deleted message must not return
	again, err := sqsClient.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &queueURL, MaxNumberOfMessages: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Messages) != 0 {
		t.Errorf("deleted message delivered again: %+v", again.Messages)
	}
	if n := fake.CallCount("sqs", ""); n < 4 {
		t.Errorf("fake recorded %d SQS calls, want the 4 made through it", n)
	}

	fake.AddInstance(fakeaws.Instance{ID: "i-1", PrivateDNSName: "ip-10-0-0-1.ec2.internal", AvailabilityZone: "us-east-1a",
		AutoScalingGroup: "workers", Tags: map[string]string{"aws-node-termination-handler/managed": "", "kubernetes.io/cluster/sandbox": "owned"}})
	fake.AddLifecycleHook(fakeaws.LifecycleHook{Name: "drain", AutoScalingGroup: "workers", Transition: "autoscaling:EC2_INSTANCE_TERMINATING"})
	fake.BeginLifecycleAction("drain", "workers", "i-1", "token-1")

	desc, err := ec2.NewFromConfig(cfg).DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{"i-1"}})
	if err != nil {
		t.Fatalf("DescribeInstances: %v", err)
	}
	inst := desc.Reservations[0].Instances[0]
	tags := map[string]string{}
	for _, tg := range inst.Tags {
		tags[*tg.Key] = *tg.Value
	}
	if *inst.PrivateDnsName != "ip-10-0-0-1.ec2.internal" || tags["kubernetes.io/cluster/sandbox"] != "owned" || inst.State.Name != ec2types.InstanceStateNameRunning {
		t.Errorf("instance %+v tags %v", inst, tags)
	}

	asg := autoscaling.NewFromConfig(cfg)
	if _, err := asg.RecordLifecycleActionHeartbeat(ctx, &autoscaling.RecordLifecycleActionHeartbeatInput{
		AutoScalingGroupName: aws.String("workers"), LifecycleHookName: aws.String("drain"), LifecycleActionToken: aws.String("token-1"),
	}); err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
	complete := &autoscaling.CompleteLifecycleActionInput{
		AutoScalingGroupName: aws.String("workers"), LifecycleHookName: aws.String("drain"),
		LifecycleActionToken: aws.String("token-1"), LifecycleActionResult: aws.String("CONTINUE"),
	}
	if _, err := asg.CompleteLifecycleAction(ctx, complete); err != nil {
		t.Fatalf("complete: %v", err)
	}
	if _, err := asg.CompleteLifecycleAction(ctx, complete); err == nil {
		t.Error("second completion accepted; AWS refuses it")
	}
	result, completed, heartbeats, ok := fake.LifecycleAction("token-1")
	if !ok || !completed || result != "CONTINUE" || heartbeats != 1 {
		t.Errorf("lifecycle action: result %q completed %v heartbeats %d", result, completed, heartbeats)
	}
	if n := fake.CallCount("autoscaling", "CompleteLifecycleAction"); n != 2 {
		t.Errorf("recorded %d CompleteLifecycleAction calls, want 2", n)
	}
}

// With the controller manager and scheduler, a Deployment's pods are created, scheduled onto
// kwok nodes and run, as the Helm upgrade tests will need.
func TestFullControlPlaneRunsADeployment(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the whole control plane")
	}
	ctx := testContext(t)
	c := sandboxtest.Cluster(t, sandbox.ClusterOptions{ControllerManager: true, Scheduler: true})
	if _, err := c.AddNodes(ctx, sandbox.NodeSpec{Index: 1}, sandbox.NodeSpec{Index: 2}); err != nil {
		t.Fatal(err)
	}
	replicas := int32(3)
	labels := map[string]string{"app": "web"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}},
			},
		},
	}
	if _, err := c.Client.AppsV1().Deployments("default").Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 45*time.Second, true, func(ctx context.Context) (bool, error) {
		d, err := c.Client.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return d.Status.AvailableReplicas == replicas, nil
	})
	if err != nil {
		t.Fatalf("deployment never available: %v", err)
	}
	pods, err := c.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" || p.Status.Phase != corev1.PodRunning {
			t.Errorf("pod %s on %q in phase %s", p.Name, p.Spec.NodeName, p.Status.Phase)
		}
	}
}
