// SPDX-License-Identifier: Apache-2.0

package nodecondition

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/notice"
)

func node(provider string, conds ...corev1.NodeCondition) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Spec: corev1.NodeSpec{ProviderID: provider}, Status: corev1.NodeStatus{Conditions: conds}}
}

func cond(typ string, status corev1.ConditionStatus, since time.Time) corev1.NodeCondition {
	return corev1.NodeCondition{Type: corev1.NodeConditionType(typ), Status: status, LastTransitionTime: metav1.NewTime(since)}
}

func TestEvaluate(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	w, err := New(Options{Nodes: cache.NewSharedIndexInformer(nil, &corev1.Node{}, 0, nil), DrainTimeout: time.Minute, Now: func() time.Time { return now },
		Conditions: []config.RepairCondition{{Type: "KernelReady", Status: "False", For: 30 * time.Minute}, {Type: "GPU", Status: "Unknown", For: 10 * time.Minute}}})
	if err != nil {
		t.Fatal(err)
	}
	const provider = "aws:///us-east-1a/i-0123456789abcdef0"
	for _, tc := range []struct {
		name string
		n    *corev1.Node
		due  bool
		wait time.Duration
		id   string
	}{
		{name: "healthy", n: node(provider, cond("KernelReady", corev1.ConditionTrue, now.Add(-time.Hour)))},
		{name: "other status", n: node(provider, cond("GPU", corev1.ConditionFalse, now.Add(-time.Hour)))},
		{name: "not yet", n: node(provider, cond("KernelReady", corev1.ConditionFalse, now.Add(-20*time.Minute))), wait: 10 * time.Minute},
		{name: "soonest", n: node(provider, cond("KernelReady", corev1.ConditionFalse, now.Add(-20*time.Minute)), cond("GPU", corev1.ConditionUnknown, now.Add(-5*time.Minute))), wait: 5 * time.Minute},
		{name: "due", n: node(provider, cond("KernelReady", corev1.ConditionFalse, now.Add(-30*time.Minute))), due: true, id: "repair-i-0123456789abcdef0-kernelready"},
		{name: "second due", n: node(provider, cond("KernelReady", corev1.ConditionFalse, now), cond("GPU", corev1.ConditionUnknown, now.Add(-time.Hour))), due: true, id: "repair-i-0123456789abcdef0-gpu"},
		{name: "no providerID", n: node("", cond("KernelReady", corev1.ConditionFalse, now.Add(-time.Hour)))},
	} {
		n, due, wait := w.Evaluate(tc.n)
		if due != tc.due || wait != tc.wait || n.ID != tc.id {
			t.Errorf("%s: due %v wait %v id %q; want %v %v %q", tc.name, due, wait, n.ID, tc.due, tc.wait, tc.id)
		}
		if due && (n.Kind != notice.NodeRepair || n.Source != notice.SourceNodeCondition || !n.Deadline.Equal(now.Add(time.Minute)) || n.InstanceID != "i-0123456789abcdef0") {
			t.Errorf("%s: notice %+v", tc.name, n)
		}
	}
}

func TestAssess(t *testing.T) {
	now := time.Now()
	conds := []config.RepairCondition{{Type: "KernelReady", Status: "False", For: time.Hour}}
	sick := func() *corev1.Node { return node("", cond("KernelReady", corev1.ConditionFalse, now)) }
	well := func() *corev1.Node { return node("", cond("KernelReady", corev1.ConditionTrue, now)) }
	three := []*corev1.Node{sick(), sick(), well(), well(), well(), well(), well(), well(), well(), well()}
	for _, tc := range []struct {
		name    string
		nodes   []*corev1.Node
		l       Limits
		pending int
		cause   string
	}{
		{name: "20% of 20%", nodes: three, l: Limits{MaxUnhealthyPercent: 20}},
		{name: "20% of 10%", nodes: three, l: Limits{MaxUnhealthyPercent: 10}, cause: "unhealthy_share"},
		{name: "paused", nodes: three, l: Limits{MaxUnhealthyPercent: 100, Paused: true}, cause: "paused"},
		{name: "parallel", nodes: three, l: Limits{MaxUnhealthyPercent: 100, MaxParallel: 1}, pending: 1, cause: "max_parallel"},
		{name: "parallel off", nodes: three, l: Limits{MaxUnhealthyPercent: 100}, pending: 9},
		{name: "no nodes", l: Limits{}},
	} {
		b := Assess(tc.nodes, conds, tc.l, tc.pending)
		if b.Cause != tc.cause || b.Open != (tc.cause != "") || b.Open && b.Reason == "" {
			t.Errorf("%s: %+v, want cause %q", tc.name, b, tc.cause)
		}
	}
	if b := Assess(three, conds, Limits{MaxUnhealthyPercent: 20}, 0); b.Unhealthy != 2 || b.Nodes != 10 {
		t.Errorf("counted %+v", b)
	}
}

