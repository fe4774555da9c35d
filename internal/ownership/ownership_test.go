// SPDX-License-Identifier: Apache-2.0

package ownership

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/panics"
	"lifeboat.dev/lifeboat/internal/panics/panicstest"
)

// fakeEC2 answers from a fixed set of instances and records every call.
type fakeEC2 struct {
	cloud.EC2 // the calls ownership does not make
	mu        sync.Mutex
	instances map[string]cloud.Instance
	err       error
	calls     [][]string
	gate      chan struct{} // when set, each call waits for it to close
	called    chan struct{} // closed and replaced at every call
}

// nextCall is closed at the next call.
func (f *fakeEC2) nextCall() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.called == nil {
		f.called = make(chan struct{})
	}
	return f.called
}

func newFakeEC2(instances ...cloud.Instance) *fakeEC2 {
	f := &fakeEC2{instances: map[string]cloud.Instance{}}
	for _, in := range instances {
		f.instances[in.ID] = in
	}
	return f
}

func (f *fakeEC2) DescribeInstances(ctx context.Context, ids []string) (map[string]cloud.Instance, error) {
	f.mu.Lock()
	f.calls = append(f.calls, append([]string(nil), ids...))
	gate, err := f.gate, f.err
	if f.called != nil {
		close(f.called)
	}
	f.called = make(chan struct{})
	f.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]cloud.Instance{}
	for _, id := range ids {
		if in, ok := f.instances[id]; ok {
			out[id] = in
		}
	}
	return out, nil
}

func (f *fakeEC2) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

func (f *fakeEC2) setErr(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

func node(name, providerID string, internalIPs ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{ProviderID: providerID}}
	for _, ip := range internalIPs {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
	}
	return n
}

func providerID(instanceID string) string { return "aws:///us-east-1a/" + instanceID }

func instance(id, dns string, tags ...string) cloud.Instance {
	in := cloud.Instance{ID: id, PrivateDNSName: dns, State: "running", Tags: map[string]string{}}
	for i := 0; i+1 < len(tags); i += 2 {
		in.Tags[tags[i]] = tags[i+1]
	}
	return in
}

// withIPs gives an instance its private addresses.
func withIPs(in cloud.Instance, ips ...string) cloud.Instance {
	in.PrivateIPs = ips
	return in
}

// claims records the refused claims a Resolver reports.
type claims struct {
	mu  sync.Mutex
	got []Claim
}

func (c *claims) ClaimRefused(cl Claim) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, cl)
}

func (c *claims) claimants() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, cl := range c.got {
		out = append(out, cl.Claimant.Name)
	}
	return out
}

// startInformer runs a node informer over a fake clientset holding nodes, with a Resolver
// built before it starts, over EC2 descriptions with the default cache and batch window.
func startInformer(t *testing.T, ec2 cloud.EC2, opts Options, nodes ...*corev1.Node) (*Resolver, kubernetes.Interface) {
	t.Helper()
	return startInformerWith(t, NewInstances(ec2, InstancesOptions{}), opts, nodes...)
}

func startInformerWith(t *testing.T, instances *Instances, opts Options, nodes ...*corev1.Node) (*Resolver, kubernetes.Interface) {
	t.Helper()
	objs := make([]runtime.Object, len(nodes))
	for i, n := range nodes {
		objs[i] = n
	}
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	inf := factory.Core().V1().Nodes().Informer()
	r, err := NewResolver(inf, instances, opts)
	if err != nil {
		t.Fatalf("NewResolver: %v", err)
	}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop); factory.Shutdown() })
	factory.Start(stop)
	if !cache.WaitForCacheSync(stop, inf.HasSynced) {
		t.Fatal("node informer did not sync")
	}
	return r, client
}

const (
	managed = "aws-node-termination-handler/managed"
	ours    = "kubernetes.io/cluster/prod"
)

