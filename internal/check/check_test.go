// SPDX-License-Identifier: Apache-2.0

package check_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"lifeboat.dev/lifeboat/deploy"
	"lifeboat.dev/lifeboat/internal/check"
	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/test/sandbox"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// shop builds the objects of one namespace as a cluster would hold them (no controller
// manager here: the ReplicaSets, the pods and the budgets' status are written by the test).
type shop struct {
	t      *testing.T
	ctx    context.Context
	client kubernetes.Interface
}

func (s shop) must(_ any, err error) {
	s.t.Helper()
	if err != nil {
		s.t.Fatal(err)
	}
}

// deployment creates a Deployment of replicas, its ReplicaSet and its pods, edited by edit.
func (s shop) deployment(name string, replicas int32, edit func(*corev1.Pod)) {
	s.t.Helper()
	sel := map[string]string{"app": name}
	d, err := s.client.AppsV1().Deployments("shop").Create(s.ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img"}}}}}},
		metav1.CreateOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	rs, err := s.client.AppsV1().ReplicaSets("shop").Create(s.ctx, &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name + "-5d8f",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: name, UID: d.UID, Controller: ptr.To(true)}}},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: sel}, Template: d.Spec.Template}}, metav1.CreateOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	for i := range replicas {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name + "-5d8f-" + string(rune('a'+i)), Labels: sel,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr.To(true)}}},
			Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Image: "img"}}}}
		if edit != nil {
			edit(p)
		}
		s.must(s.client.CoreV1().Pods("shop").Create(s.ctx, p, metav1.CreateOptions{}))
	}
}

// budget creates a PodDisruptionBudget for app with the status the disruption controller
// would compute.
func (s shop) budget(app string, allowed, desired, current int32) {
	s.t.Helper()
	pdb, err := s.client.PolicyV1().PodDisruptionBudgets("shop").Create(s.ctx, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: app},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}},
		metav1.CreateOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	pdb.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: pdb.Generation, DisruptionsAllowed: allowed, DesiredHealthy: desired, CurrentHealthy: current, ExpectedPods: current}
	s.must(s.client.PolicyV1().PodDisruptionBudgets("shop").UpdateStatus(s.ctx, pdb, metav1.UpdateOptions{}))
}

// TestCheck: a workload held by a budget that allows no disruption is named with its budget;
// a 600 s grace period and a single-replica Deployment are flagged with their fixes; a
// do-not-disrupt pod and a pod without a controller are reported; a healthy workload is not.
func TestCheck(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, _ := sandboxtest.Shared(t, sandbox.ClusterOptions{NoKwok: true})
	if err := c.EnsureNamespace(ctx, "shop"); err != nil {
		t.Fatal(err)
	}
	s := shop{t: t, ctx: ctx, client: c.Client}
	s.deployment("web", 3, nil) // healthy: a budget that allows one
	s.budget("web", 1, 2, 3)
	s.deployment("ledger", 2, nil)
	s.budget("ledger", 0, 2, 2)
	s.deployment("search", 2, func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](600) })
	s.budget("search", 1, 1, 2)
	s.deployment("admin", 1, nil)
	s.deployment("batch", 2, func(p *corev1.Pod) { p.Annotations = map[string]string{drain.AnnotationDoNotDisrupt: "true"} })
	s.budget("batch", 1, 1, 2)
	s.must(c.Client.CoreV1().Pods("shop").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "debug"},
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Image: "img"}}}}, metav1.CreateOptions{}))

	findings, err := check.Check(ctx, sandboxtest.ClientWith(t, ctx, c, "ci", deploy.ReaderPermissions), check.Options{
		Policy: drain.Policy{IgnoreDaemonSets: true, DeleteLocalData: true, OwnPod: types.NamespacedName{Namespace: "kube-system", Name: "lifeboat"}}, PodGracePeriod: -1})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]check.Finding{}
	for _, f := range findings {
		got[f.Workload+" "+f.Reason] = f
	}
	want := map[string]struct {
		pods   int
		detail string
		fix    string
	}{
		"deployment/ledger " + check.ReasonBudgetBlocks:  {2, "PodDisruptionBudget ledger allows no disruption now (needs 2 healthy pods and has 2)", "run more replicas"},
		"deployment/search " + check.ReasonLongGrace:     {2, "terminationGracePeriodSeconds 600", "lower terminationGracePeriodSeconds"},
		"deployment/admin " + check.ReasonSingleReplica:  {1, "1 replica and no PodDisruptionBudget", "run 2 or more replicas with a PodDisruptionBudget"},
		"deployment/batch " + check.ReasonDoNotDisrupt:   {2, "marked not to disrupt", "remove the mark"},
		"pod/debug " + check.ReasonUnmanaged:             {1, "no controller", "Deployment, StatefulSet or Job"},
		"pod/debug " + check.ReasonSingleReplica:         {}, // a bare pod has no replicas to count: not reported as such
		"deployment/web " + check.ReasonBudgetBlocks:     {}, // healthy
		"deployment/web " + check.ReasonSingleReplica:    {},
		"deployment/search " + check.ReasonSingleReplica: {},
	}
	for key, w := range want {
		f, ok := got[key]
		switch {
		case w.pods == 0 && ok:
			t.Errorf("%s reported: %+v", key, f)
		case w.pods == 0:
		case !ok:
			t.Errorf("%s not reported; findings: %+v", key, findings)
		case f.Pods != w.pods || !strings.Contains(f.Detail, w.detail) || !strings.Contains(f.Fix, w.fix):
			t.Errorf("%s: %+v; want %d pods, detail with %q, fix with %q", key, f, w.pods, w.detail, w.fix)
		}
	}
	if len(findings) != 5 {
		t.Errorf("%d findings, want 5: %+v", len(findings), findings)
	}

	var table bytes.Buffer
	if err := check.Print(&table, findings, "table"); err != nil {
		t.Fatal(err)
	}
	t.Logf("lifeboat check:\n%s", table.String())
	for _, line := range []string{"shop       deployment/admin", "fix: run 2 or more replicas", "5 workloads cannot leave a node cleanly"} {
		if !strings.Contains(table.String(), line) {
			t.Errorf("the table lacks %q:\n%s", line, table.String())
		}
	}
	var js bytes.Buffer
	var decoded struct{ Findings []check.Finding }
	if err := check.Print(&js, findings, "json"); err != nil || json.Unmarshal(js.Bytes(), &decoded) != nil || len(decoded.Findings) != 5 {
		t.Errorf("JSON (%v): %s", err, js.String())
	}
	var none bytes.Buffer
	if err := check.Print(&none, nil, "table"); err != nil || !strings.Contains(none.String(), "Every workload can leave") {
		t.Errorf("no findings: %q (%v)", none.String(), err)
	}
}
