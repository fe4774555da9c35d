package deploy_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"lifeboat.dev/lifeboat/internal/preflight"
	"lifeboat.dev/lifeboat/test/sandbox"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// TestAgentNodeRestriction installs the chart (agent and controller) into the sandbox with
// helm, which finds that the API server serves ValidatingAdmissionPolicy and installs the
// agent's node restriction. With the tokens the API server issues to pods, the agent of node A
// may cordon A and delete a pod on A; it is refused node B and a pod on B, with the policy's
// message; a token of the agent's service account without the node-name claim is refused
// everything the policy covers; the controller's identity is not restricted.
func TestAgentNodeRestriction(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a sandbox cluster")
	}
	h := newHelm(t)
	c := sandboxtest.Cluster(t, sandbox.ClusterOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	nodes, err := c.AddNodes(ctx, sandbox.NodeSpec{Index: 1}, sandbox.NodeSpec{Index: 2})
	if err != nil {
		t.Fatal(err)
	}
	nodeA, nodeB := nodes[0].Name, nodes[1].Name
	out, err := runTool(ctx, h.bin, h.env, "install", "lifeboat", chartDir, "--namespace", namespace, "--kubeconfig", c.KubeconfigPath,
		"--set", "controller.enabled=true", "--set", "config.queueUrl=https://sqs.us-east-1.amazonaws.com/123456789012/q",
		"--set", "config.clusterName=sandbox")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "may write only its own Node") {
		t.Errorf("the install notes do not say the node restriction is on:\n%s", out)
	}

	if err := c.EnsureNamespace(ctx, "shop"); err != nil {
		t.Fatal(err)
	}
	pod := func(name, node, serviceAccount string) *corev1.Pod {
		p, err := c.Client.CoreV1().Pods("shop").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: serviceAccount, Containers: []corev1.Container{{Name: "c", Image: "img"}}}},
			metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	// The agent's pod on A, as the DaemonSet would place it (in the chart's namespace).
	agentPod, err := c.Client.CoreV1().Pods(namespace).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "lifeboat-agent-a"},
		Spec: corev1.PodSpec{NodeName: nodeA, ServiceAccountName: "lifeboat-agent", Containers: []corev1.Container{{Name: "c", Image: "img"}}}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	token := func(serviceAccount string, boundTo *corev1.Pod) kubernetes.Interface {
		req := &authenticationv1.TokenRequest{}
		if boundTo != nil {
			req.Spec.BoundObjectRef = &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: boundTo.Name, UID: boundTo.UID}
		}
		tr, err := c.Client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, serviceAccount, req, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		admin, err := c.UserConfig("token-user")
		if err != nil {
			t.Fatal(err)
		}
		return kubernetes.NewForConfigOrDie(&rest.Config{Host: admin.Host, TLSClientConfig: rest.TLSClientConfig{CAData: admin.CAData},
			BearerToken: tr.Status.Token})
	}
	agentA := token("lifeboat-agent", agentPod)
	legacy := token("lifeboat-agent", nil)
	controller := token("lifeboat-controller", nil)

	cordon := func(client kubernetes.Interface, node string, dryRun bool) error {
		opts := metav1.PatchOptions{}
		if dryRun {
			opts.DryRun = []string{metav1.DryRunAll}
		}
		_, err := client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(`{"spec":{"unschedulable":true}}`), opts)
		return err
	}
	// The policy is enforced once the API server has loaded it; a dry run asks without writing.
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		return apierrors.IsForbidden(cordon(agentA, nodeB, true)), nil
	})
	if err != nil {
		t.Fatalf("the agent of %s may still write %s: the policy was never enforced", nodeA, nodeB)
	}

	refused := func(what string, err error, message string) {
		t.Helper()
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), message) {
			t.Errorf("%s: %v, want 403 Forbidden saying %q", what, err, message)
		}
	}
	allowed := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Errorf("%s: %v, want it allowed", what, err)
		}
	}
	allowed("the agent of A cordons A", cordon(agentA, nodeA, false))
	refused("the agent of A cordons B", cordon(agentA, nodeB, false), fmt.Sprintf("the agent of node %s may not write node %s", nodeA, nodeB))
	onA, onB := pod("on-a", nodeA, ""), pod("on-b", nodeB, "")
	allowed("the agent of A deletes a pod on A", agentA.CoreV1().Pods("shop").Delete(ctx, onA.Name, metav1.DeleteOptions{}))
	refused("the agent of A deletes a pod on B", agentA.CoreV1().Pods("shop").Delete(ctx, onB.Name, metav1.DeleteOptions{}),
		fmt.Sprintf("the agent of node %s may not delete pod shop/on-b", nodeA))
	refused("a token without the node-name claim cordons A", cordon(legacy, nodeA, false), "the token carries no node-name claim")
	refused("a token without the node-name claim deletes a pod", legacy.CoreV1().Pods("shop").Delete(ctx, onB.Name, metav1.DeleteOptions{}),
		"the token carries no node-name claim")
	allowed("the controller cordons B", cordon(controller, nodeB, false))
	allowed("the controller deletes a pod on B", controller.CoreV1().Pods("shop").Delete(ctx, onB.Name, metav1.DeleteOptions{}))

	// lifeboat preflight tells the two apart, by dry runs that change nothing.
	pod("still-on-b", nodeB, "")
	if row := preflight.CheckNodeRestriction(ctx, agentA, nodeA); row.Status != preflight.StatusOK {
		t.Errorf("preflight with the agent's token: %+v, want ok", row)
	}
	if row := preflight.CheckNodeRestriction(ctx, controller, nodeA); row.Status != preflight.StatusWarn || !strings.Contains(row.Detail, "may write node") {
		t.Errorf("preflight with an unrestricted token: %+v, want a warning", row)
	}
	if pods, err := c.Client.CoreV1().Pods("shop").List(ctx, metav1.ListOptions{}); err != nil || len(pods.Items) != 1 {
		t.Errorf("preflight's dry runs deleted a pod: %d left, %v", len(pods.Items), err)
	}

	if n, err := c.Client.CoreV1().Nodes().Get(ctx, nodeB, metav1.GetOptions{}); err != nil || !n.Spec.Unschedulable {
		t.Errorf("%s: %v; want it cordoned by the controller only", nodeB, err)
	}
}