func TestResolve(t *testing.T) {
	tagChecks := Options{CheckManagedTag: true, ManagedTag: managed, ClusterName: "prod", UseProviderID: true}
	noChecks := Options{UseProviderID: true}
	dnsFallback := Options{CheckManagedTag: true, ManagedTag: managed}
	ec2Down := errors.New("RequestLimitExceeded: slow down")
	const victim, other = "ip-10-0-0-1.ec2.internal", "ip-10-0-0-2.ec2.internal"

	tests := []struct {
		name        string
		opts        Options
		nodes       []*corev1.Node
		instances   []cloud.Instance
		ec2Err      error
		id          string
		wantOwned   bool
		wantNode    string
		wantWhy     string   // substring of Reason
		wantRefused []string // the claimants refused, in order
		wantErr     bool
		wantCalls   int
	}{
		{
			name: "owned: node by providerID, managed and cluster tags", opts: tagChecks,
			nodes:     []*corev1.Node{node("n1", providerID("i-1"))},
			instances: []cloud.Instance{instance("i-1", "n1", managed, "", ours, "owned")},
			id:        "i-1", wantOwned: true, wantNode: "n1", wantCalls: 1,
		},
		{
			name: "owned with no tag check: EC2 still describes the node", opts: noChecks,
			nodes:     []*corev1.Node{node("n1", providerID("i-1"))},
			instances: []cloud.Instance{instance("i-1", "n1")},
			id:        "i-1", wantOwned: true, wantNode: "n1", wantCalls: 1,
		},
		{
			name: "node by providerID in the zone-less form", opts: noChecks,
			nodes:     []*corev1.Node{node("whatever", "aws:///i-1")},
			instances: []cloud.Instance{instance("i-1", "whatever")},
			id:        "i-1", wantOwned: true, wantNode: "whatever", wantCalls: 1,
		},
		{
			name: "owned by private IP when the node is not named after the private DNS name", opts: noChecks,
			nodes:     []*corev1.Node{node("worker-7", providerID("i-1"), "10.0.0.1")},
			instances: []cloud.Instance{withIPs(instance("i-1", victim), "10.0.0.1")},
			id:        "i-1", wantOwned: true, wantNode: "worker-7", wantCalls: 1,
		},
		{
			name: "no node is the instance as EC2 describes it", opts: tagChecks,
			nodes:     []*corev1.Node{node("n2", providerID("i-2"))},
			instances: []cloud.Instance{instance("i-1", "n1", managed, "", ours, "owned")},
			id:        "i-1", wantWhy: "no node in this cluster is instance i-1", wantCalls: 1,
		},
		{
			name: "a terminated instance: no node to check, no claim refused", opts: noChecks,
			nodes:     []*corev1.Node{node("n1", providerID("i-1"))},
			instances: []cloud.Instance{{ID: "i-1", State: "terminated"}},
			id:        "i-1", wantWhy: "without a private DNS name or IP", wantCalls: 1,
		},
		{
			name: "empty instance id", opts: tagChecks,
			id: "", wantWhy: "names no instance",
		},
		{
			name: "two claims: the node EC2 describes holds it, the other is refused", opts: noChecks,
			nodes:     []*corev1.Node{node("a", providerID("i-1")), node("b", "aws:///us-east-1b/i-1")},
			instances: []cloud.Instance{instance("i-1", "b")},
			id:        "i-1", wantOwned: true, wantNode: "b", wantRefused: []string{"a"}, wantCalls: 1,
		},
		{
			name: "a forged claim on a node without providerID: handled on the node EC2 describes", opts: dnsFallback,
			nodes:     []*corev1.Node{node("claimant", providerID("i-1")), node(victim, "")},
			instances: []cloud.Instance{instance("i-1", victim, managed, "")},
			id:        "i-1", wantOwned: true, wantNode: victim, wantRefused: []string{"claimant"}, wantCalls: 1,
		},
		{
			name: "a forged claim does not silence the notice with USE_PROVIDER_ID either", opts: noChecks,
			nodes:     []*corev1.Node{node("claimant", providerID("i-1")), node(victim, "")},
			instances: []cloud.Instance{instance("i-1", victim)},
			id:        "i-1", wantOwned: true, wantNode: victim, wantRefused: []string{"claimant"}, wantCalls: 1,
		},
		{
			name: "the name wins over a forged InternalIP", opts: noChecks,
			nodes:     []*corev1.Node{node("claimant", providerID("i-1"), "10.0.0.1"), node(victim, providerID("i-1"), "10.0.0.1")},
			instances: []cloud.Instance{withIPs(instance("i-1", victim), "10.0.0.1")},
			id:        "i-1", wantOwned: true, wantNode: victim, wantRefused: []string{"claimant"}, wantCalls: 1,
		},
		{
			name: "a claim on an instance EC2 describes as no node here", opts: noChecks,
			nodes:     []*corev1.Node{node("claimant", providerID("i-1"))},
			instances: []cloud.Instance{instance("i-1", victim)},
			id:        "i-1", wantWhy: "no node in this cluster is instance i-1", wantRefused: []string{"claimant"}, wantCalls: 1,
		},
		{
			name: "ambiguous: two nodes have the private IP and neither the name", opts: noChecks,
			nodes:     []*corev1.Node{node("a", providerID("i-1"), "10.0.0.1"), node("b", providerID("i-1"), "10.0.0.1")},
			instances: []cloud.Instance{withIPs(instance("i-1", victim), "10.0.0.1")},
			id:        "i-1", wantWhy: "ambiguous", wantCalls: 1,
		},
		{
			name: "DNS fallback: node without providerID", opts: dnsFallback,
			nodes:     []*corev1.Node{node(victim, "")},
			instances: []cloud.Instance{instance("i-1", victim, managed, "")},
			id:        "i-1", wantOwned: true, wantNode: victim, wantCalls: 1,
		},
		{
			name: "DNS fallback denied by USE_PROVIDER_ID", opts: Options{CheckManagedTag: true, ManagedTag: managed, UseProviderID: true},
			nodes:     []*corev1.Node{node(victim, "")},
			instances: []cloud.Instance{instance("i-1", victim, managed, "")},
			id:        "i-1", wantWhy: "USE_PROVIDER_ID=true", wantCalls: 1,
		},
		{
			name: "DNS fallback denied: node's providerID names another instance", opts: dnsFallback,
			nodes:     []*corev1.Node{node(victim, providerID("i-other"))},
			instances: []cloud.Instance{instance("i-1", victim, managed, "")},
			id:        "i-1", wantWhy: "names another instance", wantCalls: 1, wantRefused: []string{victim},
		},
		{
			name: "DNS fallback denied: node's providerID is not an EC2 one", opts: dnsFallback,
			nodes:     []*corev1.Node{node(victim, "kwok://ip-10-0-0-1")},
			instances: []cloud.Instance{instance("i-1", victim, managed, "")},
			id:        "i-1", wantWhy: "names another instance", wantCalls: 1,
		},
		{
			name: "DNS fallback: no node by that name", opts: dnsFallback,
			nodes:     []*corev1.Node{node(other, "")},
			instances: []cloud.Instance{instance("i-1", victim, managed, "")},
			id:        "i-1", wantWhy: "no node in this cluster is instance i-1", wantCalls: 1,
		},
		{
			name: "DNS fallback: instance unknown to EC2", opts: dnsFallback,
			nodes: []*corev1.Node{node(victim, "")},
			id:    "i-1", wantWhy: "unknown to EC2", wantCalls: 1,
		},
		{
			name: "DNS fallback still checks the managed tag", opts: dnsFallback,
			nodes:     []*corev1.Node{node(victim, "")},
			instances: []cloud.Instance{instance("i-1", victim)},
			id:        "i-1", wantNode: victim, wantWhy: "missing the managed tag " + managed, wantCalls: 1,
		},
		{
			name: "managed tag missing", opts: tagChecks,
			nodes:     []*corev1.Node{node("n1", providerID("i-1"))},
			instances: []cloud.Instance{instance("i-1", "n1", ours, "owned", "other/managed", "")},
			id:        "i-1", wantNode: "n1", wantWhy: "missing the managed tag " + managed, wantCalls: 1,
		},
		{
			name: "managed tag value is ignored", opts: tagChecks,
			nodes:     []*corev1.Node{node("n1", providerID("i-1"))},
			instances: []cloud.Instance{instance("i-1", "n1", managed, "false", ours, "owned")},
			id:        "i-1", wantOwned: true, wantNode: "n1", wantCalls: 1,
		},
		{
			name: "managed tag not checked when CHECK_TAG_BEFORE_DRAINING is off", opts: Options{ManagedTag: managed, ClusterName: "prod", UseProviderID: true},
			nodes:     []*corev1.Node{node("n1", providerID("i-1"))},
			instances: []cloud.Instance{instance("i-1", "n1", ours, "shared")},
			id:        "i-1", wantOwned: true, wantNode: "n1", wantCalls: 1,
		},
		{
			name: "cluster tag missing", opts: tagChecks,
			nodes:     []*corev1.Node{node("n1", providerID("i-1"))},
			instances: []cloud.Instance{instance("i-1", "n1", managed, "", "kubernetes.io/cluster/staging", "owned")},
			id:        "i-1", wantNode: "n1", wantWhy: "missing the cluster tag " + ours, wantCalls: 1,
		},
		{
			name: "cluster tag shared", opts: tagChecks,
			nodes:     []*corev1.Node{node("n1", providerID("i-1"))},
			instances: []cloud.Instance{instance("i-1", "n1", managed, "", ours, "shared")},
			id:        "i-1", wantOwned: true, wantNode: "n1", wantCalls: 1,
		},
		{
			name: "cluster tag with another value", opts: tagChecks,
			nodes:     []*corev1.Node{node("n1", providerID("i-1"))},
			instances: []cloud.Instance{instance("i-1", "n1", managed, "", ours, "yes")},
			id:        "i-1", wantNode: "n1", wantWhy: `neither owned nor shared`, wantCalls: 1,
		},
		{
			name: "no cluster tag check without CLUSTER_NAME", opts: Options{CheckManagedTag: true, ManagedTag: managed, UseProviderID: true},
			nodes:     []*corev1.Node{node("n1", providerID("i-1"))},
			instances: []cloud.Instance{instance("i-1", "n1", managed, "")},
			id:        "i-1", wantOwned: true, wantNode: "n1", wantCalls: 1,
		},
		{
			name: "node here but instance unknown to EC2", opts: tagChecks,
			nodes: []*corev1.Node{node("n1", providerID("i-1"))},
			id:    "i-1", wantNode: "", wantWhy: "unknown to EC2", wantCalls: 1,
		},
		{
			name: "EC2 error is returned, not a verdict", opts: tagChecks,
			nodes:     []*corev1.Node{node("n1", providerID("i-1"))},
			instances: []cloud.Instance{instance("i-1", "n1", managed, "", ours, "owned")},
			ec2Err:    ec2Down, id: "i-1", wantErr: true, wantCalls: 1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ec2 := newFakeEC2(tc.instances...)
			ec2.setErr(tc.ec2Err)
			reported := &claims{}
			tc.opts.Claims = reported
			r, _ := startInformer(t, ec2, tc.opts, tc.nodes...)
			v, err := r.Resolve(context.Background(), Subject{Path: PathQueue, InstanceID: tc.id})
			if tc.wantErr {
				if !errors.Is(err, tc.ec2Err) {
					t.Fatalf("err = %v, want one wrapping %v", err, tc.ec2Err)
				}
				if v.Owned {
					t.Errorf("verdict owned despite the error: %+v", v)
				}
			} else if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			checkVerdict(t, v, tc.id, tc.wantOwned, tc.wantNode, tc.wantWhy, tc.wantErr)
			if got := reported.claimants(); !slices.Equal(got, tc.wantRefused) {
				t.Errorf("refused claims reported = %q, want %q", got, tc.wantRefused)
			}
			if len(v.Refused) != len(tc.wantRefused) {
				t.Errorf("verdict's refused claims = %d, want %d", len(v.Refused), len(tc.wantRefused))
			}
			for _, c := range v.Refused {
				if tc.wantOwned && c.Holder != v.Node.Name {
					t.Errorf("refused claim names holder %q, want %q", c.Holder, v.Node.Name)
				}
				if msg := c.String(); !strings.Contains(msg, c.Claimant.Name) || !strings.Contains(msg, tc.id) {
					t.Errorf("claim %q does not name the claimant and the instance", msg)
				}
			}
			if got := ec2.callCount(); got != tc.wantCalls {
				t.Errorf("EC2 calls = %d, want %d", got, tc.wantCalls)
			}
		})
	}
}

