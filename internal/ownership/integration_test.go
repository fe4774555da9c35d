// SPDX-License-Identifier: Apache-2.0

package ownership_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"lifeboat.dev/lifeboat/internal/cloud/controlleronly"
	"lifeboat.dev/lifeboat/internal/ownership"
	"lifeboat.dev/lifeboat/test/sandbox"
	"lifeboat.dev/lifeboat/test/sandbox/fakeaws"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

const (
	managedTag = "aws-node-termination-handler/managed"
	clusterTag = "kubernetes.io/cluster/prod"
)

// 50 nodes of this cluster and 10 foreign instances behind one queue, resolved all at once
// against the real API server and the fake EC2 endpoint through the real SDK client.
func TestResolveAgainstAPIServerAndEC2(t *testing.T) {
	c, _ := sandboxtest.Shared(t, sandbox.ClusterOptions{})
	fake := sandboxtest.FakeAWS(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	const nodes = 50
	specs := make([]sandbox.NodeSpec, nodes)
	for i := range specs {
		specs[i] = sandbox.NodeSpec{Index: i + 1}
	}
	created, err := c.AddNodes(ctx, specs...)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{} // instance id -> node name ("" = foreign)
	for i, n := range created {
		id := ownership.InstanceIDFromProviderID(n.Spec.ProviderID)
		tagValue := "owned"
		if i%5 == 0 {
			tagValue = "shared"
		}
		fake.AddInstance(fakeaws.Instance{
			ID: id, PrivateDNSName: n.Name, AutoScalingGroup: "workers",
			Tags: map[string]string{managedTag: "", clusterTag: tagValue},
		})
		want[id] = n.Name
	}
	whyForeign := map[string]string{}
	for i := range 10 {
		in := fakeaws.Instance{
			ID:             fmt.Sprintf("i-%017x", 0xf000000+i),
			PrivateDNSName: fmt.Sprintf("ip-172-16-0-%d.ec2.internal", i),
			Tags:           map[string]string{managedTag: "", "kubernetes.io/cluster/staging": "owned"},
		}
		switch {
		case i < 4:
			// Another VPC may reuse this cluster's private addresses, hence its node names.
			in.PrivateDNSName = created[i].Name
			whyForeign[in.ID] = "names another instance"
		case i < 7:
			whyForeign[in.ID] = "no node in this cluster"
		default:
			in.Tags = map[string]string{clusterTag: "owned"}
			whyForeign[in.ID] = "no node in this cluster"
		}
		fake.AddInstance(in)
		want[in.ID] = ""
	}

	factory := informers.NewSharedInformerFactory(c.Client, 0)
	inf := factory.Core().V1().Nodes().Informer()
	r, err := ownership.NewResolver(inf, ownership.NewInstances(controlleronly.NewAWSEC2(sandboxtest.AWSConfig(fake.URL())), ownership.InstancesOptions{}), ownership.Options{
		CheckManagedTag: true, ManagedTag: managedTag, ClusterName: "prod",
		// Off, as in NTH: foreign instances are then looked up by private DNS name too.
		UseProviderID: false,
	})
	if err != nil {
		t.Fatal(err)
	}
	if w := r.Warnings(); len(w) != 0 {
		t.Errorf("warnings with every identity check on: %q", w)
	}
	stop := make(chan struct{})
	defer factory.Shutdown()
	defer close(stop)
	factory.Start(stop)
	if !cache.WaitForCacheSync(stop, inf.HasSynced) {
		t.Fatal("node informer did not sync")
	}

	resolveAll := func() {
		t.Helper()
		var wg sync.WaitGroup
		var mu sync.Mutex
		verdicts := map[string]ownership.Verdict{}
		for id := range want {
			wg.Go(func() {
				v, err := r.Resolve(ctx, ownership.Subject{Path: ownership.PathQueue, InstanceID: id})
				if err != nil {
					t.Errorf("%s: %v", id, err)
				}
				mu.Lock()
				verdicts[id] = v
				mu.Unlock()
			})
		}
		wg.Wait()
		owned := 0
		for id, node := range want {
			v := verdicts[id]
			if node != "" {
				if !v.Owned || v.Node == nil || v.Node.Name != node {
					t.Errorf("%s: %+v, want owned with node %s", id, v, node)
				}
				owned++
				continue
			}
			if v.Owned || !strings.Contains(v.Reason, whyForeign[id]) {
				t.Errorf("%s (foreign): owned=%v reason %q, want not owned because %q", id, v.Owned, v.Reason, whyForeign[id])
			}
		}
		if owned != nodes {
			t.Errorf("%d owned, want %d", owned, nodes)
		}
	}

	resolveAll()
	calls := fake.CallCount("ec2", "DescribeInstances")
	t.Logf("%d concurrent lookups: %d DescribeInstances calls", len(want), calls)
	if calls < 1 || calls > 2 {
		t.Errorf("DescribeInstances calls = %d, want 1 or 2", calls)
	}
	resolveAll()
	if again := fake.CallCount("ec2", "DescribeInstances"); again != calls {
		t.Errorf("second round made %d more DescribeInstances calls, want 0 (cached)", again-calls)
	}
}
