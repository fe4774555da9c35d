// SPDX-License-Identifier: Apache-2.0

package nodecleanup

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/ownership"
)

// orderedStore lists its nodes in the order given, as an informer may.
type orderedStore struct{ nodes []*corev1.Node }

func (s orderedStore) List() []any {
	out := make([]any, len(s.nodes))
	for i, n := range s.nodes {
		out[i] = n
	}
	return out
}
func (orderedStore) Add(any) error                        { return nil }
func (orderedStore) Update(any) error                     { return nil }
func (orderedStore) Delete(any) error                     { return nil }
func (orderedStore) ListKeys() []string                   { return nil }
func (orderedStore) Get(any) (any, bool, error)           { return nil, false, nil }
func (orderedStore) GetByKey(string) (any, bool, error)   { return nil, false, nil }
func (orderedStore) Replace([]any, string) error          { return nil }
func (orderedStore) Resync() error                        { return nil }
func (orderedStore) Bookmark(string)                      {}
func (orderedStore) LastStoreSyncResourceVersion() string { return "" }

type instances map[string]cloud.Instance

func (i instances) DescribeInstances(_ context.Context, ids []string) (map[string]cloud.Instance, error) {
	out := map[string]cloud.Instance{}
	for _, id := range ids {
		if in, ok := i[id]; ok {
			out[id] = in
		}
	}
	return out, nil
}
func (instances) InstancesInCapacityReservation(context.Context, string) ([]cloud.Instance, error) {
	return nil, nil
}
func (instances) DescribeCapacityReservation(context.Context, string) (cloud.CapacityReservation, error) {
	return cloud.CapacityReservation{}, nil
}
func (instances) DescribeInstanceStatus(context.Context, []string) ([]cloud.InstanceStatus, error) {
	return nil, nil
}

type reports struct {
	deleted []string
	refused []ownership.Claim
}

func (r *reports) Deleted(n *corev1.Node, _, _ string) { r.deleted = append(r.deleted, n.Name) }
func (r *reports) Refused(_ *corev1.Node, _ string, c ownership.Claim) {
	r.refused = append(r.refused, c)
}

func darkNode(name, ip, providerID string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)}, Spec: corev1.NodeSpec{ProviderID: providerID},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown}}}}
}

// A Node that claims a terminated instance EC2 describes as another Node never hides that
// Node, whichever the informer lists last: the real Node is deleted, the claimant kept, and
// the refusal said again only once its repeat time has passed.
func TestClaimantNeverHidesTheNodeEC2Describes(t *testing.T) {
	t.Parallel()
	const id = "i-0123456789abcdef0"
	for _, claimantLast := range []bool{true, false} {
		real := darkNode("ip-10-0-0-1.ec2.internal", "10.0.0.1", "aws:///us-east-1a/"+id)
		claimant := darkNode("ip-10-0-0-2.ec2.internal", "10.0.0.2", "aws:///us-east-1a/"+id)
		listed := []*corev1.Node{real, claimant}
		if !claimantLast {
			listed = []*corev1.Node{claimant, real}
		}
		client := fake.NewClientset(real.DeepCopy(), claimant.DeepCopy())
		r := &reports{}
		fc := clocktesting.NewFakePassiveClock(time.Now())
		c := &Cleaner{Client: client, Nodes: orderedStore{listed}, Log: slog.New(slog.DiscardHandler), Report: r, Repeat: time.Hour, Clock: fc,
			EC2: instances{id: {ID: id, State: "terminated", PrivateDNSName: real.Name, PrivateIPs: []string{"10.0.0.1"}}}}
		for range 3 { // passes in a row: the refusal is said once within its repeat time
			if err := c.Pass(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := client.CoreV1().Nodes().Get(context.Background(), real.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("claimant last %v: the terminated instance's Node was not deleted (%v)", claimantLast, err)
		}
		if _, err := client.CoreV1().Nodes().Get(context.Background(), claimant.Name, metav1.GetOptions{}); err != nil {
			t.Errorf("claimant last %v: the claimant was deleted: %v", claimantLast, err)
		}
		if len(r.refused) != 1 || r.refused[0].Claimant.Name != claimant.Name || r.refused[0].Path != ownership.PathNodeCleanup {
			t.Fatalf("claimant last %v: refusals %+v, want the claimant's, once", claimantLast, r.refused)
		}
		fc.SetTime(fc.Now().Add(time.Hour - time.Second))
		if err := c.Pass(context.Background()); err != nil {
			t.Fatal(err)
		}
		if len(r.refused) != 1 {
			t.Errorf("claimant last %v: %d refusals within the repeat time, want the one", claimantLast, len(r.refused))
		}
		fc.SetTime(fc.Now().Add(2 * time.Second)) // past the repeat time
		if err := c.Pass(context.Background()); err != nil {
			t.Fatal(err)
		}
		if len(r.refused) != 2 {
			t.Errorf("claimant last %v: %d refusals after the repeat time, want the refusal said again", claimantLast, len(r.refused))
		}
	}
}

type panicCount struct {
	mu    sync.Mutex
	sites []string
}

func (p *panicCount) PanicRecovered(site string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sites = append(p.sites, site)
}

// panicsOnce panics at the first refusal it is told of.
type panicsOnce struct {
	reports
	mu       sync.Mutex
	panicked bool
}

func (p *panicsOnce) Refused(n *corev1.Node, id string, c ownership.Claim) {
	p.mu.Lock()
	first := !p.panicked
	p.panicked = true
	p.mu.Unlock()
	if first {
		panic("a report that panics")
	}
}

// A pass that panics (a Node's content is input) is recovered and counted; the next pass runs.
func TestRunRecoversAPanickingPass(t *testing.T) {
	t.Parallel()
	const id = "i-0123456789abcdef0"
	claimant := darkNode("ip-10-0-0-2.ec2.internal", "10.0.0.2", "aws:///us-east-1a/"+id)
	counted := &panicCount{}
	c := &Cleaner{Client: fake.NewClientset(claimant.DeepCopy()), Nodes: orderedStore{[]*corev1.Node{claimant}}, Log: slog.New(slog.DiscardHandler),
		Report: &panicsOnce{}, Repeat: time.Millisecond, Interval: 10 * time.Millisecond, Panics: counted,
		EC2: instances{id: {ID: id, State: "terminated", PrivateDNSName: "ip-10-0-0-1.ec2.internal", PrivateIPs: []string{"10.0.0.1"}}}}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	c.Run(ctx) // returns when ctx ends: the panic did not end it
	counted.mu.Lock()
	defer counted.mu.Unlock()
	if len(counted.sites) != 1 || counted.sites[0] != "node_cleanup" {
		t.Errorf("panics counted %v, want one at node_cleanup", counted.sites)
	}
}