func checkVerdict(t *testing.T, v Verdict, id string, wantOwned bool, wantNode, wantWhy string, wantErr bool) {
	t.Helper()
	if v.InstanceID != id {
		t.Errorf("InstanceID = %q, want %q", v.InstanceID, id)
	}
	if v.Owned != wantOwned {
		t.Errorf("Owned = %v, want %v (reason %q)", v.Owned, wantOwned, v.Reason)
	}
	if wantOwned && v.Reason != "" {
		t.Errorf("owned with reason %q", v.Reason)
	}
	if !wantOwned && !wantErr && !strings.Contains(v.Reason, wantWhy) {
		t.Errorf("Reason = %q, want it to contain %q", v.Reason, wantWhy)
	}
	gotNode := ""
	if v.Node != nil {
		gotNode = v.Node.Name
	}
	if wantNode != "" && gotNode != wantNode {
		t.Errorf("Node = %q, want %q", gotNode, wantNode)
	}
	if wantOwned && v.Node == nil {
		t.Error("owned verdict without a node")
	}
}

func TestResolveErrorIsNotCached(t *testing.T) {
	ec2 := newFakeEC2(instance("i-1", "n1", managed, ""))
	ec2.setErr(errors.New("InternalError"))
	r, _ := startInformer(t, ec2, Options{CheckManagedTag: true, ManagedTag: managed, UseProviderID: true}, node("n1", providerID("i-1")))
	if _, err := r.Resolve(context.Background(), Subject{Path: PathQueue, InstanceID: "i-1"}); err == nil {
		t.Fatal("no error while EC2 fails")
	}
	ec2.setErr(nil)
	v, err := r.Resolve(context.Background(), Subject{Path: PathQueue, InstanceID: "i-1"})
	if err != nil || !v.Owned {
		t.Fatalf("after EC2 recovered: %+v, %v", v, err)
	}
	if got := ec2.callCount(); got != 2 {
		t.Errorf("EC2 calls = %d, want 2 (the failure must not be cached)", got)
	}
}

