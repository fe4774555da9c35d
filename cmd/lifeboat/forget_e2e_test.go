// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/episode"
	"lifeboat.dev/lifeboat/internal/forget"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/record"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// grant gives user exactly perms, cluster-wide.
func grant(t *testing.T, ctx context.Context, w *cliWorld, user string, perms []authorizationv1.ResourceAttributes) {
	t.Helper()
	name := "grant-" + user
	if _, err := w.c.Client.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules: sandboxtest.PolicyRules(perms)}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.c.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// RBAC is enforced from the authorizer's cache: wait until the grant is seen.
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		r, err := w.c.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: &perms[len(perms)-1]}}, metav1.CreateOptions{})
		return err == nil && r.Status.Allowed, nil
	})
	if err != nil {
		t.Fatalf("the grant to %s was never seen: %v", user, err)
	}
}

// lifeboatKeys lists what of Lifeboat's is on the node: lifeboat.dev/ annotations and labels
// but the operator's repair veto, interruption taints whose value the node's record names (or
// named, before forget removed it), and the node condition.
func lifeboatKeys(n *corev1.Node, noticeValues map[string]bool) []string {
	var out []string
	for k := range n.Annotations {
		if strings.HasPrefix(k, nodes.AnnotationPrefix) && k != "lifeboat.dev/node-repair" {
			out = append(out, "annotation "+k)
		}
	}
	for k := range n.Labels {
		if strings.HasPrefix(k, nodes.AnnotationPrefix) {
			out = append(out, "label "+k)
		}
	}
	for _, t := range n.Spec.Taints {
		if noticeValues[t.Value] {
			out = append(out, "taint "+t.Key+"="+t.Value)
		}
	}
	if nodes.ConditionOf(n, nodes.ConditionInterruption) != nil {
		out = append(out, "condition "+string(nodes.ConditionInterruption))
	}
	return out
}

