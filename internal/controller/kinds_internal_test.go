// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/cloud/controlleronly"
	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/ownership"
	"lifeboat.dev/lifeboat/internal/record"
	"lifeboat.dev/lifeboat/test/sandbox"
	"lifeboat.dev/lifeboat/test/sandbox/fakeaws"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// kindCase is one kind's notice in TestEveryKindReachesEveryConsumer: its node, its pod and,
// where its row says it answers one, its lifecycle action's token.
type kindCase struct {
	kind  notice.Kind
	rules notice.Rules
	node  *corev1.Node
	id    string // the instance
	token string
	n     notice.Notice
}

// TestEveryKindReachesEveryConsumer gives the controller one notice of every kind in the
// table, each on a node of its own with a pod, and reads what happened from the API server
// and the fake AWS: the cordon, the taint, the drain and what ends the notice (a completed
// hook, an Unhealthy mark, a repair, nothing). What is expected is read from the kind's row
// only, so a kind whose behaviour is decided elsewhere than in its row fails here, and a kind
// added to the table is tried without a line of this test changing.
func TestEveryKindReachesEveryConsumer(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, _ := sandboxtest.Shared(t, sandbox.ClusterOptions{})
	q := sandboxtest.SQS(t, sandbox.SQSOptions{Queues: []string{"kinds"}, VisibilityTimeout: 5})
	fake := sandboxtest.FakeAWS(t, q.Endpoint)
	if err := c.EnsureNamespace(ctx, "shop"); err != nil {
		t.Fatal(err)
	}
	fake.AddLifecycleHook(fakeaws.LifecycleHook{Name: "drain", AutoScalingGroup: "workers"})
	fake.AddLifecycleHook(fakeaws.LifecycleHook{Name: "launch", AutoScalingGroup: "workers", Transition: "autoscaling:EC2_INSTANCE_LAUNCHING"})
	cases := kindCases(t, ctx, c, fake)

	cfg := sandboxtest.Config(t, config.ModeController, "ENABLE_SQS_TERMINATION_DRAINING", "true", "QUEUE_URL", q.QueueURLs["kinds"],
		"AWS_REGION", "us-east-1", "AWS_ENDPOINT", fake.URL(), "CLUSTER_NAME", "sandbox", "TAINT_NODE", "true",
		"ENABLE_INSTANCE_STATUS_DRAINING", "true", "SET_IMPAIRED_INSTANCE_UNHEALTHY", "true",
		"ENABLE_NODE_REPAIR", "true", "NODE_REPAIR_ACTION", config.RepairTerminate, "NODE_REPAIR_MAX_UNHEALTHY_PERCENT", "100")
	awsCfg := sandboxtest.AWSConfig(fake.URL())
	logs := &sandboxtest.LogBuffer{}
	ctl := New(Options{Config: cfg, Client: c.Client, Queue: awssqs.NewFromConfig(awsCfg), EC2: controlleronly.NewAWSEC2(awsCfg),
		AutoScaling: cloud.NewAWSAutoScaling(awsCfg), Logger: slog.New(slog.NewTextHandler(logs, nil))})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- ctl.Run(runCtx) }()
	defer func() {
		stop()
		<-done
		if t.Failed() {
			t.Logf("controller log:\n%s", logs.String())
		}
	}()
	w := waitWorking(t, ctx, ctl)
	for _, kc := range cases {
		if fate := ctl.notices.handleNotice(ctx, w.resolver, kc.n, ctl.log); fate != noticeDone {
			t.Errorf("%s: notice fate %v, want done", kc.kind, fate)
		}
	}
	for _, kc := range cases {
		t.Run(string(kc.kind), func(t *testing.T) {
			got := waitFinished(t, ctx, c, kc)
			checkNodeAsRowSays(t, ctx, c, kc, got)
			checkEndAsRowSays(t, fake, kc)
		})
	}
}

// kindCases makes a node, an instance and a pod for every kind, and the kind's notice as its
// first source other than instance metadata (the agent's) would give it.
func kindCases(t *testing.T, ctx context.Context, c *sandbox.Cluster, fake *fakeaws.Server) []kindCase {
	t.Helper()
	tags := map[string]string{"aws-node-termination-handler/managed": "", "kubernetes.io/cluster/sandbox": "owned"}
	var cases []kindCase
	for i, k := range notice.Kinds() {
		rules, _ := notice.RulesOf(k)
		spec := sandbox.NodeSpec{Index: 40 + i}
		added, err := c.AddNodes(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		kc := kindCase{kind: k, rules: rules, node: added[0], id: ownership.InstanceIDFromProviderID(spec.ProviderID())}
		fake.AddInstance(fakeaws.Instance{ID: kc.id, PrivateDNSName: kc.node.Name, PrivateIP: fmt.Sprintf("10.0.0.%d", 40+i), AutoScalingGroup: "workers", Tags: tags})
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "app-" + kc.node.Name},
			Spec: corev1.PodSpec{NodeName: kc.node.Name, Containers: []corev1.Container{{Name: "c", Image: "img"}}}}
		if _, err := c.Client.CoreV1().Pods("shop").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		kc.n = kindNotice(t, kc)
		switch rules.Hook {
		case notice.HookTermination:
			kc.token = "token-" + string(k)
			fake.BeginLifecycleAction("drain", "workers", kc.id, kc.token)
			kc.n.Lifecycle = &notice.Lifecycle{Group: "workers", Hook: "drain"}
		case notice.HookLaunch:
			kc.token = "token-" + string(k)
			fake.BeginLifecycleAction("launch", "workers", kc.id, kc.token)
			kc.n.Lifecycle = &notice.Lifecycle{Group: "workers", Hook: "launch"}
		}
		cases = append(cases, kc)
	}
	return cases
}

