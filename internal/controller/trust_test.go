// SPDX-License-Identifier: Apache-2.0

package controller_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

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

// TestForgedRecordCompletesNoOtherInstance is the attack of a stolen node credential: the
// compromised node copies another node's record (a termination hook held by a disruption
// budget) onto its own Node and cordons itself, hoping the controller completes the other
// instance's lifecycle action once the compromised node is drained. Then it forges a record
// naming its own instance in another Auto Scaling group. Neither makes any lifecycle call; the
// victim's action is completed once, after its own drain; the token is nowhere to be read.
func TestForgedRecordCompletesNoOtherInstance(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const token = "6f1d3c2a-9b8e-4d7f-a1c0-5e4b3a2f1d0c"
	h := newHeldHook(t, ctx, token) // the victim: its drain is held by a budget until lift
	c, fake, queue, queueURL, awsCfg, victim, victimInstance := h.c, h.fake, h.queue, h.queueURL, h.awsCfg, h.node, h.instance
	added, err := c.AddNodes(ctx, sandbox.NodeSpec{Index: 2})
	if err != nil {
		t.Fatal(err)
	}
	attacker := added[0]
	attackerInstance := ownership.InstanceIDFromProviderID(attacker.Spec.ProviderID)
	fake.AddInstance(fakeaws.Instance{ID: attackerInstance, PrivateDNSName: attacker.Name, AutoScalingGroup: "workers",
		Tags: map[string]string{"aws-node-termination-handler/managed": ""}})
	// Pending actions a wrong call would complete: the attacker's own instance in the group its
	// forged record names (the fake does not check membership, Auto Scaling's answer does).
	fake.AddLifecycleHook(fakeaws.LifecycleHook{Name: "drain", AutoScalingGroup: "other"})
	fake.BeginLifecycleAction("drain", "other", attackerInstance, "token-attacker")

	cfg := sandboxtest.Config(t, config.ModeController, "ENABLE_SQS_TERMINATION_DRAINING", "true", "QUEUE_URL", queueURL,
		"AWS_REGION", "us-east-1", "AWS_ENDPOINT", fake.URL(), "SQS_MSG_VISIBILITY_TIMEOUT_SEC", "2",
		"TAINT_NODE", "true", "EMIT_KUBERNETES_EVENTS", "true")
	logs := &sandboxtest.LogBuffer{}
	m := metrics.New()
	stop := startController(t, ctx, c, awsCfg, queue, cfg, "lifeboat", m, logs, nil)
	defer stop()
	defer func() {
		if t.Failed() {
			t.Logf("controller logs:\n%s", logs.String())
		}
	}()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 45*time.Second, true, func(context.Context) (bool, error) { return cond(), nil }); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	node := func(name string) *corev1.Node {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	waitFor("the victim's drain to start", func() bool {
		r, _ := record.Read(node(victim.Name))
		return r.Phase == record.PhaseDraining && len(r.Intents) == 1
	})

	// The attacker writes with its own node's credential (the Node authorizer lets a kubelet
	// write its own Node).
	rc, err := c.UserConfig("system:node:"+attacker.Name, "system:nodes")
	if err != nil {
		t.Fatal(err)
	}
	asAttacker := kubernetes.NewForConfigOrDie(rc)
	forge := func(raw string) {
		t.Helper()
		patch, _ := json.Marshal(map[string]any{
			"metadata": map[string]any{"annotations": map[string]string{record.Annotation: raw}},
			"spec":     map[string]any{"unschedulable": true},
		})
		if _, err := asAttacker.CoreV1().Nodes().Patch(ctx, attacker.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatalf("the attacker's node credential could not write its own Node: %v", err)
		}
	}
	stolen := node(victim.Name).Annotations[record.Annotation]
	forge(stolen)
	waitFor("a Warning Event on the attacker's node about its record", func() bool {
		return nodeEventReasons(t, ctx, c, attacker.Name)[events.ReasonInvalidRecord] > 0
	})

	// Its own instance, in a group it is not in.
	var own record.Record
	if err := json.Unmarshal([]byte(stolen), &own); err != nil {
		t.Fatal(err)
	}
	own.Owner, own.Heartbeat, own.BootID = nil, nil, node(attacker.Name).Status.NodeInfo.BootID
	for i := range own.Intents {
		own.Intents[i].InstanceID = attackerInstance
		own.Intents[i].Lifecycle.Group = "other"
	}
	forged, _ := json.Marshal(own)
	forge(string(forged))
	waitFor("the lifecycle call for the attacker's instance refused", func() bool {
		return nodeEventReasons(t, ctx, c, attacker.Name)[events.ReasonInstanceCallRefused] > 0
	})
	if got := m.Value("lifeboat_instance_calls_refused_total", "call", "CompleteLifecycleAction"); got != 1 {
		t.Errorf("lifeboat_instance_calls_refused_total{call=CompleteLifecycleAction} = %v, want 1", got)
	}
	if got := m.Value("lifeboat_invalid_records_total"); got != 1 {
		t.Errorf("lifeboat_invalid_records_total = %v, want 1", got)
	}
	if !strings.Contains(logs.String(), "nodeInstance="+attackerInstance) {
		t.Error("no log line names both instances of the refused call")
	}
	if _, completed, _, _ := fake.LifecycleAction("token-attacker"); completed {
		t.Error("the forged record completed the attacker's own lifecycle action in a group its instance is not in")
	}
	if _, completed, _, _ := fake.LifecycleAction(token); completed {
		t.Fatal("the victim's lifecycle action was completed while its drain was still held")
	}

	h.lift()
	waitFor("the victim's lifecycle action completed after its drain", func() bool {
		_, completed, _, _ := fake.LifecycleAction(token)
		return completed
	})
	if n := fake.CallCount("autoscaling", "CompleteLifecycleAction"); n != 1 {
		t.Errorf("%d CompleteLifecycleAction calls, want 1 (the victim's)", n)
	}
	for _, call := range fake.Calls() {
		if call.Action == "CompleteLifecycleAction" && call.Params.Get("InstanceId") != victimInstance {
			t.Errorf("CompleteLifecycleAction named %q, want only the victim's instance %s", call.Params.Get("InstanceId"), victimInstance)
		}
		if call.Params.Get("LifecycleActionToken") != "" {
			t.Errorf("%s sent a lifecycle action token; actions are completed by instance id", call.Action)
		}
	}

	// The token (or its first part, which older ids carried) is nowhere to be read.
	secret := token[:8]
	for _, n := range []*corev1.Node{node(victim.Name), node(attacker.Name)} {
		for k, v := range n.Annotations {
			if strings.Contains(v, secret) {
				t.Errorf("node %s annotation %s holds the token: %s", n.Name, k, v)
			}
		}
		for _, taint := range n.Spec.Taints {
			if strings.Contains(taint.Value, secret) {
				t.Errorf("node %s taint %s holds the token: %s", n.Name, taint.Key, taint.Value)
			}
		}
	}
	list, err := c.Client.CoreV1().Events("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range list.Items {
		if strings.Contains(e.Message, secret) || strings.Contains(e.Name, secret) {
			t.Errorf("Event %s (%s) holds the token: %s", e.Name, e.Reason, e.Message)
		}
	}
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, secret) {
			t.Errorf("a log line holds the token: %s", line)
		}
	}
}

// nodeEventReasons counts the Events on the node by reason.
func nodeEventReasons(t *testing.T, ctx context.Context, c *sandbox.Cluster, node string) map[string]int {
	t.Helper()
	list, err := c.Client.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("involvedObject.name", node).String()})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, e := range list.Items {
		got[e.Reason] += max(int(e.Count), 1)
	}
	return got
}
