// SPDX-License-Identifier: Apache-2.0

package controller_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/controller"
	"lifeboat.dev/lifeboat/internal/episode"
	"lifeboat.dev/lifeboat/internal/events"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/record"
	"lifeboat.dev/lifeboat/internal/status"
	"lifeboat.dev/lifeboat/test/sandbox"
	"lifeboat.dev/lifeboat/test/sandbox/fakeaws"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// intakeWorld is a cluster whose nodes' instances are this cluster's in the fake EC2, one
// pod with a 300 s grace period on each node, a queue, and another cluster's instance
// (foreign, no node here).
type intakeWorld struct {
	c        *sandbox.Cluster
	fake     *fakeaws.Server
	queue    *awssqs.Client
	queueURL string
	nodes    []*corev1.Node
	logs     *sandboxtest.LogBuffer
	metrics  *metrics.Metrics
	wire     func(*controller.Options) // changes the next run's options
}

const podGrace = 300

var ourTags = map[string]string{"aws-node-termination-handler/managed": "", "kubernetes.io/cluster/sandbox": "owned"}

func newIntakeWorld(t *testing.T, ctx context.Context, nodeCount int) *intakeWorld {
	t.Helper()
	c, _ := sandboxtest.Shared(t, sandbox.ClusterOptions{})
	q := sandboxtest.SQS(t, sandbox.SQSOptions{Queues: []string{"lifeboat"}, VisibilityTimeout: 5})
	fake := sandboxtest.FakeAWS(t, q.Endpoint)
	var specs []sandbox.NodeSpec
	for i := range nodeCount {
		specs = append(specs, sandbox.NodeSpec{Index: i + 1})
	}
	added, err := c.AddNodes(ctx, specs...)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range added {
		fake.AddInstance(fakeaws.Instance{ID: episode.InstanceIDOf(n), PrivateDNSName: n.Name, Tags: ourTags})
	}
	fake.AddInstance(fakeaws.Instance{ID: foreign, PrivateDNSName: "ip-10-9-0-1.ec2.internal",
		Tags: map[string]string{"aws-node-termination-handler/managed": "", "kubernetes.io/cluster/other": "owned"}})
	if err := c.EnsureNamespace(ctx, "shop"); err != nil {
		t.Fatal(err)
	}
	for _, n := range added {
		grace := int64(podGrace)
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "app-" + n.Name},
			Spec: corev1.PodSpec{NodeName: n.Name, TerminationGracePeriodSeconds: &grace, Containers: []corev1.Container{{Name: "c", Image: "img"}}}}
		if _, err := c.Client.CoreV1().Pods("shop").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	awsCfg := sandboxtest.AWSConfig(fake.URL())
	return &intakeWorld{c: c, fake: fake, queue: awssqs.NewFromConfig(awsCfg), queueURL: q.QueueURLs["lifeboat"],
		nodes: added, logs: &sandboxtest.LogBuffer{}, metrics: metrics.New()}
}

// run starts a controller with the settings (beyond the queue, the endpoint and the cluster
// name) until the test ends.
func (w *intakeWorld) run(t *testing.T, ctx context.Context, settings ...string) (stop func()) {
	t.Helper()
	cfg := sandboxtest.Config(t, config.ModeController, append([]string{"ENABLE_SQS_TERMINATION_DRAINING", "true",
		"QUEUE_URL", w.queueURL, "AWS_REGION", "us-east-1", "AWS_ENDPOINT", w.fake.URL(), "CLUSTER_NAME", "sandbox",
		"EMIT_KUBERNETES_EVENTS", "true"}, settings...)...)
	return startController(t, ctx, w.c, sandboxtest.AWSConfig(w.fake.URL()), w.queue, cfg, "lifeboat-controller", w.metrics, w.logs, w.wire)
}

func (w *intakeWorld) send(t *testing.T, ctx context.Context, bodies ...string) {
	t.Helper()
	for _, b := range bodies {
		if _, err := w.queue.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: &w.queueURL, MessageBody: &b}); err != nil {
			t.Fatal(err)
		}
	}
}

