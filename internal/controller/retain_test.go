// SPDX-License-Identifier: Apache-2.0

package controller_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

// retainedHook is a held hook (see newHeldHook) whose lifecycle action expires timeout after
// its message, with ABANDON_LIFECYCLE_ACTION_ON_INCOMPLETE_DRAIN set, and group "workers" retaining
// abandoned instances or not.
type retainedHook struct {
	heldHook
	t       *testing.T
	ctx     context.Context
	token   string
	cfg     *config.Config
	m       *metrics.Metrics
	logs    *sandboxtest.LogBuffer
	cancel  context.CancelFunc
	sent    time.Time // when the hook's message was sent, about
	timeout time.Duration
}

func newRetainedHook(t *testing.T, retain bool, timeout time.Duration, settings ...string) *retainedHook {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	const token = "3c9a7e1f-0b2d-4c6e-8f1a-2b3c4d5e6f70"
	held := newHeldHook(t, ctx, token) // sends the hook's message last
	h := &retainedHook{heldHook: held, t: t, ctx: ctx, token: token, m: metrics.New(), logs: &sandboxtest.LogBuffer{}, cancel: cancel, sent: time.Now()}
	h.fake.AddLifecycleHook(fakeaws.LifecycleHook{Name: "drain", AutoScalingGroup: "workers", HeartbeatTimeout: int(timeout.Seconds())})
	h.timeout = timeout
	if retain {
		h.fake.SetRetainOnAbandon("workers", true)
	}
	env := append([]string{"ENABLE_SQS_TERMINATION_DRAINING", "true", "QUEUE_URL", h.queueURL,
		"AWS_REGION", "us-east-1", "AWS_ENDPOINT", h.fake.URL(), "SQS_MSG_VISIBILITY_TIMEOUT_SEC", "2",
		"EMIT_KUBERNETES_EVENTS", "true", "ABANDON_LIFECYCLE_ACTION_ON_INCOMPLETE_DRAIN", "true"}, settings...)
	h.cfg = sandboxtest.Config(t, config.ModeController, env...)
	return h
}

func (h *retainedHook) start() (stop func()) {
	return startController(h.t, h.ctx, h.c, h.awsCfg, h.queue, h.cfg, "lifeboat", h.m, h.logs, nil)
}

func (h *retainedHook) waitFor(what string, timeout time.Duration, cond func() bool) {
	h.t.Helper()
	if err := wait.PollUntilContextTimeout(h.ctx, 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) { return cond(), nil }); err != nil {
		h.t.Fatalf("%s: %v", what, err)
	}
}

func (h *retainedHook) record() record.Record {
	h.t.Helper()
	n, err := h.c.Client.CoreV1().Nodes().Get(h.ctx, h.node.Name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	r, err := record.Read(n)
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

// eventsWritten waits until the node has an Event of the reason, then returns them all: Events
// are written in the background lane, after the record that the test saw change.
func (h *retainedHook) eventsWritten(reason string) []string {
	h.t.Helper()
	h.waitFor("the "+reason+" Event", 10*time.Second, func() bool { return len(h.events(reason)) > 0 })
	return h.events(reason)
}

func (h *retainedHook) events(reason string) []string {
	h.t.Helper()
	list, err := h.c.Client.CoreV1().Events("").List(h.ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("involvedObject.name", h.node.Name).String()})
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		if e.Reason == reason {
			out = append(out, e.Message)
		}
	}
	return out
}

func (h *retainedHook) result() string {
	result, _, _, _ := h.fake.LifecycleAction(h.token)
	return result
}

func (h *retainedHook) terminations() []fakeaws.Call {
	var out []fakeaws.Call
	for _, c := range h.fake.Calls() {
		if c.Service == "autoscaling" && c.Action == "TerminateInstanceInAutoScalingGroup" {
			out = append(out, c)
		}
	}
	return out
}

func (h *retainedHook) podGone() bool {
	_, err := h.c.Client.CoreV1().Pods("db").Get(h.ctx, "primary", metav1.GetOptions{})
	return apierrors.IsNotFound(err)
}