func TestResolveBatchesAndCaches(t *testing.T) {
	const n = 300
	var nodes []*corev1.Node
	var instances []cloud.Instance
	for i := range n {
		id := fmt.Sprintf("i-%017x", i)
		nodes = append(nodes, node(fmt.Sprintf("node-%d", i), providerID(id)))
		instances = append(instances, instance(id, fmt.Sprintf("node-%d", i), managed, "", ours, "owned"))
	}
	ec2 := newFakeEC2(instances...)
	r, _ := startInformer(t, ec2, Options{CheckManagedTag: true, ManagedTag: managed, ClusterName: "prod", UseProviderID: true}, nodes...)
	clock := time.Now()
	var clockMu sync.Mutex
	r.instances.now = func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return clock }

	round := func() {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := range n {
			wg.Go(func() {
				id := fmt.Sprintf("i-%017x", i)
				v, err := r.Resolve(context.Background(), Subject{Path: PathQueue, InstanceID: id})
				switch {
				case err != nil:
					errs <- err
				case !v.Owned || v.Node == nil || v.Node.Name != fmt.Sprintf("node-%d", i):
					errs <- fmt.Errorf("%s: %+v", id, v)
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	}

	round()
	first := ec2.callCount()
	t.Logf("%d concurrent lookups: %d DescribeInstances calls", n, first)
	if first > n/50 {
		t.Errorf("%d EC2 calls for %d concurrent lookups, want at most %d", first, n, n/50)
	}
	ec2.mu.Lock()
	seen := map[string]int{}
	for _, c := range ec2.calls {
		if len(c) > cloud.MaxFilterValues {
			t.Errorf("one call asked for %d ids, more than %d", len(c), cloud.MaxFilterValues)
		}
		for _, id := range c {
			seen[id]++
		}
	}
	ec2.mu.Unlock()
	for id, k := range seen {
		if k > 1 {
			t.Errorf("%s asked for %d times", id, k)
		}
	}

	round()
	if got := ec2.callCount(); got != first {
		t.Errorf("second round within the cache TTL made %d more EC2 calls, want 0", got-first)
	}

	clockMu.Lock()
	clock = clock.Add(DefaultCacheTTL + time.Second)
	clockMu.Unlock()
	if _, err := r.Resolve(context.Background(), Subject{Path: PathQueue, InstanceID: "i-00000000000000000"}); err != nil {
		t.Fatal(err)
	}
	if got := ec2.callCount(); got != first+1 {
		t.Errorf("after the TTL: %d more EC2 calls, want 1", got-first)
	}
}

func TestResolveSharesInflightLookup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ec2 := newFakeEC2(instance("i-1", "n1", managed, ""))
		ec2.gate = make(chan struct{})
		r, _ := startInformerWith(t, NewInstances(ec2, InstancesOptions{BatchWindow: time.Millisecond}), Options{CheckManagedTag: true, ManagedTag: managed, UseProviderID: true}, node("n1", providerID("i-1")))

		// The first lookup is sent and held; later ones for the same id wait for it.
		results := make(chan error, 3)
		resolve := func() {
			v, err := r.Resolve(context.Background(), Subject{Path: PathQueue, InstanceID: "i-1"})
			if err == nil && !v.Owned {
				err = fmt.Errorf("not owned: %s", v.Reason)
			}
			results <- err
		}
		sent := ec2.nextCall()
		go resolve()
		<-sent // the batch window over, the first lookup sent
		go resolve()
		go resolve()
		synctest.Wait() // both waiting
		close(ec2.gate)
		for range 3 {
			if err := <-results; err != nil {
				t.Error(err)
			}
		}
		if got := ec2.callCount(); got != 1 {
			t.Errorf("EC2 calls = %d, want 1", got)
		}
	})
}