func (w *intakeWorld) node(t *testing.T, ctx context.Context, n *corev1.Node) *corev1.Node {
	t.Helper()
	got, err := w.c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// podsOn counts the pods still on a node.
func (w *intakeWorld) podsOn(t *testing.T, ctx context.Context, n *corev1.Node) int {
	t.Helper()
	list, err := w.c.Client.CoreV1().Pods("shop").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", n.Name).String()})
	if err != nil {
		t.Fatal(err)
	}
	return len(list.Items)
}

func (w *intakeWorld) phase(t *testing.T, ctx context.Context, n *corev1.Node) record.Phase {
	t.Helper()
	r, _ := record.Read(w.node(t, ctx, n))
	return r.Phase
}

func (w *intakeWorld) nodeEventReasons(t *testing.T, ctx context.Context, n *corev1.Node) map[string]bool {
	t.Helper()
	list, err := w.c.Client.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("involvedObject.name", n.Name).String()})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, e := range list.Items {
		got[e.Reason] = true
	}
	return got
}

// An AWS Health event names several instances, some another cluster's, in any order: every
// own node is cordoned within seconds, none waits for another's scheduled start or drain,
// each is drained on its own schedule, and a start time that cannot be read cordons without
// a drain instead of losing the notice.
func TestHealthEventNoticesStandAlone(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := newIntakeWorld(t, ctx, 5)
	soon, later, unreadable := w.nodes[:2], w.nodes[2:4], w.nodes[4]
	id := func(n *corev1.Node) string { return episode.InstanceIDOf(n) }
	const code = "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED"
	// Drains start NODE_TERMINATION_GRACE_PERIOD (5 s) before each event's start.
	start := time.Now().Add(15 * time.Second)
	w.send(t, ctx,
		fakeaws.HealthScheduledChange("health-soon", code, start, start.Add(time.Hour), "", "", id(soon[0]), id(soon[1]), foreign),
		fakeaws.HealthScheduledChange("health-later", code, time.Now().Add(72*time.Hour), time.Time{}, "", "", foreign, id(later[0]), id(later[1])),
		fakeaws.HealthScheduledChange("health-odd", code, time.Time{}, time.Time{}, "next Tuesday at dawn", "", id(unreadable)))
	sent := time.Now()
	w.run(t, ctx, "NODE_TERMINATION_GRACE_PERIOD", "5", "TAINT_NODE", "true")

	// Every own node is cordoned at once, before any drain of the first event has begun.
	all := w.nodes
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 8*time.Second, true, func(ctx context.Context) (bool, error) {
		for _, n := range all {
			if !w.node(t, ctx, n).Spec.Unschedulable {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		for _, n := range all {
			t.Logf("%s unschedulable=%v", n.Name, w.node(t, ctx, n).Spec.Unschedulable)
		}
		t.Fatalf("not every own node was cordoned within 8 s of the messages")
	}
	cordoned := time.Since(sent)
	for _, n := range soon {
		if got := w.podsOn(t, ctx, n); got != 1 {
			t.Errorf("%s: %d pods left when every node was cordoned, want its pod still there until its drain is due", n.Name, got)
		}
	}
	// The first event's nodes drain on their schedule, each on its own.
	for _, n := range soon {
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 40*time.Second, true, func(ctx context.Context) (bool, error) {
			return w.phase(t, ctx, n) == record.PhaseDrained && w.podsOn(t, ctx, n) == 0, nil
		})
		if err != nil {
			t.Fatalf("%s was not drained for its event", n.Name)
		}
	}
	// The event three days ahead: cordoned and tainted, its pods still running.
	for _, n := range later {
		got := w.node(t, ctx, n)
		r, _ := record.Read(got)
		if r.Phase == record.PhaseDrained || w.podsOn(t, ctx, n) != 1 {
			t.Errorf("%s drained three days early: phase %s", n.Name, r.Phase)
		}
		if !hasTaint(got, nodes.TaintScheduledMaintenance) {
			t.Errorf("%s: taints %v", n.Name, got.Spec.Taints)
		}
	}
	// The unreadable start: cordoned, never drained, and said so.
	if w.podsOn(t, ctx, unreadable) != 1 || w.phase(t, ctx, unreadable) == record.PhaseDrained {
		t.Errorf("%s, whose event start cannot be read, was drained", unreadable.Name)
	}
	if !w.nodeEventReasons(t, ctx, unreadable)[events.ReasonDrainNotScheduled] {
		t.Errorf("no %s Event on %s", events.ReasonDrainNotScheduled, unreadable.Name)
	}
	if got := w.metrics.Value("lifeboat_notice_warnings_total", "problem", metrics.ProblemStartTimeUnreadable); got < 1 {
		t.Errorf("lifeboat_notice_warnings_total{problem=start_time_unreadable} = %v", got)
	}
	// The later event is over: AWS Health says "closed", and its nodes are given back.
	w.send(t, ctx, fakeaws.HealthScheduledChangeClosed("health-later", code, time.Now().Add(72*time.Hour), time.Time{}, foreign, id(later[0]), id(later[1])))
	for _, n := range later {
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 15*time.Second, true, func(ctx context.Context) (bool, error) {
			got := w.node(t, ctx, n)
			return !got.Spec.Unschedulable && !hasTaint(got, nodes.TaintScheduledMaintenance), nil
		})
		if err != nil {
			t.Errorf("%s was not given back after its event closed", n.Name)
		}
	}
	if n := strings.Count(w.logs.String(), "notice is not for this cluster"); n < 2 {
		t.Errorf("the foreign instance was refused %d times, want once per message naming it", n)
	}
	t.Logf("5 own nodes in 3 messages cordoned %.1fs after sending (controller start included)", cordoned.Seconds())
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

// graceWatch records the grace period each pod of the namespace was given when it started
// terminating (the eviction's, before kwok removes the pod).
type graceWatch struct {
	mu    sync.Mutex
	grace map[string]int64
}

func watchGrace(t *testing.T, ctx context.Context, c *sandbox.Cluster, namespace string) *graceWatch {
	t.Helper()
	list, err := c.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wt, err := c.Client.CoreV1().Pods(namespace).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	g := &graceWatch{grace: map[string]int64{}}
	go func() {
		for ev := range wt.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || (ev.Type != watch.Modified && ev.Type != watch.Deleted) || p.DeletionGracePeriodSeconds == nil {
				continue
			}
			g.mu.Lock()
			if _, seen := g.grace[p.Name]; !seen {
				g.grace[p.Name] = *p.DeletionGracePeriodSeconds
			}
			g.mu.Unlock()
		}
	}()
	t.Cleanup(wt.Stop)
	return g
}

