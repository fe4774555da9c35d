// SPDX-License-Identifier: Apache-2.0

package nodecondition

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/notice"
)

func TestLeftTo(t *testing.T) {
	withLabels := func(l map[string]string) *corev1.Node { return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: l}} }
	listed := func(g string) bool { return g == "ng-listed" }
	throttled := errors.New("throttled")
	var asked []string
	ask := func(_ context.Context, g string) (bool, error) {
		asked = append(asked, g)
		switch g {
		case "ng-on", "ng-listed":
			return true, nil
		case "ng-failing":
			return false, throttled
		}
		return false, nil
	}
	for _, tc := range []struct {
		labels    map[string]string
		karpenter bool
		ask       bool
		want      string
		err       error
		asked     []string
	}{
		{labels: nil, karpenter: true, ask: true},
		{labels: map[string]string{LabelKarpenterNodePool: "default"}, karpenter: true, ask: true, want: "Karpenter (NodePool default)"},
		{labels: map[string]string{LabelKarpenterNodePool: "default"}},
		{labels: map[string]string{LabelEKSNodegroup: "ng-listed"}, want: "EKS node auto repair (managed node group ng-listed)"},
		{labels: map[string]string{LabelEKSNodegroup: "ng-listed"}, ask: true, want: "EKS node auto repair (managed node group ng-listed)"},
		{labels: map[string]string{LabelEKSNodegroup: "ng-on"}, karpenter: true},
		{labels: map[string]string{LabelEKSNodegroup: "ng-on"}, ask: true, want: "EKS node auto repair (managed node group ng-on)", asked: []string{"ng-on"}},
		{labels: map[string]string{LabelEKSNodegroup: "ng-off"}, ask: true, asked: []string{"ng-off"}},
		{labels: map[string]string{LabelEKSNodegroup: "ng-failing"}, ask: true, err: throttled, asked: []string{"ng-failing"}},
		{labels: map[string]string{LabelKarpenterNodePool: "default", LabelEKSNodegroup: "ng-on"}, karpenter: true, ask: true, want: "Karpenter (NodePool default)"},
	} {
		asked = nil
		o := Owners{Karpenter: tc.karpenter, Listed: listed}
		if tc.ask {
			o.Ask = ask
		}
		got, err := o.LeftTo(context.Background(), withLabels(tc.labels))
		if got != tc.want || !errors.Is(err, tc.err) || (err == nil) != (tc.err == nil) || !slices.Equal(asked, tc.asked) {
			t.Errorf("%v (Karpenter repairs %v, ask %v): %q, %v, asked %v; want %q, %v, asked %v", tc.labels, tc.karpenter, tc.ask, got, err, asked, tc.want, tc.err, tc.asked)
		}
	}
}

// ownerReports records what the watcher says of owners.
type ownerReports struct {
	quiet
	mu      sync.Mutex
	unknown []string
	left    []string
}

func (r *ownerReports) OwnerUnknown(_ context.Context, node *corev1.Node, _ notice.Notice, _ error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.unknown = append(r.unknown, node.Name)
}

func (r *ownerReports) LeftTo(node *corev1.Node, _ notice.Notice, _ string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.left = append(r.left, node.Name)
}

func (r *ownerReports) said() (unknown, left []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.unknown), slices.Clone(r.left)
}

// EKS is asked only about a node whose repair is due, never about a healthy one or one not
// due yet. While it cannot answer, the node is neither taken nor left: said once, looked at
// again; once EKS says its node group repairs it, it is left to EKS, said once. A node of a
// node group whose repair is off is taken.
func TestWatcherAsksEKSOnlyWhenDue(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		mk := func(name, instance, group string, c corev1.NodeCondition) *corev1.Node {
			n := node("aws:///us-east-1a/"+instance, c)
			n.Name, n.Labels = name, map[string]string{LabelEKSNodegroup: group}
			return n
		}
		now := time.Now()
		client := fake.NewClientset(
			mk("sick", "i-0000000000000000a", "ng", cond("KernelReady", corev1.ConditionFalse, now.Add(-time.Hour))),
			mk("healthy", "i-0000000000000000b", "ng-healthy", cond("KernelReady", corev1.ConditionTrue, now.Add(-time.Hour))),
			mk("soon", "i-0000000000000000c", "ng-soon", cond("KernelReady", corev1.ConditionFalse, now)),
			mk("plain", "i-0000000000000000d", "ng-off", cond("KernelReady", corev1.ConditionFalse, now.Add(-time.Hour))))
		factory := informers.NewSharedInformerFactory(client, 0)
		nodes := factory.Core().V1().Nodes().Informer()
		var mu sync.Mutex
		var asked, took []string
		answer := map[string]error{"ng": errors.New("AccessDeniedException")}
		ask := func(_ context.Context, g string) (bool, error) {
			mu.Lock()
			defer mu.Unlock()
			asked = append(asked, g)
			return g == "ng", answer[g]
		}
		reports := &ownerReports{}
		w, err := New(Options{Nodes: nodes, DrainTimeout: time.Minute, Report: reports, Limits: Limits{MaxUnhealthyPercent: 100},
			Owners: Owners{Ask: ask}, Recheck: 15 * time.Second,
			Policies: config.RepairPolicies{{Condition: "KernelReady", Status: "False", Wait: 10 * time.Minute, Action: config.PolicyReplace}}})
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			_ = w.Run(ctx, func(_ context.Context, ns []notice.Notice) []Fate {
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
		synctest.Wait()
		snapshot := func() (a, tk []string) {
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(asked), slices.Clone(took)
		}
		a, tk := snapshot()
		if slices.Contains(a, "ng-soon") || slices.Contains(a, "ng-healthy") || !slices.Equal(tk, []string{"plain"}) {
			t.Errorf("asked %v, took %v; want no ask for the nodes healthy or not due, the node of ng-off taken", a, tk)
		}
		time.Sleep(time.Minute) // four rechecks of the node EKS cannot answer for
		synctest.Wait()
		a, tk = snapshot()
		if n := len(slices.DeleteFunc(a, func(g string) bool { return g != "ng" })); n < 2 {
			t.Errorf("EKS asked %d times about ng in a minute of rechecks, want it asked again", n)
		}
		if unknown, left := reports.said(); !slices.Equal(unknown, []string{"sick"}) || len(left) != 0 || slices.Contains(tk, "sick") {
			t.Errorf("said unknown %v, left %v, took %v; want the sick node said unknown once, neither left nor taken", unknown, left, tk)
		}
		mu.Lock()
		answer["ng"] = nil // EKS answers: auto repair on
		mu.Unlock()
		time.Sleep(30 * time.Second)
		synctest.Wait()
		_, tk = snapshot()
		if unknown, left := reports.said(); len(unknown) != 1 || !slices.Equal(left, []string{"sick"}) || slices.Contains(tk, "sick") {
			t.Errorf("said unknown %v, left %v, took %v; want the sick node left to EKS once", unknown, left, tk)
		}
		if a, _ := snapshot(); slices.Contains(a, "ng-soon") || slices.Contains(a, "ng-healthy") {
			t.Errorf("asked %v: EKS was asked about a node whose repair was not due", a)
		}
		cancel()
	})
}
