// SPDX-License-Identifier: Apache-2.0

package controller_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/record"
	"lifeboat.dev/lifeboat/test/sandbox"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// TestDryRunTrialBesideNTH is the trial the migration guide describes: NTH keeps its queue,
// and a dry-run controller reads a queue of its own, fed the same notices (a second target of
// the same rules). The dry run reports each notice (a dry-run counter, Events on the Node
// marked as dry run), changes nothing on the Node, and leaves NTH's queue alone: NTH then
// receives every message at once, as if Lifeboat were not there.
func TestDryRunTrialBesideNTH(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := newOperateWorld(t, ctx, sandbox.ClusterOptions{})
	created, err := w.queue.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String("nth")})
	if err != nil {
		t.Fatal(err)
	}
	nthQueue := created.QueueUrl
	notices := []string{spotMessage(w.instance), hookMessage(w.instance, "token-1")}
	for _, b := range notices {
		// EventBridge delivers each event to every target of its rule.
		for _, q := range []*string{nthQueue, &w.queueURL} {
			if _, err := w.queue.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: q, MessageBody: aws.String(b)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	cfg := sandboxtest.Config(t, config.ModeController, "ENABLE_SQS_TERMINATION_DRAINING", "true", "QUEUE_URL", w.queueURL,
		"AWS_REGION", "us-east-1", "AWS_ENDPOINT", w.fake.URL(), "CLUSTER_NAME", "sandbox", "DRY_RUN", "true", "EMIT_KUBERNETES_EVENTS", "true")
	m := metrics.New()
	w.run(t, ctx, cfg, "lifeboat-trial", m, nil)

	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		return m.Value("lifeboat_actions_total", "action", "cordon", "result", "dry_run") >= 1 &&
			m.Value("lifeboat_actions_total", "action", "drain", "result", "dry_run") >= 1 &&
			m.Value("lifeboat_queue_messages_total", "outcome", "done") >= 2, nil
	})
	if err != nil {
		t.Fatalf("the dry run did not report both notices: %v", err)
	}
	// Events are recorded in the background.
	var list *corev1.EventList
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		var err error
		list, err = w.c.Client.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("involvedObject.name", w.node.Name).String()})
		return err == nil && len(list.Items) > 0, err
	})
	if err != nil {
		t.Fatalf("no Event on the Node says what the dry run would have done: %v", err)
	}
	for _, e := range list.Items {
		if e.Annotations["lifeboat.dev/dry-run"] != "true" {
			t.Errorf("Event %s (%s) is not marked as a dry run", e.Reason, e.Message)
		}
	}

	// NTH's queue: every message there at once, never received before.
	got, err := w.queue.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: nthQueue, MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Messages) != len(notices) {
		t.Errorf("NTH received %d of its %d messages at once: the trial held some back", len(got.Messages), len(notices))
	}
	if n := w.fake.CallCount("sqs", "DeleteMessage") + w.fake.CallCount("autoscaling", "CompleteLifecycleAction"); n != 0 {
		t.Errorf("%d deletes or lifecycle completions in a dry run", n)
	}
	node, err := w.c.Client.CoreV1().Nodes().Get(ctx, w.node.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if node.Spec.Unschedulable || len(node.Spec.Taints) != 0 || node.Annotations[record.Annotation] != "" {
		t.Errorf("the trial changed the node: %+v %v", node.Spec, node.Annotations)
	}
}