func (g *graceWatch) of(pod string) (int64, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	v, ok := g.grace[pod]
	return v, ok
}

// Each kind gets its own deadline: a terminate hook's is its heartbeat timeout (one hour: the
// pod keeps its 300 s; 60 s without heartbeats: cut to fit), a capacity-reservation warning's
// is two minutes, as a Spot warning's.
func TestDeadlinePerKind(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := newIntakeWorld(t, ctx, 3)
	long, short, capres := w.nodes[0], w.nodes[1], w.nodes[2]
	for _, h := range []struct {
		group   string
		timeout int
		node    *corev1.Node
	}{{"routine", 3600, long}, {"hurried", 60, short}} {
		instance := episode.InstanceIDOf(h.node)
		w.fake.AddInstance(fakeaws.Instance{ID: instance, PrivateDNSName: h.node.Name, AutoScalingGroup: h.group, Tags: ourTags})
		w.fake.AddLifecycleHook(fakeaws.LifecycleHook{Name: "drain", AutoScalingGroup: h.group, HeartbeatTimeout: h.timeout})
		w.fake.BeginLifecycleAction("drain", h.group, instance, "token-"+h.group)
	}
	grace := watchGrace(t, ctx, w.c, "shop")
	now := time.Now()
	w.send(t, ctx,
		fakeaws.TerminateLifecycleAction("routine", "drain", episode.InstanceIDOf(long), "token-routine", now),
		fakeaws.TerminateLifecycleAction("hurried", "drain", episode.InstanceIDOf(short), "token-hurried", now),
		fakeaws.CapacityReservationInterruptionWarning(episode.InstanceIDOf(capres), "terminate", now))
	w.run(t, ctx, "TAINT_NODE", "true")

	for _, n := range w.nodes {
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 45*time.Second, true, func(ctx context.Context) (bool, error) {
			return w.phase(t, ctx, n) == record.PhaseDrained && w.podsOn(t, ctx, n) == 0, nil
		})
		if err != nil {
			t.Fatalf("%s was not drained", n.Name)
		}
	}
	check := func(n *corev1.Node, what string, low, high int64) {
		t.Helper()
		g, ok := grace.of("app-" + n.Name)
		switch {
		case !ok:
			t.Errorf("%s: the pod's termination was never seen", what)
		case g < low || g > high:
			t.Errorf("%s: the pod was given %d s to terminate, want %d..%d", what, g, low, high)
		default:
			t.Logf("%s: the pod was given %d s", what, g)
		}
	}
	check(long, "hook with a one-hour heartbeat timeout", podGrace, podGrace)
	check(short, "hook with a 60 s heartbeat timeout, no heartbeats", 40, 59)
	check(capres, "capacity reservation warning", 90, 119)

	for _, token := range []string{"token-routine", "token-hurried"} {
		if _, completed, _, _ := w.fake.LifecycleAction(token); !completed {
			t.Errorf("lifecycle action %s was not completed", token)
		}
	}
	if n := w.fake.CallCount("autoscaling", "DescribeLifecycleHooks"); n != 2 {
		t.Errorf("%d DescribeLifecycleHooks calls, want one per hook (2)", n)
	}
	got := w.node(t, ctx, capres)
	if !hasTaint(got, nodes.TaintSpotInterruption) {
		t.Errorf("capacity reservation node: taints %v, want the Spot interruption taint", got.Spec.Taints)
	}
	if !w.nodeEventReasons(t, ctx, capres)[events.ReasonCapacityReservation] {
		t.Errorf("no %s Event", events.ReasonCapacityReservation)
	}
	if v := w.metrics.Value("lifeboat_notices_total", "kind", "capacity_reservation_interruption"); v != 1 {
		t.Errorf("lifeboat_notices_total{kind=capacity-reservation-interruption} = %v", v)
	}
}

