// SPDX-License-Identifier: Apache-2.0

package episode

import (
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/record"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// The condition is written once per phase change, and once when the drain first finds a pod
// held; further changes of the held pods are written at most once per refresh interval,
// coalesced; the end turns it False and forgets the node.
func TestConditionWrites(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
		client := fake.NewClientset(node)
		c := newConditions(nodes.NewWriter(client), slog.New(slog.DiscardHandler))
		c.refresh = 500 * time.Millisecond
		var (
			mu   sync.Mutex
			held []string
		)
		c.held = func(string) []string { mu.Lock(); defer mu.Unlock(); return held }
		hold := func(pods ...string) {
			mu.Lock()
			held = pods
			mu.Unlock()
			c.heldChanged("n1")
		}
		writes := func() int {
			n := 0
			for _, a := range client.Actions() {
				if a.GetVerb() == "patch" && a.GetSubresource() == "status" {
					n++
				}
			}
			return n
		}
		current := func() *corev1.NodeCondition {
			n, err := client.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return nodes.ConditionOf(n, nodes.ConditionInterruption)
		}
		// Each write of the condition is told, so that a wait for it lets the bubble's clock run
		// on to the refresh that makes it.
		var wroteMu sync.Mutex
		wrote := make(chan struct{})
		client.PrependReactor("patch", "nodes", func(clienttesting.Action) (bool, runtime.Object, error) {
			wroteMu.Lock()
			defer wroteMu.Unlock()
			close(wrote)
			wrote = make(chan struct{})
			return false, nil, nil
		})
		waitWrites := func(want int, what string) {
			t.Helper()
			for {
				wroteMu.Lock()
				next := wrote
				wroteMu.Unlock()
				if writes() >= want {
					break
				}
				select {
				case <-next:
				case <-time.After(time.Hour):
					t.Fatalf("%s: %d writes in an hour, want %d", what, writes(), want)
				}
			}
			synctest.Wait() // and no more
			if writes() != want {
				t.Fatalf("%s: %d writes, want %d; condition %+v", what, writes(), want, current())
			}
		}

		c.set(node, ConditionEpisodeEnded, "never shown")
		synctest.Wait()
		if writes() != 0 {
			t.Fatalf("clearing a condition never shown wrote %d times", writes())
		}
		c.set(node, ConditionDraining, "Draining for notice x")
		waitWrites(1, "draining")
		hold("shop/a (budget)")
		waitWrites(2, "the first held pod, at once")
		if got := current(); got.Message != "Draining for notice x; 1 pod(s) held: shop/a (budget)" {
			t.Errorf("message %q", got.Message)
		}
		began := time.Now()
		hold("shop/a (budget)", "shop/b (budget)")
		hold("shop/a (budget)", "shop/b (budget)", "shop/c (budget)")
		synctest.Wait()
		if writes() != 2 {
			t.Fatalf("held pods changing within the refresh interval wrote at once: %d writes", writes())
		}
		waitWrites(3, "the refresh, coalesced")
		if took := time.Since(began); took != c.refresh {
			t.Errorf("refreshed after %v, want the interval %v", took, c.refresh)
		}
		if got := current(); got.Message != "Draining for notice x; 3 pod(s) held: shop/a (budget); shop/b (budget); shop/c (budget)" {
			t.Errorf("message %q", got.Message)
		}
		c.set(node, ConditionHandedBack, "handed back")
		waitWrites(4, "handed back, at once")
		c.set(node, ConditionHandedBack, "handed back")
		c.set(node, ConditionEpisodeEnded, "over")
		waitWrites(5, "the end")
		if got := current(); got.Status != corev1.ConditionFalse || got.Reason != ConditionEpisodeEnded {
			t.Errorf("after the end: %+v", got)
		}
		synctest.Wait()
		c.mu.Lock()
		defer c.mu.Unlock()
		if len(c.shown) != 0 || c.workers != 0 {
			t.Errorf("after the end: %d nodes remembered, %d workers", len(c.shown), c.workers)
		}
	})
}

