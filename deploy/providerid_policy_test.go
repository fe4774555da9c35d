// SPDX-License-Identifier: Apache-2.0

package deploy_test

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"lifeboat.dev/lifeboat/test/sandbox"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// The providerID policy is opt-in: rendered only when asked for, with its binding.
func TestNodeProviderIDPolicyRender(t *testing.T) {
	h := newHelm(t)
	if got := h.template(t).kinds()["ValidatingAdmissionPolicyBinding"]; got != 1 {
		t.Errorf("by default %d policy bindings, want 1 (the agent's node restriction only)", got)
	}
	kinds := h.template(t, "--set", "nodeProviderIDPolicy.enabled=true").kinds()
	if kinds["ValidatingAdmissionPolicy"] != 2 || kinds["ValidatingAdmissionPolicyBinding"] != 2 {
		t.Errorf("with nodeProviderIDPolicy.enabled: %d policies and %d bindings, want 2 and 2", kinds["ValidatingAdmissionPolicy"], kinds["ValidatingAdmissionPolicyBinding"])
	}
}

// TestNodeProviderIDPolicy installs the chart with the policy on: a node credential that
// tries to set its own Node's providerID to another node's instance is refused, with the
// policy's message; a cloud controller's identity (here the admin) may still set it.
func TestNodeProviderIDPolicy(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a sandbox cluster")
	}
	h := newHelm(t)
	c, _ := sandboxtest.Shared(t, sandbox.ClusterOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	added, err := c.AddNodes(ctx, sandbox.NodeSpec{Index: 1, NoProviderID: true}, sandbox.NodeSpec{Index: 2, NoProviderID: true})
	if err != nil {
		t.Fatal(err)
	}
	claimant, other := added[0].Name, added[1].Name
	if _, err := runTool(ctx, h.bin, h.env, "install", "lifeboat", chartDir, "--namespace", namespace, "--kubeconfig", c.KubeconfigPath,
		"--set", "nodeProviderIDPolicy.enabled=true"); err != nil {
		t.Fatal(err)
	}
	rc, err := c.UserConfig("system:node:"+claimant, "system:nodes")
	if err != nil {
		t.Fatal(err)
	}
	kubelet := kubernetes.NewForConfigOrDie(rc)
	setProviderID := func(client kubernetes.Interface, node, providerID string, dryRun bool) error {
		opts := metav1.PatchOptions{}
		if dryRun {
			opts.DryRun = []string{metav1.DryRunAll}
		}
		_, err := client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(`{"spec":{"providerID":"`+providerID+`"}}`), opts)
		return err
	}
	forged := sandbox.NodeSpec{Index: 2}.ProviderID()
	// Enforced once the API server has loaded the policy; a dry run asks without writing.
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		return apierrors.IsForbidden(setProviderID(kubelet, claimant, forged, true)), nil
	})
	if err != nil {
		t.Fatalf("the node credential of %s may still set its providerID: the policy was never enforced", claimant)
	}
	err = setProviderID(kubelet, claimant, forged, false)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "may not change spec.providerID of Node "+claimant) {
		t.Errorf("the node credential set its providerID to another node's instance: %v", err)
	}
	// Other writes of its own Node by the kubelet still pass (the policy looks at providerID only).
	if _, err := kubelet.CoreV1().Nodes().Patch(ctx, claimant, types.MergePatchType, []byte(`{"metadata":{"annotations":{"example.com/note":"x"}}}`), metav1.PatchOptions{}); err != nil {
		t.Errorf("the kubelet's own Node write without a providerID change was refused: %v", err)
	}
	// A cloud controller's identity may set it.
	if err := setProviderID(c.Client, other, forged, false); err != nil {
		t.Errorf("an identity outside system:nodes could not set a providerID: %v", err)
	}
}