func TestResolveCallerContext(t *testing.T) {
	ec2 := newFakeEC2(instance("i-1", "n1", managed, ""))
	ec2.gate = make(chan struct{})
	r, _ := startInformer(t, ec2, Options{CheckManagedTag: true, ManagedTag: managed, UseProviderID: true}, node("n1", providerID("i-1")))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := r.Resolve(ctx, Subject{Path: PathQueue, InstanceID: "i-1"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the caller's deadline", err)
	}
	// The shared lookup goes on and its answer serves the next caller.
	close(ec2.gate)
	v, err := r.Resolve(context.Background(), Subject{Path: PathQueue, InstanceID: "i-1"})
	if err != nil || !v.Owned {
		t.Fatalf("%+v, %v", v, err)
	}
	if got := ec2.callCount(); got != 1 {
		t.Errorf("EC2 calls = %d, want 1", got)
	}
}

func TestResolveSeesNodesAddedLater(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, client := startInformer(t, newFakeEC2(instance("i-1", "late")), Options{UseProviderID: true})
		if v, _ := r.Resolve(context.Background(), Subject{Path: PathQueue, InstanceID: "i-1"}); v.Owned {
			t.Fatal("owned before the node exists")
		}
		if _, err := client.CoreV1().Nodes().Create(context.Background(), node("late", providerID("i-1")), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // the informer has the node
		v, err := r.Resolve(context.Background(), Subject{Path: PathQueue, InstanceID: "i-1"})
		if err != nil {
			t.Fatal(err)
		}
		if !v.Owned || v.Node.Name != "late" {
			t.Fatalf("node not found once the informer has it: %+v", v)
		}
	})
}