func (h *retainedHook) retainedAbandoned() {
	h.t.Helper()
	h.waitFor("the lifecycle action abandoned as it neared its expiry", 60*time.Second, func() bool { return h.result() != "" })
	if got := h.result(); got != "ABANDON" {
		h.t.Fatalf("the lifecycle action was completed with %s, want ABANDON", got)
	}
	h.waitFor("the retention recorded on the node", 10*time.Second, func() bool { return h.record().Retained != nil })
	if _, state, _ := h.fake.InstanceState(h.instance); state != "Terminating:Retained" {
		h.t.Errorf("the instance is %s after the ABANDON, want Terminating:Retained", state)
	}
	r := h.record().Retained
	if r.Group != "workers" || len(r.Notices) != 1 || !r.Terminated.IsZero() {
		h.t.Errorf("retention %+v, want group workers, the hook's notice, not terminated", r)
	}
	// Abandoned shortly before the action's expiry, not at the first refusal: the drain had the
	// action's time first.
	if at := r.Since.Sub(h.sent); at < h.timeout-14*time.Second || at > h.timeout+time.Second {
		h.t.Errorf("abandoned %v after the message, want shortly before the action expires %v after it", at, h.timeout)
	}
}

// TestAbandonedHookRetainedThenTerminated: a termination hook whose drain a budget holds past
// the action's expiry, in a group that retains abandoned instances, is completed with ABANDON
// shortly before it expires; the instance stays retained while the pod is held; once the
// budget is lifted and the pod gone, Lifeboat terminates the instance itself, exactly once and
// without lowering the group's desired capacity, records it, and finishes the notice.
func TestAbandonedHookRetainedThenTerminated(t *testing.T) {
	t.Parallel()
	h := newRetainedHook(t, true, 18*time.Second)
	stop := h.start()
	defer stop()
	h.retainedAbandoned()
	// Events are sent in the background: wait for the first.
	h.waitFor("the InstanceRetained Event", 10*time.Second, func() bool { return len(h.events(events.ReasonInstanceRetained)) > 0 })
	if got := len(h.events(events.ReasonInstanceRetained)); got != 1 {
		t.Errorf("%d InstanceRetained Events, want 1", got)
	}
	// Held past the action's expiry: nothing is forced, nothing terminated.
	time.Sleep(3 * time.Second)
	if h.podGone() || len(h.terminations()) != 0 {
		t.Fatalf("while the pod is held: pod gone %v, %d terminations", h.podGone(), len(h.terminations()))
	}

	h.lift()
	h.waitFor("the retained instance terminated once drained", 60*time.Second, func() bool { return len(h.terminations()) > 0 })
	if !h.podGone() {
		t.Error("the instance was terminated with its pod still on the node")
	}
	call := h.terminations()[0]
	if call.Params.Get("InstanceId") != h.instance || call.Params.Get("ShouldDecrementDesiredCapacity") != "false" {
		t.Errorf("TerminateInstanceInAutoScalingGroup %v, want instance %s without decrementing", call.Params, h.instance)
	}
	h.waitFor("the notice finished", 15*time.Second, func() bool {
		r := h.record()
		return r.Phase == record.PhaseDrained && len(r.Finished) == 1
	})
	if r := h.record().Retained; r == nil || r.Terminated.IsZero() {
		t.Errorf("retention %+v, want the termination recorded", r)
	}
	time.Sleep(3 * time.Second)
	if n := len(h.terminations()); n != 1 {
		t.Errorf("%d TerminateInstanceInAutoScalingGroup calls, want exactly 1", n)
	}
	if n := h.fake.CallCount("autoscaling", "CompleteLifecycleAction"); n != 1 {
		t.Errorf("%d CompleteLifecycleAction calls, want the ABANDON only", n)
	}
	if got := h.m.Value("lifeboat_retained_instances_total", "event", metrics.RetainedTerminated); got != 1 {
		t.Errorf("lifeboat_retained_instances_total{event=terminated} = %v, want 1", got)
	}
	if ev := h.eventsWritten(events.ReasonRetainedTerminate); len(ev) != 1 || !strings.Contains(ev[0], h.instance) {
		t.Errorf("RetainedInstanceTerminated Events %q, want one naming the instance", ev)
	}
	if !strings.Contains(h.logs.String(), "the group retains abandoned instances") {
		t.Error("the log does not say which behaviour the group's policy gives")
	}
}

