// SPDX-License-Identifier: Apache-2.0

package sandboxtest_test

import (
	"context"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"lifeboat.dev/lifeboat/test/sandbox"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

func TestMain(m *testing.M) { sandboxtest.Main(m) }

// A shared cluster is handed to the next test empty: what the first test added, namespaced or
// cluster-wide, is gone, the control plane's own objects are not, and the audit log starts anew.
func TestSharedClusterIsEmptiedBetweenTests(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var first *sandbox.Cluster
	var firstNamespace string
	t.Run("fill", func(t *testing.T) {
		c, ns := sandboxtest.Shared(t, sandbox.ClusterOptions{AuditLog: true})
		first, firstNamespace = c, ns
		nodes, err := c.AddNodes(ctx, sandbox.NodeSpec{Index: 1})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.EnsureNamespace(ctx, "shop"); err != nil {
			t.Fatal(err)
		}
		for _, namespace := range []string{"shop", ns, "default"} {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: namespace, Finalizers: []string{"example.com/hold"}},
				Spec: corev1.PodSpec{NodeName: nodes[0].Name, Containers: []corev1.Container{{Name: "c", Image: "img"}}}}
			if _, err := c.Client.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		// A pod terminating on a node no kubelet runs stays so until it is deleted at once.
		grace := int64(300)
		leaving := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "leaving", Namespace: "shop"},
			Spec: corev1.PodSpec{NodeName: "no-kubelet", TerminationGracePeriodSeconds: &grace, Containers: []corev1.Container{{Name: "c", Image: "img"}}}}
		if _, err := c.Client.CoreV1().Pods("shop").Create(ctx, leaving, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := c.Client.CoreV1().Pods("shop").Delete(ctx, leaving.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "lifeboat-leader", Namespace: "kube-system"}}
		if _, err := c.Client.CoordinationV1().Leases("kube-system").Create(ctx, lease, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "test-role"}}
		if _, err := c.Client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// A policy that refuses every pod deletion: the reset must remove it before the pods.
		fail := admissionregistrationv1.Fail
		policy := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "no-pod-deletes"},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{FailurePolicy: &fail,
				MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Delete},
						Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}}}},
				Validations: []admissionregistrationv1.Validation{{Expression: "false"}}}}
		if _, err := c.Client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "no-pod-deletes"},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: policy.Name,
				ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}}}
		if _, err := c.Client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	})
	if first == nil {
		if testing.Short() {
			t.Skip("the first subtest was skipped (-short)")
		}
		t.Fatal("the first subtest got no cluster")
	}
	t.Run("find it empty", func(t *testing.T) {
		c, ns := sandboxtest.Shared(t, sandbox.ClusterOptions{AuditLog: true})
		if c != first {
			t.Fatal("a second cluster was started although the first was free")
		}
		if ns == firstNamespace {
			t.Errorf("namespace %s handed out twice", ns)
		}
		if nodes, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err != nil || len(nodes.Items) != 0 {
			t.Errorf("nodes left: %v %v", nodes, err)
		}
		for _, namespace := range []string{"shop", firstNamespace} {
			if _, err := c.Client.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("namespace %s: want it gone, got %v", namespace, err)
			}
		}
		if pods, err := c.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{}); err != nil || len(pods.Items) != 0 {
			t.Errorf("pods left: %d %v", len(pods.Items), err)
		}
		if _, err := c.Client.CoordinationV1().Leases("kube-system").Get(ctx, "lifeboat-leader", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("lease: want it gone, got %v", err)
		}
		if _, err := c.Client.RbacV1().ClusterRoles().Get(ctx, "test-role", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("cluster role: want it gone, got %v", err)
		}
		if _, err := c.Client.RbacV1().ClusterRoles().Get(ctx, "cluster-admin", metav1.GetOptions{}); err != nil {
			t.Errorf("bootstrap cluster role: %v", err)
		}
		if _, err := c.Client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, "no-pod-deletes", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("admission policy: want it gone, got %v", err)
		}
		if _, err := c.Client.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
			t.Errorf("default namespace: %v", err)
		}
		events, err := c.AuditEvents(sandbox.ByUser("admin"))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range events {
			if e.ObjectRef != nil && e.ObjectRef.Resource == "clusterroles" && e.Verb == "create" {
				t.Errorf("audit log shows the first test's request: %+v", e)
			}
		}
		// The second test may reuse the first one's fixed names.
		if _, err := c.AddNodes(ctx, sandbox.NodeSpec{Index: 1}); err != nil {
			t.Fatal(err)
		}
		if err := c.EnsureNamespace(ctx, "shop"); err != nil {
			t.Fatal(err)
		}
	})
}