func TestResolveReturnsACopy(t *testing.T) {
	r, _ := startInformer(t, newFakeEC2(instance("i-1", "n1")), Options{UseProviderID: true}, node("n1", providerID("i-1")))
	v, err := r.Resolve(context.Background(), Subject{Path: PathQueue, InstanceID: "i-1"})
	if err != nil || v.Node == nil {
		t.Fatalf("%+v, %v", v, err)
	}
	v.Node.Spec.ProviderID = "changed"
	v, _ = r.Resolve(context.Background(), Subject{Path: PathQueue, InstanceID: "i-1"})
	if !v.Owned || v.Node.Spec.ProviderID != providerID("i-1") {
		t.Fatalf("the informer's copy was changed: %+v", v)
	}
}

func TestNewResolver(t *testing.T) {
	tests := []struct {
		name         string
		opts         Options
		wantErr      string
		wantWarnings []string // substrings, one per warning, in order
	}{
		{name: "all checks", opts: Options{CheckManagedTag: true, ManagedTag: managed, ClusterName: "prod", UseProviderID: true}},
		{name: "no cluster name", opts: Options{CheckManagedTag: true, ManagedTag: managed},
			wantWarnings: []string{"CLUSTER_NAME is unset"}},
		{name: "no tag check", opts: Options{ClusterName: "prod"},
			wantWarnings: []string{"any instance with a matching node"}},
		{name: "nothing set", opts: Options{UseProviderID: true},
			wantWarnings: []string{"CLUSTER_NAME is unset", "any instance with a matching node"}},
		{name: "managed tag empty", opts: Options{CheckManagedTag: true, ManagedTag: " "}, wantErr: "MANAGED_TAG is empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			inf := informers.NewSharedInformerFactory(fake.NewClientset(), 0).Core().V1().Nodes().Informer()
			r, err := NewResolver(inf, NewInstances(newFakeEC2(), InstancesOptions{}), tc.opts)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := r.Warnings()
			if len(got) != len(tc.wantWarnings) {
				t.Fatalf("warnings = %q, want %d", got, len(tc.wantWarnings))
			}
			for i, w := range tc.wantWarnings {
				if !strings.Contains(got[i], w) {
					t.Errorf("warning %d = %q, want it to contain %q", i, got[i], w)
				}
			}
		})
	}
}

