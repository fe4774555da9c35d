// SPDX-License-Identifier: Apache-2.0

package drain

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"lifeboat.dev/lifeboat/internal/kube/pacing"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/test/sandbox"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// BenchmarkCordonAndDrain measures what a notice costs on one node: cordon + taint, then
// drain N ReplicaSet pods through a request budget at its defaults (100/s to start, burst
// 200), as the binary's clients have. It reports wall time per drain and the API requests
// Lifeboat made (from the audit log).
//
//	make bench   (or: go test -run '^$' -bench CordonAndDrain -benchtime 3x ./internal/drain)
func BenchmarkCordonAndDrain(b *testing.B) {
	c := sandboxtest.Cluster(b, sandbox.ClusterOptions{AuditLog: true})
	ctx := context.Background()
	rc, err := c.UserConfig("lifeboat", "system:masters")
	if err != nil {
		b.Fatal(err)
	}
	nodeIndex := 0
	for _, n := range []int{10, 110, 500} {
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			var requests int
			for range b.N {
				b.StopTimer()
				nodeIndex++
				node := prepareNode(b, ctx, c, nodeIndex, n)
				paced := rest.CopyConfig(rc) // a fresh budget, as a quiet cluster's notice would see
				pacing.New(pacing.Options{}).Configure(paced, pacing.Ordinary)
				client := kubernetesClient(b, paced)
				before := countRequests(b, c)
				b.StartTimer()

				start := time.Now()
				if _, err := nodes.NewWriter(client).Apply(ctx, node, nil, "cordon", nodes.Cordon(),
					nodes.AddTaint(nodes.TaintSpotInterruption, "bench", corev1.TaintEffectNoSchedule)); err != nil {
					b.Fatal(err)
				}
				res, err := New(client, Options{Policy: Policy{IgnoreDaemonSets: true, DeleteLocalData: true}, PodGracePeriod: -1}).
					Drain(ctx, node, start.Add(2*time.Minute))
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if len(res.Pods) != n {
					b.Fatalf("drained %d pods, want %d", len(res.Pods), n)
				}
				requests += waitRequestsSettled(b, c, before)
				b.StartTimer()
			}
			b.ReportMetric(float64(requests)/float64(b.N), "requests/drain")
		})
	}
}

// prepareNode makes a Ready node holding n Running ReplicaSet pods.
func prepareNode(b *testing.B, ctx context.Context, c *sandbox.Cluster, index, n int) string {
	b.Helper()
	created, err := c.AddNodes(ctx, sandbox.NodeSpec{Index: index})
	if err != nil {
		b.Fatal(err)
	}
	node := created[0].Name
	if err := c.EnsureNamespace(ctx, "bench"); err != nil {
		b.Fatal(err)
	}
	for i := range n {
		p := newPod("bench", fmt.Sprintf("n%d-web-%d", index, i), node, ownedBy("ReplicaSet", "web"))
		p.UID, p.Status = "", corev1.PodStatus{}
		if _, err := c.Client.CoreV1().Pods("bench").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := c.Client.CoreV1().Pods("bench").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node + ",status.phase=Running"})
		return err == nil && len(pods.Items) == n, nil
	})
	if err != nil {
		b.Fatalf("pods on %s never Running: %v", node, err)
	}
	return node
}

func countRequests(b *testing.B, c *sandbox.Cluster) int {
	b.Helper()
	events, err := c.AuditEvents(sandbox.ByUser("lifeboat"))
	if err != nil {
		b.Fatal(err)
	}
	return len(events)
}

// waitRequestsSettled returns the requests made since before, once the audit log has caught
// up with the drain's watch closing.
func waitRequestsSettled(b *testing.B, c *sandbox.Cluster, before int) int {
	b.Helper()
	last := -1
	for range 50 {
		n := countRequests(b, c) - before
		if n == last {
			return n
		}
		last = n
		time.Sleep(100 * time.Millisecond)
	}
	return last
}