// TestHookWithoutRetentionContinues: the same held hook in a group without an instance
// lifecycle policy is never abandoned (ABANDON would terminate the instance at once): the
// action stays open past its expiry as without the setting, and is completed with CONTINUE
// once the budget is lifted and the node drained; nothing is terminated by Lifeboat.
func TestHookWithoutRetentionContinues(t *testing.T) {
	t.Parallel()
	h := newRetainedHook(t, false, 12*time.Second)
	stop := h.start()
	defer stop()
	h.waitFor("the group's policy read", 30*time.Second, func() bool {
		return h.fake.CallCount("autoscaling", "DescribeAutoScalingGroups") > 0
	})
	// Past the action's expiry with the pod held.
	time.Sleep(time.Until(h.sent.Add(h.timeout + 2*time.Second)))
	if _, completed, _, _ := h.fake.LifecycleAction(h.token); completed {
		t.Fatalf("the lifecycle action was completed with %s while its pod was held", h.result())
	}
	if h.record().Retained != nil {
		t.Error("a retention was recorded for a group that does not retain")
	}
	h.lift()
	h.waitFor("the lifecycle action completed after the drain", 60*time.Second, func() bool { return h.result() != "" })
	if got := h.result(); got != "CONTINUE" {
		t.Errorf("completed with %s, want CONTINUE", got)
	}
	if n := len(h.terminations()); n != 0 {
		t.Errorf("%d TerminateInstanceInAutoScalingGroup calls, want none", n)
	}
	if !strings.Contains(h.logs.String(), "the group does not retain abandoned instances") {
		t.Error("the log does not say which behaviour the group's policy gives")
	}
}