// Instances takes its defaults for zero and negative options, and without an EC2 client
// answers every lookup with an error rather than a verdict.
func TestNewInstances(t *testing.T) {
	c := NewInstances(nil, InstancesOptions{CacheTTL: -time.Second, BatchWindow: -time.Second})
	if c.opts.CacheTTL != DefaultCacheTTL || c.opts.BatchWindow != DefaultBatchWindow {
		t.Errorf("defaults not applied: %+v", c.opts)
	}
	if _, _, err := c.Describe(context.Background(), "i-1"); !errors.Is(err, errNoEC2) {
		t.Errorf("Describe without EC2: %v, want %v", err, errNoEC2)
	}
	inf := informers.NewSharedInformerFactory(fake.NewClientset(), 0).Core().V1().Nodes().Informer()
	if _, err := NewResolver(inf, nil, Options{}); err == nil {
		t.Error("NewResolver without instances: no error")
	}
}

func TestNewResolverTwiceOnOneInformer(t *testing.T) {
	inf := informers.NewSharedInformerFactory(fake.NewClientset(), 0).Core().V1().Nodes().Informer()
	for i := range 2 {
		if _, err := NewResolver(inf, NewInstances(newFakeEC2(), InstancesOptions{}), Options{UseProviderID: true}); err != nil {
			t.Fatalf("resolver %d: %v", i+1, err)
		}
	}
}