// kindNotice is the kind's notice for the case's instance, due in 90 s: a scheduled kind's
// drain then begins at once (NODE_TERMINATION_GRACE_PERIOD is longer).
func kindNotice(t *testing.T, kc kindCase) notice.Notice {
	t.Helper()
	i := slices.IndexFunc(kc.rules.Sources, func(s notice.Source) bool { return s != notice.SourceIMDS })
	if i < 0 {
		t.Fatalf("%s: no source of the controller's in the row's sources %v", kc.kind, kc.rules.Sources)
	}
	now := time.Now()
	n := notice.Notice{ID: notice.ID(kc.kind, kc.id, "e1"), Kind: kc.kind, Source: kc.rules.Sources[i], InstanceID: kc.id,
		Deadline: now.Add(90 * time.Second), Announced: now, Description: kc.rules.Title + " for the table's test"}
	if n.Source == notice.SourceNodeCondition {
		n.Node = kc.node.Name
	}
	if kc.rules.Scheduled {
		n.StartTime, n.Action = n.Deadline, "instance-stop"
	}
	return n
}

// waitWorking waits until the controller's work loop takes nodes, and returns what it runs on.
func waitWorking(t *testing.T, ctx context.Context, ctl *Controller) *warm {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return ctl.working.Load() && ctl.warmed.Load() != nil, nil
	})
	if err != nil {
		t.Fatal("the controller's work loop never started")
	}
	return ctl.warmed.Load()
}

// waitFinished waits until the notice is recorded finished on its node (a kind never
// recorded: until its hook is completed), and returns the node.
func waitFinished(t *testing.T, ctx context.Context, c *sandbox.Cluster, kc kindCase) *corev1.Node {
	t.Helper()
	var got *corev1.Node
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		if got, err = c.Client.CoreV1().Nodes().Get(ctx, kc.node.Name, metav1.GetOptions{}); err != nil {
			return false, err
		}
		if !kc.kind.Recorded() {
			return true, nil
		}
		r, err := record.Read(got)
		return err == nil && slices.Contains(r.Finished, kc.n.ID), nil
	})
	if err != nil {
		t.Fatalf("the notice %s was never recorded finished on %s: %v", kc.n.ID, kc.node.Name, err)
	}
	return got
}

// checkNodeAsRowSays: a recorded kind cordons, taints with its row's key, and drains its pod
// when its row drains (an opt-in drain does from the queue); a launch hook's node is left alone.
func checkNodeAsRowSays(t *testing.T, ctx context.Context, c *sandbox.Cluster, kc kindCase, got *corev1.Node) {
	t.Helper()
	recorded := kc.kind.Recorded()
	if got.Spec.Unschedulable != recorded {
		t.Errorf("node cordoned %v, want %v", got.Spec.Unschedulable, recorded)
	}
	tainted := slices.ContainsFunc(got.Spec.Taints, func(taint corev1.Taint) bool { return taint.Key == kc.rules.TaintKey })
	if want := recorded && kc.rules.TaintKey != ""; tainted != want {
		t.Errorf("taint %q on the node: %v, want %v (taints %v)", kc.rules.TaintKey, tainted, want, got.Spec.Taints)
	}
	if !recorded && got.Annotations[record.Annotation] != "" {
		t.Errorf("a kind never recorded left a record: %s", got.Annotations[record.Annotation])
	}
	pod, err := c.Client.CoreV1().Pods("shop").Get(ctx, "app-"+kc.node.Name, metav1.GetOptions{})
	evicted := apierrors.IsNotFound(err) || err == nil && pod.DeletionTimestamp != nil
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	if want := recorded && (kc.rules.Drains || kc.rules.DrainOptIn && kc.n.Source == notice.SourceQueue); evicted != want {
		t.Errorf("pod evicted %v, want %v", evicted, want)
	}
}

// checkEndAsRowSays: what the fake AWS was asked for the instance is what the row's Ends says,
// and nothing else.
func checkEndAsRowSays(t *testing.T, fake *fakeaws.Server, kc kindCase) {
	t.Helper()
	completed := false
	if kc.token != "" {
		var result string
		result, completed, _, _ = fake.LifecycleAction(kc.token)
		if completed && result != "CONTINUE" {
			t.Errorf("lifecycle action completed with %s, want CONTINUE", result)
		}
	}
	if want := kc.rules.Ends == notice.EndsHookCompleted || kc.rules.Hook == notice.HookLaunch; completed != want {
		t.Errorf("lifecycle action completed %v, want %v", completed, want)
	}
	if marks, want := fake.UnhealthyMarks(kc.id), kc.rules.Ends == notice.EndsMarkedUnhealthy; (marks > 0) != want || marks > 1 {
		t.Errorf("%d Unhealthy marks; the row says the instance is marked once: %v", marks, want)
	}
	if ends, want := fake.Terminations(kc.id), kc.rules.Ends == notice.EndsRepaired; (ends > 0) != want || ends > 1 {
		t.Errorf("%d terminations (NODE_REPAIR_ACTION=terminate); the row says the instance is repaired once: %v", ends, want)
	}
}