// A process new to a node (a restart, or a leader taking over the last one's drains) sends
// nothing, not even a read, when the node it just read or wrote already shows the condition
// it wants, and writes once when the node shows anything else; the phase after writes as
// usual. Without
// this, a new leader rewrote every draining node's condition, unchanged, in the middle of
// the evictions it had taken over.
func TestConditionTakenOverNotRewritten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		shown := corev1.NodeCondition{Type: nodes.ConditionInterruption, Status: corev1.ConditionTrue, Reason: ConditionDraining,
			Message: drainingMessage("spot-i-1", time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))}
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{shown}}}
		other := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: nodes.ConditionInterruption, Status: corev1.ConditionTrue, Reason: ConditionCordoned, Message: "Cordoned for notice spot-i-2"}}}}
		client := fake.NewClientset(node, other)
		c := newConditions(nodes.NewWriter(client), slog.New(slog.DiscardHandler))
		// requests about the node: a read to check counts as much as a write
		writesTo := func(name string) int {
			n := 0
			for _, a := range client.Actions() {
				if p, ok := a.(interface{ GetName() string }); ok && p.GetName() == name {
					n++
				}
			}
			return n
		}
		settle := func(want map[string]int) {
			t.Helper()
			synctest.Wait() // every write made, and none that should not come
			for name, n := range want {
				if got := writesTo(name); got != n {
					t.Fatalf("%s: %d requests, want %d", name, got, n)
				}
			}
		}

		c.set(node, ConditionDraining, shown.Message)
		c.set(other, ConditionDraining, drainingMessage("spot-i-2", time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)))
		settle(map[string]int{"n1": 0, "n2": 1})

		c.set(node, ConditionHandedBack, "Drained and handed back")
		settle(map[string]int{"n1": 1, "n2": 1})
	})
}

// The condition's last write of a drain (handed back) starts from the node as the write that
// finished the notice left it, not from the copy before it: from that one it met a conflict and
// a read on every drained node.
func TestHandedBackWrittenFromTheFinishedNode(t *testing.T) {
	spot := queuedSpot()
	client := fake.NewSimpleClientset(ownedNode(t, record.PhaseDraining, &record.Owner{Origin: queueOrigin, Holder: holderName(), Renewed: time.Now().UTC()}, spot))
	var (
		mu         sync.Mutex
		finishedRV string // the resourceVersion the notice's finishing write left
		handedBack string // the resourceVersion the handed-back condition was computed from
	)
	nodesGVR := corev1.SchemeGroupVersion.WithResource("nodes")
	// Every patch moves the node's resourceVersion on, as the API server's writes do.
	client.PrependReactor("patch", "nodes", func(a clienttesting.Action) (bool, runtime.Object, error) {
		patch := a.(clienttesting.PatchAction)
		_, obj, err := clienttesting.ObjectReaction(client.Tracker())(a)
		if err != nil {
			return true, nil, err
		}
		n := obj.(*corev1.Node)
		rv, _ := strconv.Atoi(n.ResourceVersion)
		n.ResourceVersion = strconv.Itoa(rv + 1)
		if err := client.Tracker().Update(nodesGVR, n, ""); err != nil {
			return true, nil, err
		}
		var sent struct {
			Metadata struct {
				ResourceVersion string `json:"resourceVersion"`
			} `json:"metadata"`
		}
		_ = json.Unmarshal(patch.GetPatch(), &sent)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case patch.GetSubresource() == "" && strings.Contains(string(patch.GetPatch()), `"phase\":\"drained\"`):
			finishedRV = n.ResourceVersion
		case patch.GetSubresource() == "status" && strings.Contains(string(patch.GetPatch()), ConditionHandedBack):
			handedBack = sent.Metadata.ResourceVersion
		}
		return true, n, nil
	})
	h := NewHandler(sandboxtest.Config(t, ""), client, slog.New(slog.DiscardHandler), Options{Origin: queueOrigin})
	node, _ := client.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
	if _, err := h.Reconcile(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return handedBack != "", nil
	})
	mu.Lock()
	defer mu.Unlock()
	if err != nil || finishedRV == "" {
		t.Fatalf("finished at resourceVersion %q, handed-back condition from %q: want both written", finishedRV, handedBack)
	}
	if handedBack != finishedRV {
		t.Errorf("the handed-back condition was computed from resourceVersion %s, want %s (the node as the finishing write left it)", handedBack, finishedRV)
	}
}
