// SPDX-License-Identifier: Apache-2.0

package controller_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/cloud/controlleronly"
	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/controller"
	"lifeboat.dev/lifeboat/internal/episode"
	"lifeboat.dev/lifeboat/internal/events"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/record"
	"lifeboat.dev/lifeboat/internal/webhook"
	"lifeboat.dev/lifeboat/internal/wiring"
	"lifeboat.dev/lifeboat/test/sandbox"
	"lifeboat.dev/lifeboat/test/sandbox/fakeaws"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

func stateMessage(instance, state string) string {
	return fmt.Sprintf(`{"version":"0","id":"s-%s","detail-type":"EC2 Instance State-change Notification","source":"aws.ec2","account":"000000000000","time":"%s","region":"us-east-1","resources":[],"detail":{"instance-id":"%s","state":"%s"}}`,
		instance, time.Now().UTC().Format(time.RFC3339), instance, state)
}

// operateWorld is one node with two pods, its instance in the fake EC2 with a pending
// termination hook, and a queue.
type operateWorld struct {
	c        *sandbox.Cluster
	fake     *fakeaws.Server
	queue    *awssqs.Client
	queueURL string
	awsCfg   aws.Config
	node     *corev1.Node
	instance string
	logs     *sandboxtest.LogBuffer
}

func newOperateWorld(t *testing.T, ctx context.Context, opts sandbox.ClusterOptions) *operateWorld {
	t.Helper()
	// Waits built as the binary builds them load AWS settings through the SDK's credential
	// chain: TestMain (sandboxtest.Main) gives it static keys and no instance metadata.
	c, _ := sandboxtest.Shared(t, opts)
	q := sandboxtest.SQS(t, sandbox.SQSOptions{Queues: []string{"lifeboat"}, VisibilityTimeout: 5})
	fake := sandboxtest.FakeAWS(t, q.Endpoint)
	node, instance := sandboxtest.TerminatingNode(t, ctx, c, fake,
		map[string]string{"aws-node-termination-handler/managed": "", "kubernetes.io/cluster/sandbox": "owned"}, "token-1")
	w := &operateWorld{c: c, fake: fake, node: node, instance: instance,
		awsCfg: sandboxtest.AWSConfig(fake.URL()), queueURL: q.QueueURLs["lifeboat"], logs: &sandboxtest.LogBuffer{}}
	w.queue = awssqs.NewFromConfig(w.awsCfg)
	if err := c.EnsureNamespace(ctx, "shop"); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: fmt.Sprintf("web-%d", i)},
			Spec: corev1.PodSpec{NodeName: w.node.Name, Containers: []corev1.Container{{Name: "c", Image: "img"}}}}
		if _, err := c.Client.CoreV1().Pods("shop").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

func (w *operateWorld) send(t *testing.T, ctx context.Context, bodies ...string) {
	t.Helper()
	for _, b := range bodies {
		if _, err := w.queue.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: &w.queueURL, MessageBody: aws.String(b)}); err != nil {
			t.Fatal(err)
		}
	}
}

// run starts a controller as user until the test ends.
func (w *operateWorld) run(t *testing.T, ctx context.Context, cfg *config.Config, user string, m *metrics.Metrics, wire func(*controller.Options)) {
	t.Helper()
	startController(t, ctx, w.c, w.awsCfg, w.queue, cfg, user, m, w.logs, wire)
}

// startController runs a controller of the cluster as user, with Events, until the test ends;
// its log goes to logs and is printed when the test fails.
func startController(t *testing.T, ctx context.Context, c *sandbox.Cluster, awsCfg aws.Config, queue *awssqs.Client, cfg *config.Config,
	user string, m *metrics.Metrics, logs *sandboxtest.LogBuffer, wire func(*controller.Options)) (stop func()) {
	t.Helper()
	rc, err := c.UserConfig(user, "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	client := kubernetes.NewForConfigOrDie(rc)
	recorder, stopEvents, err := events.New(client, wiring.Events(cfg, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	o := controller.Options{Config: cfg, Client: client, Queue: queue, EC2: controlleronly.NewAWSEC2(awsCfg), AutoScaling: cloud.NewAWSAutoScaling(awsCfg),
		EKS: controlleronly.NewAWSEKS(awsCfg), Logger: slog.New(withLooks{slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})}), Metrics: m, Handler: episode.Options{Events: recorder}}
	if wire != nil {
		wire(&o)
	}
	ctl := controller.New(o)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- ctl.Run(runCtx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil && runCtx.Err() == nil {
				t.Errorf("controller stopped: %v", err)
			}
			stopEvents()
		})
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("controller log:\n%s", logs.String())
		}
	})
	return stop
}