// TestRetainedTerminationRefusedByTheGate: after the hook was abandoned and the controller
// stopped, the node's record is forged to name another group (as a node credential could);
// a new controller takes the retention up from the record, drains the node once the budget is
// lifted, and then makes no TerminateInstanceInAutoScalingGroup call: the instance gate
// refuses it, which is reported, and the retention stops.
func TestRetainedTerminationRefusedByTheGate(t *testing.T) {
	t.Parallel()
	h := newRetainedHook(t, true, 18*time.Second)
	stop := h.start()
	h.retainedAbandoned()
	stop()

	forge := func(n *corev1.Node) {
		raw := n.Annotations[record.Annotation]
		n.Annotations[record.Annotation] = strings.ReplaceAll(raw, `"workers"`, `"elsewhere"`)
	}
	n, err := h.c.Client.CoreV1().Nodes().Get(h.ctx, h.node.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	forge(n)
	if _, err := h.c.Client.CoreV1().Nodes().Update(h.ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if r := h.record().Retained; r == nil || r.Group != "elsewhere" {
		t.Fatalf("forged retention %+v", r)
	}
	h.lift()
	stop = h.start()
	defer stop()
	h.waitFor("the pod drained by the new controller", 60*time.Second, h.podGone)
	h.waitFor("the refused termination recorded", 30*time.Second, func() bool {
		r := h.record().Retained
		return r != nil && !r.Stopped.IsZero()
	})
	if r := h.record().Retained; !strings.Contains(r.Why, "refused") || !r.Terminated.IsZero() {
		t.Errorf("retention %+v, want stopped for a refused termination", r)
	}
	time.Sleep(2 * time.Second)
	if n := len(h.terminations()); n != 0 {
		t.Errorf("%d TerminateInstanceInAutoScalingGroup calls, want none", n)
	}
	if got := h.m.Value("lifeboat_instance_calls_refused_total", "call", "TerminateInstanceInAutoScalingGroup"); got != 1 {
		t.Errorf("refused terminations counted %v, want 1", got)
	}
	if ev := h.eventsWritten(events.ReasonInstanceCallRefused); len(ev) == 0 || !strings.Contains(ev[0], "elsewhere") {
		t.Errorf("InstanceCallRefused Events %q, want one naming the forged group", ev)
	}
}

// TestRetainedDrainTimeout: a retained node whose pod stays held past RETAINED_DRAIN_TIMEOUT is
// reported (Warning Event, metric, log) and left alone: no termination with the pod on it, no
// further drains.
func TestRetainedDrainTimeout(t *testing.T) {
	t.Parallel()
	h := newRetainedHook(t, true, 18*time.Second, "RETAINED_DRAIN_TIMEOUT", "10s")
	stop := h.start()
	defer stop()
	h.retainedAbandoned()
	h.waitFor("the retained drain stopped at its timeout", 40*time.Second, func() bool {
		r := h.record().Retained
		return r != nil && !r.Stopped.IsZero()
	})
	if r := h.record().Retained; !strings.Contains(r.Why, "RETAINED_DRAIN_TIMEOUT") || r.Stopped.Before(r.Until) {
		t.Errorf("retention %+v, want stopped at its end for the timeout", r)
	}
	if ev := h.eventsWritten(events.ReasonRetentionExpired); len(ev) != 1 || !strings.Contains(ev[0], h.instance) {
		t.Errorf("RetainedDrainTimedOut Events %q, want one naming the instance", ev)
	}
	if got := h.m.Value("lifeboat_retained_instances_total", "event", metrics.RetainedExpired); got != 1 {
		t.Errorf("lifeboat_retained_instances_total{event=expired} = %v, want 1", got)
	}
	evictions := h.m.Value("lifeboat_evictions_total")
	time.Sleep(5 * time.Second)
	if h.podGone() || len(h.terminations()) != 0 {
		t.Errorf("after the timeout: pod gone %v, %d terminations; want the pod and the instance left as they are", h.podGone(), len(h.terminations()))
	}
	if got := h.m.Value("lifeboat_evictions_total"); got != evictions {
		t.Errorf("evictions went on after the timeout: %v, then %v", evictions, got)
	}
	if !strings.Contains(h.logs.String(), "RETAINED_DRAIN_TIMEOUT passed") {
		t.Error("the log does not say the retained drain stopped")
	}
}

// TestForgedRetentionTerminatesNothing: a node credential copies a retained record onto its
// own Node, naming its own instance, which is InService in the same group. The record is
// consistent and the instance gate passes (the node is the instance, in the group), but Auto
// Scaling does not report the instance retained: no TerminateInstanceInAutoScalingGroup is
// made for it, and the refusal is reported.
func TestForgedRetentionTerminatesNothing(t *testing.T) {
	t.Parallel()
	h := newRetainedHook(t, true, 18*time.Second)
	stop := h.start()
	defer stop()
	h.retainedAbandoned()

	added, err := h.c.AddNodes(h.ctx, sandbox.NodeSpec{Index: 2})
	if err != nil {
		t.Fatal(err)
	}
	forger := added[0]
	forgerInstance := ownership.InstanceIDFromProviderID(forger.Spec.ProviderID)
	h.fake.AddInstance(fakeaws.Instance{ID: forgerInstance, PrivateDNSName: forger.Name, AutoScalingGroup: "workers",
		Tags: map[string]string{"aws-node-termination-handler/managed": ""}})
	if _, state, _ := h.fake.InstanceState(forgerInstance); state != "InService" {
		t.Fatalf("the forger's instance is %s, want InService", state)
	}
	victim, err := h.c.Client.CoreV1().Nodes().Get(h.ctx, h.node.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var forged record.Record
	raw := strings.ReplaceAll(victim.Annotations[record.Annotation], h.instance, forgerInstance)
	if err := json.Unmarshal([]byte(raw), &forged); err != nil {
		t.Fatal(err)
	}
	forged.Owner, forged.Heartbeat, forged.BootID = nil, nil, forger.Status.NodeInfo.BootID
	out, _ := json.Marshal(forged)
	patch, _ := json.Marshal(map[string]any{
		"metadata": map[string]any{"annotations": map[string]string{record.Annotation: string(out)}},
		"spec":     map[string]any{"unschedulable": true},
	})
	rc, err := h.c.UserConfig("system:node:"+forger.Name, "system:nodes")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kubernetes.NewForConfigOrDie(rc).CoreV1().Nodes().Patch(h.ctx, forger.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("the forger's node credential could not write its own Node: %v", err)
	}

	h.waitFor("the forged retention stopped as refused", 30*time.Second, func() bool {
		n, err := h.c.Client.CoreV1().Nodes().Get(h.ctx, forger.Name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		r, err := record.Read(n)
		return err == nil && r.Retained != nil && !r.Retained.Stopped.IsZero()
	})
	time.Sleep(2 * time.Second)
	for _, c := range h.terminations() {
		if c.Params.Get("InstanceId") == forgerInstance {
			t.Fatalf("TerminateInstanceInAutoScalingGroup was called for the InService instance %s on a forged record", forgerInstance)
		}
	}
	if got := h.m.Value("lifeboat_instance_calls_refused_total", "call", "TerminateInstanceInAutoScalingGroup"); got != 1 {
		t.Errorf("refused terminations counted %v, want 1", got)
	}
	list, err := h.c.Client.CoreV1().Events("").List(h.ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("involvedObject.name", forger.Name).String()})
	if err != nil {
		t.Fatal(err)
	}
	var said bool
	for _, e := range list.Items {
		said = said || e.Reason == events.ReasonInstanceCallRefused && strings.Contains(e.Message, "InService")
	}
	if !said {
		t.Error("no InstanceCallRefused Event on the forger's node says Auto Scaling reports the instance InService")
	}
}
