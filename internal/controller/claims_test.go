// SPDX-License-Identifier: Apache-2.0

package controller_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/events"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/ownership"
	"lifeboat.dev/lifeboat/internal/record"
	"lifeboat.dev/lifeboat/test/sandbox"
	"lifeboat.dev/lifeboat/test/sandbox/fakeaws"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// TestForgedProviderIDClaim is the attack of a stolen kubelet credential on a node that
// registered without a providerID: it sets its own Node's providerID (the API server allows
// it once) to another node's instance, then that instance's termination hook arrives. The
// victim either names its instance too (as on EKS) or has no providerID at all (nodes matched
// by private DNS name). Either way the victim is drained and its action completed once, after
// its pods are gone; the claimant is never cordoned, and a Warning Event on it names the
// refused claim.
func TestForgedProviderIDClaim(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name                string
		victimHasProviderID bool
		useProviderID       string
	}{
		{"victim names its instance too", true, "true"},
		{"victim has no providerID", false, "false"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forgedClaim(t, tc.victimHasProviderID, tc.useProviderID)
		})
	}
}

func forgedClaim(t *testing.T, victimHasProviderID bool, useProviderID string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const token = "0b7c2d4e-6f8a-4b1c-9d3e-5f7a9b1c3d5e"
	c, _ := sandboxtest.Shared(t, sandbox.ClusterOptions{})
	q := sandboxtest.SQS(t, sandbox.SQSOptions{Queues: []string{"lifeboat"}, VisibilityTimeout: 2})
	fake := sandboxtest.FakeAWS(t, q.Endpoint)
	victimSpec := sandbox.NodeSpec{Index: 1, NoProviderID: !victimHasProviderID}
	added, err := c.AddNodes(ctx, victimSpec, sandbox.NodeSpec{Index: 2, NoProviderID: true})
	if err != nil {
		t.Fatal(err)
	}
	victim, claimant := added[0], added[1]
	victimInstance := ownership.InstanceIDFromProviderID(victimSpec.ProviderID())
	claimantInstance := ownership.InstanceIDFromProviderID(sandbox.NodeSpec{Index: 2}.ProviderID())
	tags := map[string]string{"aws-node-termination-handler/managed": ""}
	fake.AddInstance(fakeaws.Instance{ID: victimInstance, PrivateDNSName: victim.Name, PrivateIP: "10.0.0.1", AutoScalingGroup: "workers", Tags: tags})
	fake.AddInstance(fakeaws.Instance{ID: claimantInstance, PrivateDNSName: claimant.Name, PrivateIP: "10.0.0.2", AutoScalingGroup: "workers", Tags: tags})
	fake.AddLifecycleHook(fakeaws.LifecycleHook{Name: "drain", AutoScalingGroup: "workers"})
	if err := c.EnsureNamespace(ctx, "shop"); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: fmt.Sprintf("web-%d", i)},
			Spec: corev1.PodSpec{NodeName: victim.Name, Containers: []corev1.Container{{Name: "c", Image: "img"}}}}
		if _, err := c.Client.CoreV1().Pods("shop").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// The claimant's kubelet credential names the victim's instance in its own Node.
	rc, err := c.UserConfig("system:node:"+claimant.Name, "system:nodes")
	if err != nil {
		t.Fatal(err)
	}
	forged := "aws:///us-east-1a/" + victimInstance
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"providerID": forged}})
	if _, err := kubernetes.NewForConfigOrDie(rc).CoreV1().Nodes().Patch(ctx, claimant.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("the claimant's node credential could not set its own providerID: %v", err)
	}

	fake.BeginLifecycleAction("drain", "workers", victimInstance, token)
	awsCfg := sandboxtest.AWSConfig(fake.URL())
	queue := awssqs.NewFromConfig(awsCfg)
	queueURL := q.QueueURLs["lifeboat"]
	if _, err := queue.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: &queueURL, MessageBody: aws.String(hookMessage(victimInstance, token))}); err != nil {
		t.Fatal(err)
	}
	cfg := sandboxtest.Config(t, config.ModeController, "ENABLE_SQS_TERMINATION_DRAINING", "true", "QUEUE_URL", queueURL,
		"AWS_REGION", "us-east-1", "AWS_ENDPOINT", fake.URL(), "SQS_MSG_VISIBILITY_TIMEOUT_SEC", "2",
		"USE_PROVIDER_ID", useProviderID, "EMIT_KUBERNETES_EVENTS", "true")
	logs := &sandboxtest.LogBuffer{}
	m := metrics.New()
	startController(t, ctx, c, awsCfg, queue, cfg, "lifeboat", m, logs, nil)

	// Completed means drained: at the moment the action is seen completed, no pod is left.
	var podsAtCompletion int
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		if _, completed, _, _ := fake.LifecycleAction(token); !completed {
			return false, nil
		}
		pods, err := c.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", victim.Name).String()})
		if err != nil {
			return false, err
		}
		podsAtCompletion = len(pods.Items)
		return true, nil
	}); err != nil {
		t.Fatalf("the victim's lifecycle action was never completed: %v", err)
	}
	if podsAtCompletion != 0 {
		t.Errorf("the victim's action was completed with %d of its pods still on it", podsAtCompletion)
	}
	if result, _, _, _ := fake.LifecycleAction(token); result != "CONTINUE" {
		t.Errorf("completed with %q, want CONTINUE", result)
	}
	if got := fake.CallCount("autoscaling", "CompleteLifecycleAction"); got != 1 {
		t.Errorf("CompleteLifecycleAction called %d times, want 1", got)
	}
	v, err := c.Client.CoreV1().Nodes().Get(ctx, victim.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !v.Spec.Unschedulable {
		t.Error("the victim was not cordoned")
	}

	cl, err := c.Client.CoreV1().Nodes().Get(ctx, claimant.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cl.Spec.Unschedulable {
		t.Error("the claimant was cordoned")
	}
	if raw, ok := cl.Annotations[record.Annotation]; ok {
		t.Errorf("the claimant has a record: %s", raw)
	}
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		return claimEventNames(t, ctx, c, claimant.Name, victim.Name), nil
	}); err != nil {
		t.Errorf("no Warning Event %s on the claimant naming both nodes", events.ReasonClaimRefused)
	}
	if got := m.Value("lifeboat_instance_claims_refused_total", "check", "ec2"); got < 1 {
		t.Errorf("lifeboat_instance_claims_refused_total{check=ec2} = %v, want at least 1", got)
	}
	if log := logs.String(); !strings.Contains(log, "claimant="+claimant.Name) || !strings.Contains(log, "holder="+victim.Name) {
		t.Error("no log line names the claimant and the node EC2 describes")
	}
}

// claimEventNames reports whether the claimant has a Warning InstanceClaimRefused Event that
// names it and the victim.
func claimEventNames(t *testing.T, ctx context.Context, c *sandbox.Cluster, claimant, victim string) bool {
	t.Helper()
	list, err := c.Client.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("involvedObject.name", claimant).String()})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range list.Items {
		if e.Reason == events.ReasonClaimRefused && e.Type == corev1.EventTypeWarning &&
			strings.Contains(e.Message, claimant) && strings.Contains(e.Message, victim) {
			return true
		}
	}
	return false
}
