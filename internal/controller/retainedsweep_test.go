// SPDX-License-Identifier: Apache-2.0

package controller_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"lifeboat.dev/lifeboat/internal/controller"
	"lifeboat.dev/lifeboat/internal/episode"
	"lifeboat.dev/lifeboat/internal/events"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/test/sandbox/fakeaws"
)

// Auto Scaling retains instances whose termination hook timed out (group "workers" retains
// abandoned instances). The sweep finds them in the groups of this cluster's nodes:
//   - drained: node A, whose hook message came and whose drain finished after the timeout;
//   - gone: instance C, this cluster's by its tags, whose Node was deleted;
//
// are terminated; node B, whose pods still run, is reported (Warning Event, metric); another
// cluster's instance D, and the instance of empty node E that lacks this cluster's tag, are
// left alone.
func TestRetainedInstancesSwept(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := newIntakeWorld(t, ctx, 3)
	a, b, e := w.nodes[0], w.nodes[1], w.nodes[2]
	const gone, foreignRetained = "i-0c0ffee0000000c01", "i-0c0ffee0000000d01"
	for _, n := range w.nodes[:2] {
		w.fake.AddInstance(fakeaws.Instance{ID: episode.InstanceIDOf(n), PrivateDNSName: n.Name, Tags: ourTags, AutoScalingGroup: "workers"})
	}
	w.fake.AddInstance(fakeaws.Instance{ID: episode.InstanceIDOf(e), PrivateDNSName: e.Name, AutoScalingGroup: "workers",
		Tags: map[string]string{"aws-node-termination-handler/managed": ""}})
	zero := int64(0)
	if err := w.c.Client.CoreV1().Pods("shop").Delete(ctx, "app-"+e.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	w.fake.AddInstance(fakeaws.Instance{ID: gone, PrivateDNSName: "ip-10-0-9-1.ec2.internal", Tags: ourTags, AutoScalingGroup: "workers"})
	w.fake.AddInstance(fakeaws.Instance{ID: foreignRetained, PrivateDNSName: "ip-10-0-9-2.ec2.internal", AutoScalingGroup: "workers",
		Tags: map[string]string{"aws-node-termination-handler/managed": "", "kubernetes.io/cluster/other": "owned"}})
	w.fake.AddLifecycleHook(fakeaws.LifecycleHook{Name: "drain", AutoScalingGroup: "workers", HeartbeatTimeout: 300})
	w.fake.SetRetainOnAbandon("workers", true)
	for _, id := range []string{episode.InstanceIDOf(a), episode.InstanceIDOf(b), episode.InstanceIDOf(e), gone, foreignRetained} {
		w.fake.BeginLifecycleAction("drain", "workers", id, "tok-"+id)
		if !w.fake.TimeOutLifecycleAction("tok-" + id) {
			t.Fatalf("no action for %s", id)
		}
	}
	// A's hook message comes late: its drain runs after the action timed out.
	w.send(t, ctx, fakeaws.TerminateLifecycleAction("workers", "drain", episode.InstanceIDOf(a), "tok-"+episode.InstanceIDOf(a), time.Now()))
	w.wire = func(o *controller.Options) { o.RetainedSweepEvery = 500 * time.Millisecond }
	w.run(t, ctx, "ABANDON_LIFECYCLE_ACTION_ON_INCOMPLETE_DRAIN", "true")
	w.waitDrained(t, ctx, a, notice.ID(notice.ASGTermination, episode.InstanceIDOf(a), notice.TokenDigest("tok-"+episode.InstanceIDOf(a))))

	terminated := func(id string) bool { state, _, _ := w.fake.InstanceState(id); return state == "terminated" }
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return terminated(episode.InstanceIDOf(a)) && terminated(gone) &&
			w.metrics.Value("lifeboat_retained_instances_total", "event", "busy") == 1, nil
	})
	if err != nil {
		t.Fatalf("retained instances not swept: A terminated %v, C terminated %v, busy %v: %v\n%s", terminated(episode.InstanceIDOf(a)), terminated(gone),
			w.metrics.Value("lifeboat_retained_instances_total", "event", "busy"), err, w.logs.String())
	}
	// A few more passes: each asks for the groups once.
	sweeps := w.fake.CallCount("autoscaling", "DescribeAutoScalingGroups")
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return w.fake.CallCount("autoscaling", "DescribeAutoScalingGroups") >= sweeps+3, nil
	})
	if err != nil {
		t.Fatal("the sweep stopped passing")
	}
	if terminated(episode.InstanceIDOf(b)) || terminated(foreignRetained) || terminated(episode.InstanceIDOf(e)) {
		t.Errorf("terminated B (pods on it) %v, another cluster's instance %v, E (no cluster tag) %v", terminated(episode.InstanceIDOf(b)),
			terminated(foreignRetained), terminated(episode.InstanceIDOf(e)))
	}
	if !w.nodeEventReasons(t, ctx, b)[events.ReasonRetainedInstanceBusy] {
		t.Errorf("no %s Event on %s", events.ReasonRetainedInstanceBusy, b.Name)
	}
	if got := w.metrics.Value("lifeboat_retained_instances_total", "event", "swept"); got != 2 {
		t.Errorf("swept %v, want 2", got)
	}
	if got := w.metrics.Value("lifeboat_retained_instances_total", "event", "busy"); got != 1 {
		t.Errorf("busy reported %v times, want once", got)
	}
	if n := w.fake.CallCount("autoscaling", "TerminateInstanceInAutoScalingGroup"); n != 2 {
		t.Errorf("%d terminations, want 2", n)
	}
	t.Logf("DescribeAutoScalingGroups calls: %d", w.fake.CallCount("autoscaling", "DescribeAutoScalingGroups"))
}