func (w *operateWorld) nodeEvents(t *testing.T, ctx context.Context) map[string]int32 {
	t.Helper()
	list, err := w.c.Client.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("involvedObject.name", w.node.Name).String()})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int32{}
	for _, e := range list.Items {
		got[e.Reason] += max(e.Count, 1)
	}
	return got
}

// TestOneInterruptionOneWebhook: a spot notice, a termination hook and a state change for one
// instance make one drain, one lifecycle completion, one webhook (delivered on its second
// attempt), one drained Event and one lifecycle-completed Event; the metrics count each step.
func TestOneInterruptionOneWebhook(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := newOperateWorld(t, ctx, sandbox.ClusterOptions{})

	var mu sync.Mutex
	var requests int
	var bodies []map[string]any
	hook := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		requests++
		if requests == 1 {
			rw.WriteHeader(http.StatusInternalServerError) // the first attempt fails: retried
			return
		}
		b, _ := io.ReadAll(r.Body)
		var v map[string]any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Errorf("webhook body is not JSON: %v: %s", err, b)
		}
		bodies = append(bodies, v)
	}))
	defer hook.Close()

	cfg := sandboxtest.Config(t, config.ModeController, "ENABLE_SQS_TERMINATION_DRAINING", "true", "QUEUE_URL", w.queueURL,
		"AWS_REGION", "us-east-1", "AWS_ENDPOINT", w.fake.URL(), "CLUSTER_NAME", "sandbox", "SQS_MSG_VISIBILITY_TIMEOUT_SEC", "5",
		"EMIT_KUBERNETES_EVENTS", "true", "KUBERNETES_EVENTS_EXTRA_ANNOTATIONS", "team=platform", "WEBHOOK_URL", hook.URL+"/secret-path")
	sender, err := webhook.New(wiring.Webhook(cfg), webhook.Options{InitialBackoff: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New()
	w.send(t, ctx, spotMessage(w.instance), hookMessage(w.instance, "token-1"), stateMessage(w.instance, "shutting-down"))
	w.run(t, ctx, cfg, "lifeboat", m, func(o *controller.Options) { o.Handler.Webhook = sender })

	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		_, completed, _, _ := w.fake.LifecycleAction("token-1")
		return completed && m.Value("lifeboat_queue_messages_total", "outcome", "done") >= 3, nil
	})
	if err != nil {
		t.Fatalf("not every message handled: lifecycle and 3 messages done: %v", err)
	}
	time.Sleep(2 * time.Second) // a second webhook or Event would show by now

	mu.Lock()
	if requests != 2 || len(bodies) != 1 {
		t.Errorf("webhook: %d requests, %d delivered; want 2 requests (one retried) delivering one notification", requests, len(bodies))
	} else if text, _ := bodies[0]["text"].(string); !strings.Contains(text, w.instance) || !strings.Contains(text, w.node.Name) {
		t.Errorf("webhook text %q does not name the instance and node", text)
	}
	mu.Unlock()

	got := w.nodeEvents(t, ctx)
	for reason, want := range map[string]int32{
		events.ReasonSpotInterruption: 1, events.ReasonASGLifecycle: 1, events.ReasonStateChange: 1,
		events.ReasonCordon: 1, events.ReasonDrainStarted: 1, events.ReasonDrained: 1, events.ReasonLifecycleCompleted: 1,
	} {
		if got[reason] != want {
			t.Errorf("Events %s: %d, want %d (all: %v)", reason, got[reason], want, got)
		}
	}

	for _, c := range []struct {
		metric string
		labels []string
		want   float64
	}{
		{"lifeboat_notices_total", []string{"source", "queue"}, 3},
		{"lifeboat_actions_total", []string{"action", "cordon", "result", "ok"}, 1},
		{"lifeboat_actions_total", []string{"action", "drain", "result", "ok"}, 1},
		{"lifeboat_actions_total", []string{"action", "lifecycle_complete", "result", "ok"}, 1},
		{"lifeboat_actions_total", []string{"action", "webhook", "result", "ok"}, 1},
		{"lifeboat_drain_duration_seconds", []string{"result", "ok"}, 1},
		{"lifeboat_evictions_total", []string{"result", "evicted"}, 2},
		{"lifeboat_aws_calls_total", []string{"operation", "CompleteLifecycleAction", "result", "ok"}, 1},
		{"lifeboat_queue_messages_total", []string{"outcome", "done"}, 3},
		{"lifeboat_queue_lag_seconds", nil, 3},
	} {
		if got := m.Value(c.metric, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.metric, c.labels, got, c.want)
		}
	}
	if m.Value("lifeboat_aws_calls_total", "operation", "DescribeInstances", "result", "ok") == 0 {
		t.Error("no DescribeInstances counted")
	}
	if m.Value("lifeboat_sqs_calls_total", "event", "receive", "result", "ok") == 0 {
		t.Error("no SQS receive counted")
	}
	if strings.Contains(w.logs.String(), "secret-path") {
		t.Error("the webhook URL appears in the log")
	}
}