// Without permission to read a hook's timeouts, pods keep their own grace periods and the log
// says why.
func TestHookTimeoutUnknownKeepsPodGrace(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := newIntakeWorld(t, ctx, 1)
	n := w.nodes[0]
	instance := episode.InstanceIDOf(n)
	w.fake.AddInstance(fakeaws.Instance{ID: instance, PrivateDNSName: n.Name, AutoScalingGroup: "workers", Tags: ourTags})
	w.fake.AddLifecycleHook(fakeaws.LifecycleHook{Name: "drain", AutoScalingGroup: "workers", HeartbeatTimeout: 60})
	w.fake.BeginLifecycleAction("drain", "workers", instance, "token-1")
	w.fake.Deny("autoscaling", "DescribeLifecycleHooks")
	grace := watchGrace(t, ctx, w.c, "shop")
	w.send(t, ctx, fakeaws.TerminateLifecycleAction("workers", "drain", instance, "token-1", time.Now()))
	w.run(t, ctx)
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 45*time.Second, true, func(ctx context.Context) (bool, error) {
		_, completed, _, _ := w.fake.LifecycleAction("token-1")
		return completed, nil
	})
	if err != nil {
		t.Fatal("the lifecycle action was not completed")
	}
	if g, ok := grace.of("app-" + n.Name); !ok || g != podGrace {
		t.Errorf("the pod was given %d s (seen %v), want its own %d s", g, ok, podGrace)
	}
	if !strings.Contains(w.logs.String(), "heartbeat timeout is unknown: pods keep their own grace periods") {
		t.Error("the log does not say why pods keep their grace periods")
	}
}

// Another cluster's notice is kept on the queue for that cluster and comes back every few
// minutes: it is logged at Info once, and its copies at Debug.
func TestForeignNoticeLoggedOnce(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w := newIntakeWorld(t, ctx, 1)
	w.run(t, ctx)
	spot := fakeaws.SpotInterruptionWarning(foreign, "terminate", time.Now())
	w.send(t, ctx, spot, spot, spot)
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return w.metrics.Value("lifeboat_queue_messages_total", "outcome", "not_owned") >= 3, nil
	})
	if err != nil {
		t.Fatal("the three copies were not all handled")
	}
	if n := strings.Count(w.logs.String(), "notice is not for this cluster"); n != 1 {
		t.Errorf("the foreign notice was logged %d times at Info, want once:\n%s", n, w.logs)
	}
}