func TestInstanceIDFromProviderID(t *testing.T) {
	tests := []struct{ in, want string }{
		{"aws:///us-east-1a/i-0123456789abcdef0", "i-0123456789abcdef0"},
		{"aws://us-east-1a/i-0123", "i-0123"},
		{"aws:///i-0123", "i-0123"},
		{"aws:///us-east-1a/", ""},
		{"aws:///us-east-1a/i-", ""},
		{"aws:///us-east-1a/fargate-ip-10-0-0-1", ""},
		{"kwok://i-0123", ""},
		{"i-0123", ""},
		{"", ""},
	}
	for _, tc := range tests {
		if got := InstanceIDFromProviderID(tc.in); got != tc.want {
			t.Errorf("InstanceIDFromProviderID(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func FuzzInstanceIDFromProviderID(f *testing.F) {
	for _, s := range []string{"aws:///us-east-1a/i-0123456789abcdef0", "aws://x/i-", "aws:///", "", "i-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id := InstanceIDFromProviderID(s)
		if id == "" {
			return
		}
		if !strings.HasPrefix(s, "aws://") || !strings.HasSuffix(s, id) || !strings.HasPrefix(id, "i-") || len(id) < 3 || strings.Contains(id, "/") {
			t.Fatalf("InstanceIDFromProviderID(%q) = %q", s, id)
		}
	})
}

// panickyEC2 panics on its first answer, then answers as fakeEC2 does.
type panickyEC2 struct {
	*fakeEC2
	panicked sync.Once
}

func (p *panickyEC2) DescribeInstances(ctx context.Context, ids []string) (map[string]cloud.Instance, error) {
	p.panicked.Do(func() {
		var answers map[string]*cloud.Instance
		_ = answers[ids[0]].State // a bug met on EC2's answer
	})
	return p.fakeEC2.DescribeInstances(ctx, ids)
}

// A batched DescribeInstances that panics (on the goroutine that sends the batch) fails its
// lookups as an EC2 error does, at once rather than never, counted under site
// instance_lookup; the next lookup asks again and gets its answer.
func TestResolvePanicFailsItsBatch(t *testing.T) {
	ec2 := &panickyEC2{fakeEC2: newFakeEC2(instance("i-1", "n1", managed, ""))}
	count := &panicstest.Counter{}
	instances := NewInstances(ec2, InstancesOptions{Logger: slog.New(slog.DiscardHandler), Panics: count})
	r, _ := startInformerWith(t, instances, Options{CheckManagedTag: true, ManagedTag: managed, UseProviderID: true}, node("n1", providerID("i-1")))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := r.Resolve(ctx, Subject{Path: PathQueue, InstanceID: "i-1"})
	if _, panicked := errors.AsType[*panics.Error](err); !panicked {
		t.Fatalf("error %v, want the batch's panic", err)
	}
	if v, err := r.Resolve(ctx, Subject{Path: PathQueue, InstanceID: "i-1"}); err != nil || !v.Owned {
		t.Fatalf("the next lookup: %+v, %v", v, err)
	}
	if got := count.Get("instance_lookup"); got != 1 {
		t.Errorf("panics counted %d, want one under instance_lookup", got)
	}
}