// TestDryRunWritesNothing: under DRY_RUN the controller reads and logs, records Events saying
// what it would do, and writes nothing else: no node or pod write and no eviction reaches the
// API server (from its audit log), no message is deleted and no lifecycle action completed.
func TestDryRunWritesNothing(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := newOperateWorld(t, ctx, sandbox.ClusterOptions{AuditLog: true})
	cfg := sandboxtest.Config(t, config.ModeController, "ENABLE_SQS_TERMINATION_DRAINING", "true", "QUEUE_URL", w.queueURL,
		"AWS_REGION", "us-east-1", "AWS_ENDPOINT", w.fake.URL(), "CLUSTER_NAME", "sandbox", "SQS_MSG_VISIBILITY_TIMEOUT_SEC", "5",
		"DRY_RUN", "true", "EMIT_KUBERNETES_EVENTS", "true", "TAINT_NODE", "true", "HEARTBEAT_INTERVAL", "30")
	m := metrics.New()
	w.send(t, ctx, spotMessage(w.instance), hookMessage(w.instance, "token-1"))
	w.run(t, ctx, cfg, "lifeboat-dry", m, nil)

	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		return m.Value("lifeboat_actions_total", "action", "drain", "result", "dry_run") >= 1 &&
			m.Value("lifeboat_queue_messages_total", "outcome", "done") >= 2, nil
	})
	if err != nil {
		t.Fatalf("the dry run never went through both notices: %v", err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return w.nodeEvents(t, ctx)[events.ReasonCordon] >= 1, nil
	})
	if err != nil {
		t.Errorf("no dry-run Cordon Event: %v", w.nodeEvents(t, ctx))
	}

	audit, err := w.c.AuditEvents(sandbox.ByUser("lifeboat-dry"))
	if err != nil {
		t.Fatal(err)
	}
	reads := 0
	for _, e := range audit {
		if e.ObjectRef == nil {
			continue
		}
		switch e.Verb {
		case "get", "list", "watch":
			reads++
			continue
		}
		if e.ObjectRef.Resource == "events" || (e.ObjectRef.Resource == "selfsubjectaccessreviews") {
			continue // Events are allowed in a dry run
		}
		t.Errorf("dry run wrote: %s %s/%s %s/%s", e.Verb, e.ObjectRef.Resource, e.ObjectRef.Subresource, e.ObjectRef.Namespace, e.ObjectRef.Name)
	}
	if reads == 0 {
		t.Error("the audit log shows no reads either: is it recording this user?")
	}
	if n := w.fake.CallCount("autoscaling", "CompleteLifecycleAction") + w.fake.CallCount("autoscaling", "RecordLifecycleActionHeartbeat"); n != 0 {
		t.Errorf("%d lifecycle completions or heartbeats in a dry run", n)
	}
	if n := w.fake.CallCount("sqs", "DeleteMessage"); n != 0 {
		t.Errorf("%d SQS deletes in a dry run", n)
	}
	got, err := w.c.Client.CoreV1().Nodes().Get(ctx, w.node.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.Unschedulable || len(got.Spec.Taints) != 0 || got.Annotations[record.Annotation] != "" {
		t.Errorf("the node changed in a dry run: %+v %v", got.Spec, got.Annotations)
	}
}