// A notice whose ownership could not be looked up (EC2 failed) comes back a second after its
// first delivery, not after ten: one failed batched DescribeInstances holds every notice of a
// burst, and a Spot warning gives two minutes. Once EC2 answers, the node is cordoned.
func TestFailedLookupComesBackSoon(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w := newIntakeWorld(t, ctx, 1)
	n := w.nodes[0]
	w.fake.SetFault(fakeaws.Fault{Service: "ec2", Action: "DescribeInstances", Status: 503, Code: "RequestLimitExceeded"})
	w.run(t, ctx)
	w.send(t, ctx, fakeaws.SpotInterruptionWarning(episode.InstanceIDOf(n), "terminate", time.Now()))
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return w.metrics.Value("lifeboat_queue_messages_total", "outcome", "retry") >= 1, nil
	})
	if err != nil {
		t.Fatalf("the message was never put back after the failed lookup:\n%s", w.logs)
	}
	w.fake.ClearFaults()
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return w.node(t, ctx, n).Spec.Unschedulable, nil
	})
	if err != nil {
		t.Fatalf("node not cordoned once EC2 answered:\n%s", w.logs)
	}
	// Put-backs, told from renewals of the message's visibility while it is handled (the
	// queue's timeout, 5 s here).
	var putBacks []int
	for _, c := range w.fake.Calls() {
		if c.Service != "sqs" || c.Action != "ChangeMessageVisibility" {
			continue
		}
		var in struct{ VisibilityTimeout int }
		if err := json.Unmarshal([]byte(c.Body), &in); err != nil {
			t.Fatalf("ChangeMessageVisibility body %q: %v", c.Body, err)
		}
		if in.VisibilityTimeout != 5 {
			putBacks = append(putBacks, in.VisibilityTimeout)
		}
	}
	if len(putBacks) == 0 || putBacks[0] != 1 {
		t.Errorf("the message was put back for %v s, want 1 s the first time", putBacks)
	}
}

// Untagged is not foreign: a Spot warning for this cluster's Node whose instance lacks the
// managed tag is not acted on (CHECK_TAG_BEFORE_DRAINING's default kept), but said where the
// operator looks: a Warning Event on the Node naming the tag and the setting, the metric, a
// WARN line, and the Node in `lifeboat status`. Another cluster's instance stays quiet: no
// Event, no count. Copies of the warning say it once.
func TestUntaggedNoticeIsSaid(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w := newIntakeWorld(t, ctx, 2)
	untagged, tagged := w.nodes[0], w.nodes[1]
	w.fake.RemoveInstance(episode.InstanceIDOf(untagged))
	w.fake.AddInstance(fakeaws.Instance{ID: episode.InstanceIDOf(untagged), PrivateDNSName: untagged.Name,
		Tags: map[string]string{"kubernetes.io/cluster/sandbox": "owned"}}) // a node group created without the managed tag
	w.run(t, ctx)
	spot := fakeaws.SpotInterruptionWarning(episode.InstanceIDOf(untagged), "terminate", time.Now().Add(2*time.Minute))
	w.send(t, ctx, spot, spot, fakeaws.SpotInterruptionWarning(foreign, "terminate", time.Now().Add(2*time.Minute)))

	if got := w.eventCountReaching(t, ctx, untagged, events.ReasonNoticeUntagged, 1); got != 1 {
		t.Fatalf("%d %s Events on the untagged node, want 1", got, events.ReasonNoticeUntagged)
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		return w.metrics.Value("lifeboat_queue_messages_total", "outcome", "not_owned") >= 3, nil
	})
	if err != nil {
		t.Fatal("the three messages were not all handled")
	}
	list, err := w.c.Client.CoreV1().Events("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range list.Items {
		if e.Reason == events.ReasonNoticeUntagged && !strings.Contains(e.Message, "aws-node-termination-handler/managed") ||
			e.Reason == events.ReasonNoticeUntagged && !strings.Contains(e.Message, "CHECK_TAG_BEFORE_DRAINING") {
			t.Errorf("the Event does not name the missing tag and the setting: %q", e.Message)
		}
		if e.InvolvedObject.Name == tagged.Name {
			t.Errorf("an Event on the other node: %s %q", e.Reason, e.Message)
		}
	}
	if got := w.metrics.Value("lifeboat_notices_untagged_total"); got != 1 {
		t.Errorf("lifeboat_notices_untagged_total = %v, want 1 (the foreign instance is not counted, copies once)", got)
	}
	if n := strings.Count(w.logs.String(), "level=WARN msg=\"notice for this cluster's node not acted on"); n != 1 {
		t.Errorf("%d WARN lines for the untagged notice, want 1", n)
	}
	got := w.node(t, ctx, untagged)
	if got.Spec.Unschedulable || got.Annotations[record.Annotation] != "" {
		t.Error("the untagged node was acted on; CHECK_TAG_BEFORE_DRAINING=true (the default) says not to")
	}
	report, err := status.Collect(ctx, w.c.Client, sandboxtest.Config(t, config.ModeController, "QUEUE_URL", w.queueURL, "AWS_REGION", "us-east-1"), time.Now(), status.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(report.Untagged) != 1 || report.Untagged[0].Node != untagged.Name {
		t.Fatalf("lifeboat status lists untagged nodes %+v, want %s", report.Untagged, untagged.Name)
	}
	var out strings.Builder
	if err := status.Print(&out, report, "table"); err != nil {
		t.Fatal(err)
	}
	if first, _, _ := strings.Cut(out.String(), "\n"); !strings.HasPrefix(first, "NOT PROTECTED: 1 node(s)") {
		t.Errorf("lifeboat status does not start with the untagged node:\n%s", out.String())
	}
}

