// SPDX-License-Identifier: Apache-2.0

package drain

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"lifeboat.dev/lifeboat/test/sandbox"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// Under a reclaim, a pod marked not to disrupt for a duration leaves when its protection
// ends, if that comes before its turn at the deadline.
func TestDoNotDisruptDurationEndsBeforeItsTurn(t *testing.T) {
	t.Parallel()
	c, _ := sandboxtest.Shared(t, sandbox.ClusterOptions{})
	ctx := testContext(t, time.Minute) // from the cluster's start, which load may slow
	// No kubelet runs this node: the pod has no start time, so its protection counts from
	// the drain's selection, and an evicted pod stays terminating to be read.
	const node = "unattended"
	if _, err := c.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createPods(t, ctx, c, newPod("apps", "warm", node, ownedBy("ReplicaSet", "warm"), annotated(AnnotationDoNotDisrupt, "4s"), grace(5)))
	d := New(c.Client, Options{Policy: Policy{DeleteLocalData: true}, PodGracePeriod: -1, Lister: APILister{Client: c.Client, Quorum: true}})
	start := time.Now()
	go func() { _, _ = d.DrainUntil(ctx, node, NewDeadline(start.Add(time.Minute)), Terms{Reclaim: true}) }()
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := c.Client.CoreV1().Pods("apps").Get(ctx, "warm", metav1.GetOptions{})
		return err == nil && p.DeletionTimestamp != nil, nil
	})
	if err != nil {
		t.Fatalf("the pod was not evicted when its protection ended (its turn at the deadline is 53 s away): %v", err)
	}
	if at := time.Since(start); at < 3*time.Second || at > 8*time.Second {
		t.Errorf("evicted %v after the start; want about 4 s, when its protection ends", at)
	}
}