func TestLeftTo(t *testing.T) {
	withLabels := func(l map[string]string) *corev1.Node { return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: l}} }
	repaired := func(g string) bool { return g == "ng-1" }
	for _, tc := range []struct {
		labels map[string]string
		want   string
	}{
		{nil, ""},
		{map[string]string{LabelKarpenterNodePool: "default"}, "Karpenter (NodePool default)"},
		{map[string]string{LabelEKSNodegroup: "ng-1"}, "EKS node auto repair (managed node group ng-1)"},
		{map[string]string{LabelEKSNodegroup: "ng-2"}, ""},
	} {
		if got := LeftTo(withLabels(tc.labels), repaired); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.labels, got, tc.want)
		}
	}
}

type panicCount struct{ sites []string }

func (p *panicCount) PanicRecovered(site string) { p.sites = append(p.sites, site) }

// panicsOnce panics the first time a repair starts: a node's conditions are input.
type panicsOnce struct {
	quiet
	panicked bool
}

func (p *panicsOnce) Started(*corev1.Node, notice.Notice) {
	if !p.panicked {
		p.panicked = true
		panic("a report that panics")
	}
}

// A panic while looking at one node is recovered and counted, and the watcher goes on with the
// next; what the watcher keeps of a node is dropped when the Node is deleted.
func TestWatcherRecoversAndForgets(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		sick := func(name, instance string) *corev1.Node {
			n := node("aws:///us-east-1a/"+instance, cond("KernelReady", corev1.ConditionFalse, time.Now().Add(-time.Hour)))
			n.Name = name
			return n
		}
		client := fake.NewClientset(sick("a", "i-0000000000000000a"))
		factory := informers.NewSharedInformerFactory(client, 0)
		nodes := factory.Core().V1().Nodes().Informer()
		counted := &panicCount{}
		w, err := New(Options{Nodes: nodes, DrainTimeout: time.Minute, Report: &panicsOnce{}, Panics: counted, Limits: Limits{MaxUnhealthyPercent: 100},
			Conditions: []config.RepairCondition{{Type: "KernelReady", Status: "False", For: time.Minute}}})
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var took []string
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			done <- w.Run(runCtx, func(_ context.Context, ns []notice.Notice) []Fate {
				mu.Lock()
				defer mu.Unlock()
				for _, n := range ns {
					took = append(took, n.Node)
				}
				return []Fate{Started}
			})
		}()
		factory.Start(ctx.Done())
		factory.WaitForCacheSync(ctx.Done())
		tookNode := func(name string) bool {
			mu.Lock()
			defer mu.Unlock()
			return slices.Contains(took, name)
		}
		synctest.Wait()
		if !tookNode("a") {
			t.Fatal("node a not taken once everything waits")
		}
		if _, err := client.CoreV1().Nodes().Create(ctx, sick("b", "i-0000000000000000b"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if !tookNode("b") {
			t.Fatal("node b not taken once everything waits")
		}
		if err := client.CoreV1().Nodes().Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // the informer and the watcher have seen the deletion
		if _, ok, _ := nodes.GetStore().GetByKey("a"); ok {
			t.Fatal("the deleted node is still in the informer once everything waits")
		}
		stop()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(counted.sites, []string{"node_repair"}) {
			t.Errorf("panics counted %v, want one at node_repair", counted.sites)
		}
		if _, ok := w.started["a"]; ok {
			t.Error("the deleted node is still remembered as started")
		}
		if _, ok := w.started["b"]; !ok {
			t.Error("node b's repair is not remembered as started")
		}
	})
}
