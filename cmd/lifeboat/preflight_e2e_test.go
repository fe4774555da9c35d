// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/episode"
	"lifeboat.dev/lifeboat/internal/permissions"
	"lifeboat.dev/lifeboat/test/sandbox"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// The built binary with a service account that lacks "patch nodes": `lifeboat preflight`
// names it and exits 1, and `lifeboat agent` refuses to start, naming it too. With every
// permission granted, preflight passes.
func TestPermissionsEndToEnd(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the binary and starts the sandbox")
	}
	c, _ := sandboxtest.Shared(t, sandbox.ClusterOptions{NoKwok: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	nodes, err := c.AddNodes(ctx, sandbox.NodeSpec{Index: 1})
	if err != nil {
		t.Fatal(err)
	}
	node := nodes[0].Name
	m := sandboxtest.IMDS(t, sandbox.IMDSOptions{InstanceID: episode.InstanceIDOf(nodes[0]), Hostname: node})
	cfg := sandboxtest.Config(t, config.ModeAgent, "NODE_NAME", node)
	perms := permissions.Permissions(config.ModeAgent, cfg)

	bin := filepath.Join(t.TempDir(), "lifeboat")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	run := func(t *testing.T, kubeconfig string, args ...string) (int, string, string) {
		t.Helper()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "NODE_NAME="+node, "INSTANCE_METADATA_URL="+m.URL)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatal(err)
		}
		return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
	}

	t.Run("missing patch nodes", func(t *testing.T) {
		kubeconfig := serviceAccount(ctx, t, c, "partial", perms, "patch nodes")
		code, out, errOut := run(t, kubeconfig, "preflight", "agent")
		if code != 1 {
			t.Errorf("preflight exit %d, want 1\n%s%s", code, out, errOut)
		}
		for _, want := range []string{"FAIL    rbac: patch nodes", `fix: add verb "patch" on "nodes"`, "ok      rbac: get nodes",
			"ok      instance metadata", "preflight FAILED"} {
			if !strings.Contains(out, want) {
				t.Errorf("preflight output lacks %q:\n%s", want, out)
			}
		}

		code, out, errOut = run(t, kubeconfig, "agent")
		if code != 1 {
			t.Errorf("agent exit %d, want 1\n%s%s", code, out, errOut)
		}
		for _, want := range []string{"missing Kubernetes permission", "verb=patch resource=nodes", "not starting", `missing="patch nodes"`} {
			if !strings.Contains(errOut, want) {
				t.Errorf("agent log lacks %q:\n%s", want, errOut)
			}
		}
		if strings.Contains(errOut, "agent watching instance metadata") {
			t.Error("the agent started although a permission is missing")
		}
	})

	// The ClusterRole an agent needed before the node condition: the extra, on by default, is
	// turned off and said; the protection starts. Asked for explicitly, it refuses to start.
	t.Run("missing patch nodes/status", func(t *testing.T) {
		kubeconfig := serviceAccount(ctx, t, c, "before-condition", perms, "patch nodes/status")
		code, out, errOut := run(t, kubeconfig, "preflight", "agent")
		if code != 0 || !strings.Contains(out, "WARN    rbac: patch nodes/status") || !strings.Contains(out, "NODE_CONDITION=false") {
			t.Errorf("preflight exit %d, want 0 with a warning naming NODE_CONDITION\n%s%s", code, out, errOut)
		}

		agentCtx, stop := context.WithTimeout(ctx, 30*time.Second)
		defer stop()
		cmd := exec.CommandContext(agentCtx, bin, "agent")
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "NODE_NAME="+node, "INSTANCE_METADATA_URL="+m.URL, "ENABLE_PROBES_SERVER=false")
		logs := &sandboxtest.LogBuffer{}
		cmd.Stdout, cmd.Stderr = logs, logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
		err := wait.PollUntilContextTimeout(agentCtx, 100*time.Millisecond, 25*time.Second, true, func(context.Context) (bool, error) {
			return strings.Contains(logs.String(), "agent watching instance metadata"), nil
		})
		if err != nil {
			t.Fatalf("the agent did not start without the extra's permission:\n%s", logs.String())
		}
		for _, want := range []string{"starting without it", "setting=NODE_CONDITION", "resource=nodes/status"} {
			if !strings.Contains(logs.String(), want) {
				t.Errorf("agent log lacks %q:\n%s", want, logs.String())
			}
		}

		explicit := exec.CommandContext(ctx, bin, "agent")
		explicit.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "NODE_NAME="+node, "INSTANCE_METADATA_URL="+m.URL, "NODE_CONDITION=true", "ENABLE_PROBES_SERVER=false")
		out2, _ := explicit.CombinedOutput()
		if explicit.ProcessState.ExitCode() != 1 || !strings.Contains(string(out2), `missing="patch nodes/status"`) {
			t.Errorf("NODE_CONDITION=true without the permission: exit %d, want 1 naming it\n%s", explicit.ProcessState.ExitCode(), out2)
		}
	})

	t.Run("every permission", func(t *testing.T) {
		kubeconfig := serviceAccount(ctx, t, c, "full", perms)
		code, out, errOut := run(t, kubeconfig, "preflight", "agent")
		if code != 0 || !strings.Contains(out, "preflight passed") {
			t.Errorf("preflight exit %d, want 0 and a pass\n%s%s", code, out, errOut)
		}
	})
}

// serviceAccount grants user perms except those named in drop, waits until the authorizer
// applies the grant, and returns a kubeconfig for user.
func serviceAccount(ctx context.Context, t *testing.T, c *sandbox.Cluster, user string, perms []permissions.Permission, drop ...string) string {
	t.Helper()
	granted := slices.DeleteFunc(slices.Clone(perms), func(p permissions.Permission) bool { return slices.Contains(drop, p.String()) })
	rules := permissions.PolicyRules(granted)
	if len(rules) != 1 {
		t.Fatalf("agent permissions should all be cluster-wide: %v", rules)
	}
	meta := metav1.ObjectMeta{Name: user}
	if _, err := c.Client.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: meta, Rules: rules[""]}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: meta,
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rc, err := c.UserConfig(user)
	if err != nil {
		t.Fatal(err)
	}
	client := kubernetes.NewForConfigOrDie(rc)
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		missing, err := permissions.CheckRBAC(ctx, client, perms)
		return len(missing) == len(drop), err
	})
	if err != nil {
		t.Fatalf("the grant to %s never took effect: %v", user, err)
	}
	path := filepath.Join(t.TempDir(), user+".kubeconfig")
	if err := c.WriteKubeconfig(path, rc); err != nil {
		t.Fatal(err)
	}
	return path
}
