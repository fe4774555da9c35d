// SPDX-License-Identifier: Apache-2.0

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

	"lifeboat.dev/lifeboat/internal/nodes"
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
	c, _ := sandboxtest.Shared(t, sandbox.ClusterOptions{})
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
		return tokenClient(ctx, t, c, namespace, serviceAccount, boundTo)
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

	agentOn := func(node string) kubernetes.Interface {
		p, err := c.Client.CoreV1().Pods(namespace).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "lifeboat-agent-"},
			Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: "lifeboat-agent", Containers: []corev1.Container{{Name: "c", Image: "img"}}}},
			metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return token("lifeboat-agent", p)
	}
	checkOwnNodeWrites(ctx, t, c, h, agentA, nodeA, agentOn)
}

// checkOwnNodeWrites holds the agent of node to what it writes on its own Node:
// spec.unschedulable, its taint keys, lifeboat.dev/ labels and annotations, and the
// out-of-service taint and the load-balancer label only once the chart's settings turn them on.
// In the status it may set and clear its lifeboat.dev/Interruption condition, and nothing else.
// Every other label, annotation, taint, spec field, condition and status field is refused
// with a message naming it. The agent's own writes go through nodes.Writer, as Lifeboat makes them, with
// foreign taints (one with a timeAdded) carried over in the replaced list.
func checkOwnNodeWrites(ctx context.Context, t *testing.T, c *sandbox.Cluster, h helm, agent kubernetes.Interface, node string,
	agentOn func(node string) kubernetes.Interface) {
	t.Helper()
	const (
		dedicated = "example.com/dedicated"
		excludeLB = nodes.LabelExcludeFromLoadBalancers
	)
	now := metav1.Now()
	_, err := nodes.NewWriter(c.Client).Apply(ctx, node, nil, "foreign taints and annotation",
		nodes.AddTaint(dedicated, "batch", corev1.TaintEffectNoSchedule),
		func(n *corev1.Node) {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "example.com/draining", Effect: corev1.TaintEffectNoExecute, TimeAdded: &now})
		},
		nodes.SetAnnotation("example.com/owner", "team-a"))
	if err != nil {
		t.Fatal(err)
	}
	w := nodes.NewWriter(agent)
	write := func(edits ...nodes.Edit) error {
		_, err := w.Apply(ctx, node, nil, "test edit", edits...)
		return err
	}
	patch := func(client kubernetes.Interface, name, body string, subresources ...string) error {
		_, err := client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, []byte(body), metav1.PatchOptions{}, subresources...)
		return err
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
	prefix := "the agent of node " + node + " may not change "

	allowed("the agent's intake edits (cordon, its taint, record, lifeboat.dev/ label)", write(nodes.Cordon(),
		nodes.AddTaint(nodes.TaintSpotInterruption, "notice-1", corev1.TaintEffectNoSchedule),
		nodes.SetAnnotation("lifeboat.dev/interruption", `{"v":1}`), nodes.SetLabel(nodes.LabelUncordonAfterReboot, "true")))
	allowed("the agent's other taint keys", write(nodes.AddTaint(nodes.TaintScheduledMaintenance, "n", corev1.TaintEffectNoSchedule),
		nodes.AddTaint(nodes.TaintASGLifecycle, "n", corev1.TaintEffectNoExecute), nodes.AddTaint(nodes.TaintRebalance, "n", corev1.TaintEffectPreferNoSchedule)))
	n, err := c.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for _, tt := range n.Spec.Taints {
		keys[tt.Key] = true
	}
	if !n.Spec.Unschedulable || !keys[dedicated] || !keys["example.com/draining"] || !keys[nodes.TaintSpotInterruption] || !keys[nodes.TaintRebalance] ||
		n.Labels[nodes.LabelUncordonAfterReboot] != "true" || n.Annotations["example.com/owner"] != "team-a" {
		t.Errorf("after the agent's edits: unschedulable %v, taints %v, labels %v, annotations %v", n.Spec.Unschedulable, n.Spec.Taints, n.Labels, n.Annotations)
	}

	refused("a control-plane role label", patch(agent, node, `{"metadata":{"labels":{"node-role.kubernetes.io/control-plane":""}}}`),
		prefix+"label(s) node-role.kubernetes.io/control-plane of its Node; it may change only lifeboat.dev/ labels")
	refused("another zone", patch(agent, node, `{"metadata":{"labels":{"topology.kubernetes.io/zone":"us-east-1b"}}}`),
		prefix+"label(s) topology.kubernetes.io/zone")
	refused("a label removed", write(nodes.RemoveLabel("type")), prefix+"label(s) type")
	refused("the load-balancer label while excludeFromLoadBalancers is off", write(nodes.SetLabel(excludeLB, "true")), prefix+"label(s) "+excludeLB)
	refused("another annotation", patch(agent, node, `{"metadata":{"annotations":{"example.com/other":"x"}}}`),
		prefix+"annotation(s) example.com/other of its Node; it may change only lifeboat.dev/ annotations")
	refused("another annotation changed", write(nodes.SetAnnotation("example.com/owner", "team-b")), prefix+"annotation(s) example.com/owner")
	refused("a foreign taint added", write(nodes.AddTaint("example.com/new", "x", corev1.TaintEffectNoSchedule)),
		prefix+"taint(s) example.com/new of its Node; it may change only taints with the keys aws-node-termination-handler/spot-itn")
	refused("a foreign taint removed", write(nodes.RemoveTaint(dedicated, "")), prefix+"taint(s) "+dedicated)
	refused("a foreign taint's value changed", write(nodes.AddTaint(dedicated, "web", corev1.TaintEffectNoSchedule)), prefix+"taint(s) "+dedicated)
	refused("a NoExecute taint lifted", write(nodes.RemoveTaint("example.com/draining", "")), prefix+"taint(s) example.com/draining")
	refused("the out-of-service taint while enableOutOfServiceTaint is off",
		write(nodes.AddTaint(nodes.TaintOutOfService, "nodeshutdown", corev1.TaintEffectNoExecute)), prefix+"taint(s) "+nodes.TaintOutOfService)
	refused("a pod CIDR", patch(agent, node, `{"spec":{"podCIDR":"10.244.7.0/24"}}`), prefix+"spec.podCIDR")
	refused("a finalizer", patch(agent, node, `{"metadata":{"finalizers":["example.com/hold"]}}`), prefix+"metadata.finalizers")

	// In the status, only Lifeboat's own condition (the chart grants nodes/status patch for it).
	condition := func(client kubernetes.Interface, name string, status corev1.ConditionStatus) error {
		_, err := nodes.NewWriter(client).SetCondition(ctx, name, nil, corev1.NodeCondition{Type: nodes.ConditionInterruption, Status: status,
			Reason: "Draining", Message: "pod shop/web held by a budget"})
		return err
	}
	allowed("the agent sets its condition", condition(agent, node, corev1.ConditionTrue))
	allowed("the agent clears its condition", condition(agent, node, corev1.ConditionFalse))
	if n, err := c.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	} else if got := nodes.ConditionOf(n, nodes.ConditionInterruption); got == nil || got.Status != corev1.ConditionFalse {
		t.Errorf("the agent's condition: %+v, want False", got)
	}
	// Conditions merge by type in a strategic merge patch: only the named ones change.
	merge := func(body string) error {
		_, err := agent.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, []byte(body), metav1.PatchOptions{}, "status")
		return err
	}
	refused("another condition", merge(`{"status":{"conditions":[{"type":"Ready","status":"False","reason":"Forged"}]}}`),
		prefix+"condition Ready in the status of its Node; it may change only its condition lifeboat.dev/Interruption")
	refused("another condition beside its own", merge(`{"status":{"conditions":[{"type":"lifeboat.dev/Interruption","status":"True"},`+
		`{"type":"example.com/Healthy","status":"True"}]}}`), prefix+"condition example.com/Healthy in the status")
	refused("every condition replaced by its own", patch(agent, node, `{"status":{"conditions":[{"type":"lifeboat.dev/Interruption","status":"True"}]}}`, "status"),
		prefix+"condition Ready")
	refused("a status field", patch(agent, node, `{"status":{"capacity":{"pods":"500"}}}`, "status"), prefix+"status.capacity")
	// Status fields the policy names nowhere: everything but the conditions is compared.
	refused("the runtime handlers", patch(agent, node, `{"status":{"runtimeHandlers":[{"name":"forged","features":{"recursiveReadOnlyMounts":true}}]}}`, "status"),
		prefix+"status.runtimeHandlers")
	refused("the node's features", patch(agent, node, `{"status":{"features":{"supplementalGroupsPolicy":true}}}`, "status"), prefix+"status.features")
	refused("a label through the status", patch(agent, node, `{"metadata":{"labels":{"topology.kubernetes.io/zone":"us-east-1b"}}}`, "status"),
		prefix+"label(s) topology.kubernetes.io/zone")

	// A providerID may be set once, from empty, by the API's own rules: the agent may not set
	// it, so it cannot point its Node at another instance.
	bare := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "bare-node"}}
	if _, err := c.Client.CoreV1().Nodes().Create(ctx, bare, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	refused("a providerID", patch(agentOn(bare.Name), bare.Name, `{"spec":{"providerID":"aws:///us-east-1a/i-0123456789abcdef0"}}`),
		"the agent of node bare-node may not change spec.providerID")
	refused("its condition on another node", condition(agent, bare.Name, corev1.ConditionTrue),
		"the agent of node "+node+" may not write node bare-node")

	allowed("the agent's undo edits", write(nodes.Uncordon(), nodes.RemoveTaint(nodes.TaintSpotInterruption, ""),
		nodes.RemoveTaint(nodes.TaintScheduledMaintenance, ""), nodes.RemoveLabel(nodes.LabelUncordonAfterReboot),
		nodes.RemoveAnnotation("lifeboat.dev/interruption")))

	// With the settings on, the chart lets the agent write what they need.
	if _, err := runTool(ctx, h.bin, h.env, "upgrade", "lifeboat", chartDir, "--namespace", namespace, "--kubeconfig", c.KubeconfigPath,
		"--reuse-values", "--set", "config.excludeFromLoadBalancers=true", "--set", "config.enableOutOfServiceTaint=true"); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		_, err := agent.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(`{"metadata":{"labels":{"`+excludeLB+`":"true"}}}`),
			metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("the load-balancer label is still refused after the upgrade that turned excludeFromLoadBalancers on")
	}
	allowed("the load-balancer label and the out-of-service taint once configured", write(nodes.SetLabel(excludeLB, "true"),
		nodes.AddTaint(nodes.TaintOutOfService, "nodeshutdown", corev1.TaintEffectNoExecute)))
	refused("another label, still", patch(agent, node, `{"metadata":{"labels":{"node-role.kubernetes.io/control-plane":""}}}`),
		prefix+"label(s) node-role.kubernetes.io/control-plane of its Node; it may change only lifeboat.dev/ labels and "+excludeLB)
}

