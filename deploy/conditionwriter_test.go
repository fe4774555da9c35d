// SPDX-License-Identifier: Apache-2.0

package deploy_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"lifeboat.dev/lifeboat/test/sandbox"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// TestConditionWriterPolicy: with conditionWriterPolicy on, a node agent whose ClusterRole may
// patch every Node's status (as node-problem-detector's does) writes the status of the Node
// its pod runs on, and is refused every other Node's, naming the policy; a token without the
// node-name claim is refused too. Without the policy, the same token writes any Node's status:
// the attack node repair would otherwise act on.
func TestConditionWriterPolicy(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a sandbox cluster")
	}
	h := newHelm(t)
	c, _ := sandboxtest.Shared(t, sandbox.ClusterOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	nodes, err := c.AddNodes(ctx, sandbox.NodeSpec{Index: 1}, sandbox.NodeSpec{Index: 2})
	if err != nil {
		t.Fatal(err)
	}
	own, other := nodes[0].Name, nodes[1].Name
	const agentNS, agentSA = "node-agents", "node-problem-detector"
	if err := c.EnsureNamespace(ctx, agentNS); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.CoreV1().ServiceAccounts(agentNS).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: agentSA}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: agentSA},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes/status"}, Verbs: []string{"patch"}}}}
	if _, err := c.Client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: agentSA},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: agentSA},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: agentNS, Name: agentSA}}}
	if _, err := c.Client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod, err := c.Client.CoreV1().Pods(agentNS).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "npd-" + own},
		Spec: corev1.PodSpec{NodeName: own, ServiceAccountName: agentSA, Containers: []corev1.Container{{Name: "c", Image: "img"}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	agent, legacy := tokenClient(ctx, t, c, agentNS, agentSA, pod), tokenClient(ctx, t, c, agentNS, agentSA, nil)
	markSick := func(client kubernetes.Interface, node string, dryRun bool) error {
		opts := metav1.PatchOptions{}
		if dryRun {
			opts.DryRun = []string{metav1.DryRunAll}
		}
		body := `{"status":{"conditions":[{"type":"KernelReady","status":"False","reason":"Forged","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}`
		_, err := client.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, []byte(body), opts, "status")
		return err
	}
	if err := markSick(agent, other, true); err != nil {
		t.Fatalf("without the policy the agent's token could not write another Node's status (the test's RBAC is wrong): %v", err)
	}

	if _, err := runTool(ctx, h.bin, h.env, "install", "lifeboat", chartDir, "--namespace", namespace, "--kubeconfig", c.KubeconfigPath,
		"--set", "conditionWriterPolicy.enabled=true", "--set", "conditionWriterPolicy.serviceAccounts[0]="+agentNS+"/"+agentSA); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		return apierrors.IsForbidden(markSick(agent, other, true)), nil
	})
	if err != nil {
		t.Fatalf("the agent of %s may still write the status of %s: the policy was never enforced", own, other)
	}
	if err := markSick(agent, own, false); err != nil {
		t.Errorf("the agent wrote its own Node's condition: %v, want it allowed", err)
	}
	for what, err := range map[string]error{"another Node": markSick(agent, other, false), "a token without the node-name claim": markSick(legacy, own, false)} {
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "conditionWriterPolicy") {
			t.Errorf("%s: %v, want 403 Forbidden naming conditionWriterPolicy", what, err)
		}
	}
	if n, err := c.Client.CoreV1().Nodes().Get(ctx, other, metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	} else {
		for _, cond := range n.Status.Conditions {
			if cond.Type == "KernelReady" {
				t.Errorf("%s carries the forged condition %+v", other, cond)
			}
		}
	}

	// A value that is not namespace/name fails the render, naming it.
	if _, err := runTool(ctx, h.bin, h.env, "template", "lifeboat", chartDir, "--set", "conditionWriterPolicy.enabled=true",
		"--set", "conditionWriterPolicy.serviceAccounts[0]=node-problem-detector"); err == nil || !strings.Contains(err.Error(), "is not namespace/name") {
		t.Errorf("a service account without its namespace: %v, want the render refused", err)
	}
}
