// SPDX-License-Identifier: Apache-2.0

package controller_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"lifeboat.dev/lifeboat/internal/episode"
	"lifeboat.dev/lifeboat/internal/nodecleanup"
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
	time.Sleep(2 * time.Second)
	if deleted(impostor) || deleted(alive) {
		t.Errorf("deleted: impostor %v, Ready node %v; want neither", deleted(impostor), deleted(alive))
	}
	if got := w.eventCount(t, ctx, impostor, "NodeDeleteRefused"); got != 1 {
		t.Errorf("%d NodeDeleteRefused Events, want 1", got)
	}
	if got := w.metrics.Value("lifeboat_node_cleanup_total", "result", "deleted"); got != 2 {
		t.Errorf("lifeboat_node_cleanup_total{result=deleted} = %v, want 2", got)
	}
}