// TestNodeRestrictionOnAClusterWithoutIt installs the chart with helm into a sandbox whose API
// server leaves ValidatingAdmissionPolicy out, as Kubernetes before 1.30 does: the install
// fails, naming the setting that installs without the restriction, and nothing is installed;
// with that setting the install succeeds and holds no policy.
func TestNodeRestrictionOnAClusterWithoutIt(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a sandbox cluster")
	}
	h := newHelm(t)
	c := sandboxtest.Cluster(t, sandbox.ClusterOptions{NoKwok: true, APIServerArgs: []string{
		"--runtime-config=admissionregistration.k8s.io/v1/validatingadmissionpolicies=false,admissionregistration.k8s.io/v1/validatingadmissionpolicybindings=false",
		// The admission plugin would wait for the policies it can no longer list.
		"--disable-admission-plugins=ValidatingAdmissionPolicy",
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	install := func(release string, args ...string) (string, error) {
		return runTool(ctx, h.bin, h.env, append([]string{"install", release, chartDir, "--namespace", namespace,
			"--kubeconfig", c.KubeconfigPath}, args...)...)
	}

	out, err := install("lifeboat")
	if err == nil {
		t.Fatalf("the install succeeded on a cluster without ValidatingAdmissionPolicy:\n%s", out)
	}
	if want := "does not serve ValidatingAdmissionPolicy"; !strings.Contains(err.Error(), want) ||
		!strings.Contains(err.Error(), "set agent.nodeRestriction.enabled=false to install without it") {
		t.Errorf("the install's error does not say the cluster lacks the API and name the setting:\n%v", err)
	}
	if ds, err := c.Client.AppsV1().DaemonSets(namespace).List(ctx, metav1.ListOptions{}); err != nil || len(ds.Items) != 0 {
		t.Errorf("the failed install left DaemonSets %v (%v)", ds, err)
	}

	out, err = install("lifeboat-unrestricted", "--set", "agent.nodeRestriction.enabled=false")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "WARNING: agent.nodeRestriction.enabled is false") {
		t.Errorf("the install notes do not warn that the restriction is off:\n%s", out)
	}
	if ds, err := c.Client.AppsV1().DaemonSets(namespace).List(ctx, metav1.ListOptions{}); err != nil || len(ds.Items) != 1 {
		t.Errorf("the install left DaemonSets %v (%v), want the agent's", ds, err)
	}
}

// tokenClient is a client with a token of the service account, bound to a pod when boundTo is
// set (the API server then puts the pod's node in the token's node-name claim, as in a pod's
// projected token), else a token without that claim (as a legacy Secret's).
func tokenClient(ctx context.Context, t *testing.T, c *sandbox.Cluster, namespace, serviceAccount string, boundTo *corev1.Pod) kubernetes.Interface {
	t.Helper()
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
