// SPDX-License-Identifier: Apache-2.0

package controller_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"lifeboat.dev/lifeboat/internal/episode"
	"lifeboat.dev/lifeboat/internal/nodecleanup"
	"lifeboat.dev/lifeboat/internal/ownership"
	"lifeboat.dev/lifeboat/test/sandbox"
	"lifeboat.dev/lifeboat/test/sandbox/fakeaws"
)

// With DELETE_NODE_AFTER_TERMINATION: the Node of a terminated instance is deleted; the Node
// of an instance seen shutting down is deleted once EC2 no longer describes it; a Node that
// EC2 does not describe its terminated instance as (another name, another address) is kept,
// with a Warning Event; a node whose kubelet still reports Ready is never looked at.
func TestNodeCleanup(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := newIntakeWorld(t, ctx, 4)
	gone, fading, impostor, alive := w.nodes[0], w.nodes[1], w.nodes[2], w.nodes[3]
	for _, n := range []*corev1.Node{gone, fading, impostor} {
		w.goDark(t, ctx, n)
	}
	w.fake.SetInstanceState(episode.InstanceIDOf(gone), "terminated")
	w.fake.SetInstanceState(episode.InstanceIDOf(fading), "shutting-down")
	w.fake.AddInstance(fakeaws.Instance{ID: episode.InstanceIDOf(impostor), PrivateDNSName: "ip-10-9-9-9.ec2.internal", PrivateIP: "10.9.9.9", Tags: ourTags, State: "terminated"})
	w.fake.SetInstanceState(episode.InstanceIDOf(alive), "terminated") // Ready: never looked at
	w.run(t, ctx, "DELETE_NODE_AFTER_TERMINATION", "true", "NODE_CLEANUP_INTERVAL", "1s")

	deleted := func(n *corev1.Node) bool {
		_, err := w.c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) { return deleted(gone), nil }); err != nil {
		t.Fatal("the terminated instance's Node was not deleted")
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		return w.node(t, ctx, fading).Annotations[nodecleanup.AnnotationGone] != "", nil
	})
	if err != nil {
		t.Fatal("the instance shutting down was not recorded on its Node")
	}
	if deleted(fading) {
		t.Fatal("the Node of an instance still shutting down was deleted")
	}
	w.fake.RemoveInstance(episode.InstanceIDOf(fading)) // EC2 forgets it
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) { return deleted(fading), nil }); err != nil {
		t.Fatal("the Node of an instance EC2 forgot, seen shutting down, was not deleted")
	}
	w.waitCleanupPasses(t, ctx, 2)
	if deleted(impostor) || deleted(alive) {
		t.Errorf("deleted: impostor %v, Ready node %v; want neither", deleted(impostor), deleted(alive))
	}
	if got := w.eventCountReaching(t, ctx, impostor, "NodeDeleteRefused", 1); got != 1 {
		t.Errorf("%d NodeDeleteRefused Events, want 1", got)
	}
	if got := w.metrics.Value("lifeboat_node_cleanup_total", "result", "deleted"); got != 2 {
		t.Errorf("lifeboat_node_cleanup_total{result=deleted} = %v, want 2", got)
	}
}

// The clean-up attack of a stolen kubelet credential: a Node registered without a providerID
// sets it to another Node's instance and stops reporting. When that instance is terminated,
// its real Node is deleted all the same, the claimant is kept, and a Warning Event on the
// claimant names the refused claim.
func TestNodeCleanupRefusesAClaimant(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := newIntakeWorld(t, ctx, 1)
	victim := w.nodes[0]
	added, err := w.c.AddNodes(ctx, sandbox.NodeSpec{Index: 20, NoProviderID: true})
	if err != nil {
		t.Fatal(err)
	}
	claimant := added[0]
	w.fake.AddInstance(fakeaws.Instance{ID: ownership.InstanceIDFromProviderID(sandbox.NodeSpec{Index: 20}.ProviderID()), PrivateDNSName: claimant.Name, Tags: ourTags})
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"providerID": victim.Spec.ProviderID}})
	if _, err := nodeCredential(t, w.c, claimant.Name).CoreV1().Nodes().Patch(ctx, claimant.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("the claimant's credential could not set its providerID: %v", err)
	}
	w.goDark(t, ctx, claimant)
	w.goDark(t, ctx, victim)
	w.fake.SetInstanceState(episode.InstanceIDOf(victim), "terminated")
	w.run(t, ctx, "DELETE_NODE_AFTER_TERMINATION", "true", "NODE_CLEANUP_INTERVAL", "1s")

	deleted := func(n *corev1.Node) bool {
		_, err := w.c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) { return deleted(victim), nil }); err != nil {
		t.Fatal("the terminated instance's Node was not deleted: the claimant hid it")
	}
	if got := w.eventCountReaching(t, ctx, claimant, "NodeDeleteRefused", 1); got != 1 {
		t.Errorf("%d NodeDeleteRefused Events on the claimant, want 1", got)
	}
	w.waitCleanupPasses(t, ctx, 2) // passes go on: the claimant stays, and its refusal is not said every second
	if deleted(claimant) {
		t.Error("the claimant was deleted")
	}
	if got := w.eventCountReaching(t, ctx, claimant, "NodeDeleteRefused", 1); got != 1 {
		t.Errorf("%d NodeDeleteRefused Events on the claimant after more passes, want 1 (repeated hourly)", got)
	}
	if got := w.metrics.Value("lifeboat_instance_claims_refused_total", "path", "node_cleanup"); got != 1 {
		t.Errorf("lifeboat_instance_claims_refused_total{path=node_cleanup} = %v, want 1", got)
	}
}

// waitCleanupPasses waits for n more passes of node clean-up that ask EC2 about the Nodes
// not Ready (one DescribeInstances each while such a Node is left).
func (w *intakeWorld) waitCleanupPasses(t *testing.T, ctx context.Context, n int) {
	t.Helper()
	want := w.fake.CallCount("ec2", "DescribeInstances") + n
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		return w.fake.CallCount("ec2", "DescribeInstances") >= want, nil
	})
	if err != nil {
		t.Fatalf("node clean-up did not pass %d more times", n)
	}
}