// A refused permission is said where it blocks: with ec2:DescribeInstances denied, a Spot
// warning for a node that just joined gives a Warning Event naming the IAM action on
// Lifeboat's own pod and on that node, the metric by operation and action, and the first line
// of `lifeboat status`. The notice is kept: once the permission returns, the node is drained.
func TestRefusedPermissionIsSaid(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := newIntakeWorld(t, ctx, 1)
	w.fake.Deny("ec2", "DescribeInstances")
	w.run(t, ctx, "POD_NAME", "lifeboat-controller-0")
	joined, err := w.c.AddNodes(ctx, sandbox.NodeSpec{Index: 30})
	if err != nil {
		t.Fatal(err)
	}
	node := joined[0]
	w.fake.AddInstance(fakeaws.Instance{ID: episode.InstanceIDOf(node), PrivateDNSName: node.Name, Tags: ourTags})
	spot := fakeaws.SpotInterruptionWarning(episode.InstanceIDOf(node), "terminate", time.Now().Add(2*time.Minute))
	w.send(t, ctx, spot)

	if got := w.eventCountReaching(t, ctx, node, events.ReasonAWSPermissionDenied, 1); got < 1 {
		t.Fatalf("no %s Event on the node the refusal holds up", events.ReasonAWSPermissionDenied)
	}
	list, err := w.c.Client.CoreV1().Events("kube-system").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var onPod []string
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == "Pod" && e.InvolvedObject.Name == "lifeboat-controller-0" && e.Reason == events.ReasonAWSPermissionDenied {
			onPod = append(onPod, e.Message)
		}
	}
	if len(onPod) != 1 || !strings.Contains(onPod[0], "ec2:DescribeInstances") {
		t.Errorf("Events on Lifeboat's own pod: %q, want one naming ec2:DescribeInstances", onPod)
	}
	if got := w.metrics.Value("lifeboat_aws_permission_denied_total", "operation", "DescribeInstances", "iam_action", "ec2:DescribeInstances"); got < 1 {
		t.Errorf("lifeboat_aws_permission_denied_total{iam_action=ec2:DescribeInstances} = %v", got)
	}
	cfg := sandboxtest.Config(t, config.ModeController, "QUEUE_URL", w.queueURL, "AWS_REGION", "us-east-1")
	var out strings.Builder
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		report, err := status.Collect(ctx, w.c.Client, cfg, time.Now(), status.Options{})
		if err != nil {
			return false, err
		}
		out.Reset()
		return status.Print(&out, report, "table") == nil && strings.HasPrefix(out.String(), "AWS PERMISSION DENIED: 1 node(s)"), nil
	})
	if err != nil {
		t.Errorf("lifeboat status does not start with the refusal:\n%s", out.String())
	}
	if got := w.node(t, ctx, node); got.Spec.Unschedulable {
		t.Fatal("the node was cordoned while its ownership could not be checked")
	}

	w.fake.ClearFaults() // the permission is granted again
	w.waitDrained(t, ctx, node, notice.ID(notice.SpotInterruption, episode.InstanceIDOf(node), "terminate"))
	report, err := status.Collect(ctx, w.c.Client, cfg, time.Now(), status.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(report.Denied) != 0 {
		t.Errorf("lifeboat status still lists the refusal after the notice went through: %+v", report.Denied)
	}
}