// Nodes in the middle of a drain, as a real intake leaves them (record, cordon, taint, labels,
// condition), one cordoned by Lifeboat and one an operator had cordoned before: a dry run
// changes nothing; forget --yes leaves no key of Lifeboat's, uncordons the node Lifeboat
// cordoned and keeps the operator's cordon, taint and veto.
func TestForgetLeavesNoLifeboatKey(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the sandbox")
	}
	w := newCLIWorld(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client := w.c.Client
	operatorTaint := corev1.Taint{Key: notice.TaintRebalance, Value: "nth-event-7", Effect: corev1.TaintEffectNoSchedule}
	patch := `{"metadata":{"annotations":{"lifeboat.dev/node-repair":"disabled"}},"spec":{"unschedulable":true,"taints":[{"key":"` +
		operatorTaint.Key + `","value":"` + operatorTaint.Value + `","effect":"NoSchedule"}]}}`
	if _, err := client.CoreV1().Nodes().Patch(ctx, w.other, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err) // the operator's cordon, taint and veto, before any notice
	}
	h := episode.NewHandler(sandboxtest.Config(t, config.ModeController, "QUEUE_URL", "https://sqs.us-east-1.amazonaws.com/1/q",
		"TAINT_NODE", "true", "EXCLUDE_FROM_LOAD_BALANCERS", "true"), client, slog.New(slog.DiscardHandler), episode.Options{})
	values := map[string]bool{}
	for _, node := range []string{w.node, w.other} {
		inst := episode.InstanceIDOf(mustNode(t, w, node))
		n := notice.Notice{ID: notice.ID(notice.SpotInterruption, inst, "terminate"), Kind: notice.SpotInterruption, Source: notice.SourceQueue,
			InstanceID: inst, Deadline: time.Now().Add(10 * time.Minute), Action: "terminate"}
		values[nodes.LabelValue(n.ID)] = true
		if err := h.Intake(ctx, n, node, nil); err != nil {
			t.Fatal(err)
		}
	}
	before := map[string]*corev1.Node{}
	for _, node := range []string{w.node, w.other} {
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			return nodes.ConditionOf(mustNode(t, w, node), nodes.ConditionInterruption) != nil, nil
		})
		if err != nil {
			t.Fatalf("the condition never showed on %s", node)
		}
		n := mustNode(t, w, node)
		if r, err := record.Read(n); err != nil || r.Phase != record.PhaseDraining || r.Owner == nil {
			t.Fatalf("node %s: record %+v (%v); want one mid-drain, claimed", node, r, err)
		}
		before[node] = n
	}
	if !before[w.node].Spec.Unschedulable || before[w.node].Annotations[nodes.AnnotationCordonedBy] == "" ||
		before[w.other].Annotations[nodes.AnnotationCordonedBy] != "" {
		t.Fatalf("set-up: Lifeboat's cordon on %s and the operator's on %s expected", w.node, w.other)
	}

	t.Run("a dry run prints what it would remove and changes nothing", func(t *testing.T) {
		code, out, errOut := w.run(t, nil, "forget", "--context", "sandbox")
		t.Logf("lifeboat forget:\n%s", out)
		if code != exitOK || !strings.Contains(out, "Dry run:") || !strings.Contains(out, "cordon spec.unschedulable (made by Lifeboat") ||
			!strings.Contains(out, "not Lifeboat's: no "+nodes.AnnotationCordonedBy) {
			t.Errorf("exit %d\n%s%s", code, out, errOut)
		}
		code, out, _ = w.run(t, nil, "forget", w.node, "--context", "sandbox", "-o", "json")
		var r forget.Report
		if err := json.Unmarshal([]byte(out), &r); code != exitOK || err != nil || !r.DryRun || len(r.Nodes) != 1 || len(r.Nodes[0].Remove) == 0 || r.Nodes[0].Removed {
			t.Errorf("-o json: exit %d, %v\n%s", code, err, out)
		}
		for node, n := range before {
			if now := mustNode(t, w, node); now.ResourceVersion != n.ResourceVersion {
				t.Errorf("the dry run wrote node %s", node)
			}
		}
	})

	t.Run("bad usage and a missing node are told apart", func(t *testing.T) {
		if code, _, errOut := w.run(t, nil, "forget", w.node, "-l", "a=b", "--context", "sandbox"); code != exitUsage || !strings.Contains(errOut, "not both") {
			t.Errorf("a node and a selector: exit %d, %q", code, errOut)
		}
		if code, _, errOut := w.run(t, nil, "forget", "-l", "a==b==c", "--context", "sandbox"); code != exitUsage || !strings.Contains(errOut, "-l") {
			t.Errorf("a bad selector: exit %d, %q", code, errOut)
		}
		if code, _, errOut := w.run(t, nil, "forget", "no-such-node", "--yes", "--context", "sandbox"); code != exitRuntime || !strings.Contains(errOut, "no-such-node") {
			t.Errorf("a missing node: exit %d, %q", code, errOut)
		}
		if code, out, _ := w.run(t, nil, "forget", "-l", "no-such-label=1", "--context", "sandbox"); code != exitOK || !strings.Contains(out, "Nothing of Lifeboat's") {
			t.Errorf("a selector that selects nothing: exit %d\n%s", code, out)
		}
	})

	t.Run("--yes removes every key of Lifeboat's and keeps the operator's, with the permissions documented", func(t *testing.T) {
		if code, _, errOut := w.run(t, nil, "forget", "--yes", "--context", "sandbox", "--as", "nobody"); code != exitRuntime || !strings.Contains(errOut, "forbidden") {
			t.Errorf("without permissions: exit %d, %q; want 3 and forbidden", code, errOut)
		}
		grant(t, ctx, w, "forgetter", forget.Permissions)
		code, out, errOut := w.run(t, nil, "forget", "--yes", "--context", "sandbox", "--as", "forgetter")
		if code != exitOK || !strings.Contains(out, "removed") || !strings.Contains(out, "Removed ") {
			t.Fatalf("exit %d\n%s%s", code, out, errOut)
		}
		for _, node := range []string{w.node, w.other} {
			n := mustNode(t, w, node)
			if left := lifeboatKeys(n, values); len(left) > 0 {
				t.Errorf("node %s keeps %q", node, left)
			}
		}
		if mustNode(t, w, w.node).Spec.Unschedulable {
			t.Errorf("the node Lifeboat cordoned is still cordoned")
		}
		other := mustNode(t, w, w.other)
		hasTaint := false
		for _, t := range other.Spec.Taints {
			hasTaint = hasTaint || t.MatchTaint(&operatorTaint) && t.Value == operatorTaint.Value
		}
		if !other.Spec.Unschedulable || !hasTaint || other.Annotations["lifeboat.dev/node-repair"] != "disabled" {
			t.Errorf("the operator's node lost its cordon (%v), taint (%v) or veto (%v)", other.Spec.Unschedulable, other.Spec.Taints, other.Annotations)
		}
		if code, out, _ := w.run(t, nil, "forget", "--context", "sandbox"); code != exitOK || !strings.Contains(out, "Nothing of Lifeboat's") {
			t.Errorf("forget again: exit %d\n%s", code, out)
		}
	})
}
