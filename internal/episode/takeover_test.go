// SPDX-License-Identifier: Apache-2.0

package episode

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/record"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// requests counts the client's requests by verb and resource.
func requests(client *fake.Clientset) map[string]int {
	out := map[string]int{}
	for _, a := range client.Actions() {
		out[a.GetVerb()+" "+a.GetResource().Resource]++
	}
	return out
}

// A term that begins with one list of the nodes decides each node's first reconcile from it:
// no read of its own. Where the informer's copy is newer than the list's (a write after the
// list), the newer one decides. A node's second reconcile reads it as ever, and so does a
// reconcile without the list.
func TestTakeoverDecidesFromOneList(t *testing.T) {
	ctx := context.Background()
	inst := "i-0123456789abcdef0"
	spot := notice.Notice{ID: notice.ID(notice.SpotInterruption, inst, "terminate"), Kind: notice.SpotInterruption, Source: notice.SourceQueue,
		InstanceID: inst, Deadline: time.Now().Add(time.Minute)}
	previous := &record.Owner{Origin: queueOrigin, Holder: "previous-leader", Renewed: time.Now().Add(-5 * time.Second).UTC().Truncate(time.Second)}
	draining := func(name string) *corev1.Node {
		n := ownedNode(t, record.PhaseDraining, previous, spot)
		n.Name = name
		return n
	}
	for _, tc := range []struct {
		name     string
		list     bool
		newer    bool // the informer's copy is a write newer than the list's: the episode is done
		wantGets int
		drains   bool
	}{
		{"without the list", false, false, 1, true},
		{"from the list", true, false, 0, true},
		{"from the informer's newer copy", true, true, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset(draining("n1"))
			takeover := NewTakeover(client)
			h := NewHandler(sandboxtest.Config(t, ""), client, slog.New(slog.DiscardHandler), Options{Origin: queueOrigin, Takeover: takeover})
			if tc.list {
				if n, err := takeover.Read(ctx); err != nil || n != 1 {
					t.Fatalf("Read: %d nodes, %v", n, err)
				}
			}
			cached := draining("n1")
			if tc.newer {
				record.Edit(func(r *record.Record) {
					r.Phase, r.Finished = record.PhaseDrained, []string{spot.ID, "rebalance-" + inst}
				})(cached)
				cached.ResourceVersion = "2"
			}
			client.ClearActions()
			if _, err := h.Reconcile(ctx, cached); err != nil {
				t.Fatal(err)
			}
			got := requests(client)
			if got["get nodes"] != tc.wantGets {
				t.Errorf("first reconcile: %d node reads, want %d (requests %v)", got["get nodes"], tc.wantGets, got)
			}
			if drained := got["list pods"] > 0; drained != tc.drains {
				t.Errorf("first reconcile drained %v, want %v (requests %v)", drained, tc.drains, got)
			}
			if tc.list && !tc.newer && takeover.take("n1") != nil {
				t.Error("the list's copy is still there after the node's first reconcile: it serves one only")
			}
		})
	}
}

// The list stands in for the nodes' reads for takeoverFresh after it was read, not later.
func TestTakeoverListExpires(t *testing.T) {
	client := fake.NewClientset(
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", ResourceVersion: "1"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2", ResourceVersion: "1"}})
	takeover := NewTakeover(client)
	now := time.Now()
	takeover.now = func() time.Time { return now }
	if _, err := takeover.Read(context.Background()); err != nil {
		t.Fatal(err)
	}
	now = now.Add(takeoverFresh - time.Second)
	if n := takeover.take("n1"); n == nil {
		t.Error("a list younger than takeoverFresh did not stand in for a read")
	}
	now = now.Add(2 * time.Second)
	if n := takeover.take("n2"); n != nil {
		t.Error("a list older than takeoverFresh stood in for a read")
	}
	var none *Takeover
	if none.take("n1") != nil {
		t.Error("no list (a nil Takeover) stood in for a read")
	}
}

// A term whose list fails leaves no list: not even the one an earlier term of this process
// read, which predates the leader in between.
func TestTakeoverFailedListLeavesNone(t *testing.T) {
	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", ResourceVersion: "1"}})
	takeover := NewTakeover(client)
	if _, err := takeover.Read(context.Background()); err != nil {
		t.Fatal(err)
	}
	client.PrependReactor("list", "nodes", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("the API server is away")
	})
	if _, err := takeover.Read(context.Background()); err == nil {
		t.Fatal("a failed list was not reported")
	}
	if n := takeover.take("n1"); n != nil {
		t.Error("the earlier term's list stood in for a read after this term's list failed")
	}
}
