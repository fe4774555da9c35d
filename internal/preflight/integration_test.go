// SPDX-License-Identifier: Apache-2.0

package preflight

import (
	"context"
	"fmt"
	"net"
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
	"lifeboat.dev/lifeboat/internal/source/imds"
	"lifeboat.dev/lifeboat/test/sandbox"
	"lifeboat.dev/lifeboat/test/sandbox/fakeaws"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// grant gives user exactly perms, through the rules PolicyRules makes of them (a ClusterRole,
// and a Role per namespace), the way the chart grants them to Lifeboat's service account.
func grant(ctx context.Context, t *testing.T, c *sandbox.Cluster, user string, perms []permissions.Permission) {
	t.Helper()
	subject := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}
	for ns, rules := range permissions.PolicyRules(perms) {
		meta := metav1.ObjectMeta{Name: user, Namespace: ns}
		var err error
		if ns == "" {
			if _, err = c.Client.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: meta, Rules: rules}, metav1.CreateOptions{}); err == nil {
				_, err = c.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: meta, Subjects: subject,
					RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user}}, metav1.CreateOptions{})
			}
		} else {
			if err = c.EnsureNamespace(ctx, ns); err == nil {
				_, err = c.Client.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: meta, Rules: rules}, metav1.CreateOptions{})
			}
			if err == nil {
				_, err = c.Client.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: meta, Subjects: subject,
					RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user}}, metav1.CreateOptions{})
			}
		}
		if err != nil {
			t.Fatalf("grant %s: %v", user, err)
		}
	}
}

// userClient is a client for user that waits until the authorizer has seen its grants:
// RBAC reads roles through informers, so a fresh binding takes a moment to count.
func userClient(ctx context.Context, t *testing.T, c *sandbox.Cluster, user string, perms []permissions.Permission, wantMissing int) kubernetes.Interface {
	t.Helper()
	rc, err := c.UserConfig(user)
	if err != nil {
		t.Fatal(err)
	}
	client := kubernetes.NewForConfigOrDie(rc)
	var missing []permissions.Permission
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		missing, err = permissions.CheckRBAC(ctx, client, perms)
		return err == nil && len(missing) <= wantMissing, err
	})
	if err != nil {
		t.Fatalf("%s: grants never took effect: still missing %v (%v)", user, missing, err)
	}
	return client
}

func without(perms []permissions.Permission, drop ...string) []permissions.Permission {
	return slices.DeleteFunc(slices.Clone(perms), func(p permissions.Permission) bool { return slices.Contains(drop, p.String()) })
}

func closedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port
}

func rowsByCheck(rows []Row) map[string]Row {
	out := map[string]Row{}
	for _, r := range rows {
		out[r.Check] = r
	}
	return out
}

// Against the real API server with RBAC on: a service account missing some permissions is
// told exactly those, a fully granted one passes, and the agent's checks find its Node.
func TestInSandbox(t *testing.T) {
	c, _ := sandboxtest.Shared(t, sandbox.ClusterOptions{NoKwok: true})
	ctx := testContext(t)

	t.Run("rbac: exactly the missing permissions fail", func(t *testing.T) {
		cfg := sandboxtest.Config(t, config.ModeController, "QUEUE_URL", "https://sqs.us-east-1.amazonaws.com/1/q",
			"FORCE_DELETE_BEFORE_DEADLINE_SECONDS", "10", "EMIT_KUBERNETES_EVENTS", "true")
		perms := permissions.Permissions(config.ModeController, cfg)
		drop := []string{"patch nodes", "watch pods", "update leases.coordination.k8s.io lifeboat-controller in kube-system"}
		grant(ctx, t, c, "partial", without(perms, drop...))
		client := userClient(ctx, t, c, "partial", perms, len(drop))

		missing, err := permissions.CheckRBAC(ctx, client, perms)
		if err != nil {
			t.Fatal(err)
		}
		if got := permissionStrings(missing); !slices.Equal(got, drop) {
			t.Errorf("missing %q, want %q", got, drop)
		}
		rows := CheckPermissions(ctx, client, perms, cfg)
		if len(rows) != len(perms) {
			t.Fatalf("%d rows for %d permissions", len(rows), len(perms))
		}
		for _, r := range rows {
			failing := slices.Contains(drop, strings.TrimPrefix(r.Check, "rbac: "))
			if (r.Status == StatusFail) != failing {
				t.Errorf("%s: %s, want failing=%v", r.Check, r.Status, failing)
			}
		}
		byCheck := rowsByCheck(rows)
		if fix := byCheck["rbac: update leases.coordination.k8s.io lifeboat-controller in kube-system"].Fix; !strings.Contains(fix, "Role in namespace kube-system") ||
			!strings.Contains(fix, `resourceName "lifeboat-controller"`) {
			t.Errorf("lease fix %q: want the namespaced Role and the Lease's name", fix)
		}
		if fix := byCheck["rbac: patch nodes"].Fix; !strings.Contains(fix, `verb "patch" on "nodes"`) || !strings.Contains(fix, "ClusterRole") {
			t.Errorf("node fix %q", fix)
		}
	})

	t.Run("rbac: a Lease granted in another namespace does not count", func(t *testing.T) {
		cfg := sandboxtest.Config(t, config.ModeController, "QUEUE_URL", "https://sqs.us-east-1.amazonaws.com/1/q", "NAMESPACE", "lifeboat")
		perms := permissions.Permissions(config.ModeController, cfg)
		elsewhere := permissions.Permissions(config.ModeController, sandboxtest.Config(t, config.ModeController, "QUEUE_URL", "https://sqs.us-east-1.amazonaws.com/1/q"))
		grant(ctx, t, c, "elsewhere", elsewhere) // its Role is in kube-system
		client := userClient(ctx, t, c, "elsewhere", perms, 3)
		missing, err := permissions.CheckRBAC(ctx, client, perms)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range missing {
			if p.Resource != "leases" || p.Namespace != "lifeboat" {
				t.Errorf("unexpectedly missing %s", p)
			}
		}
		if len(missing) != 3 {
			t.Errorf("missing %v, want the three Lease permissions in namespace lifeboat", missing)
		}
	})

	nodes, err := c.AddNodes(ctx, sandbox.NodeSpec{Index: 1}, sandbox.NodeSpec{Index: 2})
	if err != nil {
		t.Fatal(err)
	}
	node, other := nodes[0], nodes[1]
	m := sandboxtest.IMDS(t, sandbox.IMDSOptions{InstanceID: episode.InstanceIDOf(node), Hostname: node.Name})
	agentCfg := func(t *testing.T, nodeName, metadataURL string) *config.Config {
		return sandboxtest.Config(t, config.ModeAgent, "NODE_NAME", nodeName, "INSTANCE_METADATA_URL", metadataURL, "METADATA_TRIES", "1")
	}
	cfg := agentCfg(t, node.Name, m.URL)
	perms := permissions.Permissions(config.ModeAgent, cfg)
	grant(ctx, t, c, "agent", perms)
	agent := userClient(ctx, t, c, "agent", perms, 0)

	tests := []struct {
		name        string
		nodeName    string
		metadataURL string
		want        map[string]Status // rows by check; rbac rows must all be ok
		fix         string            // a fix must mention this
	}{
		// This identity is not held to its node (no admission policy here): a warning, which
		// does not fail the run.
		{"all pass", node.Name, m.URL,
			map[string]Status{"kubernetes api": StatusOK, "instance metadata": StatusOK, "node NODE_NAME=" + node.Name: StatusOK, "agent node restriction": StatusWarn}, ""},
		{"metadata unreachable", node.Name, fmt.Sprintf("http://127.0.0.1:%d", closedPort(t)),
			map[string]Status{"kubernetes api": StatusOK, "instance metadata": StatusFail, "node NODE_NAME=" + node.Name: StatusWarn, "agent node restriction": StatusWarn},
			"hop limit"},
		{"NODE_NAME names another instance's node", other.Name, m.URL,
			map[string]Status{"kubernetes api": StatusOK, "instance metadata": StatusOK, "node NODE_NAME=" + other.Name: StatusFail, "agent node restriction": StatusWarn},
			"Downward API"},
		{"NODE_NAME names no node", "ip-10-9-9-9.ec2.internal", m.URL,
			map[string]Status{"kubernetes api": StatusOK, "instance metadata": StatusOK, "node NODE_NAME=ip-10-9-9-9.ec2.internal": StatusFail, "agent node restriction": StatusWarn},
			"Downward API"},
	}
	for _, tt := range tests {
		t.Run("agent: "+tt.name, func(t *testing.T) {
			cfg := agentCfg(t, tt.nodeName, tt.metadataURL)
			rows := Run(ctx, config.ModeAgent, cfg, Env{Kube: agent, IMDS: imds.NewClient(cfg.MetadataURL, cfg.MetadataTries, false), Timeout: 30 * time.Second})
			got := map[string]Status{}
			fixes := ""
			rbac := 0
			for _, r := range rows {
				if strings.HasPrefix(r.Check, "rbac: ") {
					rbac++
					if r.Status != StatusOK {
						t.Errorf("%s: %s (%s)", r.Check, r.Status, r.Detail)
					}
					continue
				}
				got[r.Check] = r.Status
				fixes += r.Fix + "\n"
			}
			if rbac != len(perms) {
				t.Errorf("%d rbac rows, want %d", rbac, len(perms))
			}
			for check, want := range tt.want {
				if got[check] != want {
					t.Errorf("%s: %q, want %q\nrows: %+v", check, got[check], want, rows)
				}
			}
			if len(got) != len(tt.want) {
				t.Errorf("rows %v, want exactly %v", got, tt.want)
			}
			if !strings.Contains(fixes, tt.fix) {
				t.Errorf("fixes lack %q:\n%s", tt.fix, fixes)
			}
			if Failed(rows) != (tt.fix != "") {
				t.Errorf("Failed = %v", Failed(rows))
			}
		})
	}

	t.Run("agent: completing lifecycle hooks adds the Auto Scaling checks", func(t *testing.T) {
		fake := sandboxtest.FakeAWS(t, "")
		fake.AddInstance(fakeaws.Instance{ID: episode.InstanceIDOf(node), AutoScalingGroup: "workers"})
		cfg := sandboxtest.Config(t, config.ModeAgent, "NODE_NAME", node.Name, "INSTANCE_METADATA_URL", m.URL,
			"ENABLE_ASG_LIFECYCLE_DRAINING", "true", "ASG_LIFECYCLE_HOOK_NAME", "drain")
		rows := Run(ctx, config.ModeAgent, cfg, Env{Kube: agent, IMDS: imds.NewClient(m.URL, 1, false), AWS: NewAWS(sandboxtest.AWSConfig(fake.URL()))})
		byCheck := rowsByCheck(rows)
		if r := byCheck["autoscaling:DescribeAutoScalingInstances"]; r.Status != StatusOK || !strings.Contains(r.Detail, "group workers") {
			t.Errorf("group row %+v", r)
		}
		if r := byCheck["autoscaling:CompleteLifecycleAction"]; r.Status != StatusOK {
			t.Errorf("completion row %+v", r)
		}
		if r := byCheck["autoscaling:DescribeLifecycleHooks"]; r.Status != StatusOK {
			t.Errorf("hook timeouts row %+v", r)
		}
		if Failed(rows) {
			t.Errorf("failed: %+v", rows)
		}
	})

	t.Run("agent: without rights, the node row says so", func(t *testing.T) {
		rc, err := c.UserConfig("nobody")
		if err != nil {
			t.Fatal(err)
		}
		rows := Run(ctx, config.ModeAgent, cfg, Env{Kube: kubernetes.NewForConfigOrDie(rc), IMDS: imds.NewClient(m.URL, 1, false)})
		byCheck := rowsByCheck(rows)
		for _, p := range perms {
			// An extra left on by default (the node condition, Events) only warns: the agent
			// starts without it.
			want := StatusFail
			if p.Soft(cfg) {
				want = StatusWarn
			}
			if r := byCheck["rbac: "+p.String()]; r.Status != want {
				t.Errorf("%s: %s, want %s", p, r.Status, want)
			}
		}
		if r := byCheck["node NODE_NAME="+node.Name]; r.Status != StatusFail || !strings.Contains(r.Detail, "forbidden") {
			t.Errorf("node row %+v, want a failure saying the read is forbidden", r)
		}
	})

	t.Run("controller: full permissions and AWS pass", func(t *testing.T) {
		sqs := sandboxtest.SQS(t, sandbox.SQSOptions{Queues: []string{"lifeboat"}})
		fake := sandboxtest.FakeAWS(t, sqs.Endpoint)
		cfg := sandboxtest.Config(t, config.ModeController, "QUEUE_URL", sqs.QueueURLs["lifeboat"], "AWS_REGION", "us-east-1",
			"AWS_ENDPOINT", fake.URL(), "CLUSTER_NAME", "sandbox")
		perms := permissions.Permissions(config.ModeController, cfg)
		grant(ctx, t, c, "controller", perms)
		client := userClient(ctx, t, c, "controller", perms, 0)
		// The set-up deploy/aws ships: a queue policy that lets EventBridge send, a rule per kind.
		fake.ShipSetup(cfg.QueueURL, sandbox.QueueARN(cfg.QueueURL), sandbox.ShippedKinds())
		rows := Run(ctx, config.ModeController, cfg, Env{Kube: client, AWS: NewAWS(sandboxtest.AWSConfig(fake.URL()))})
		for _, r := range rows {
			if r.Status != StatusOK {
				t.Errorf("%s: %s: %s (fix: %s)", r.Check, r.Status, r.Detail, r.Fix)
			}
		}
		// api, rbac, queue + 2 probes, the set-up, EC2 (instances, capacity reservations), Auto
		// Scaling (complete, group lookup, hook timeouts), ELBv2 target groups, 3 identity rows
		if want := 1 + len(perms) + 3 + 1 + 2 + 3 + 1 + 3; len(rows) != want {
			t.Errorf("%d rows, want %d: %+v", len(rows), want, rows)
		}
	})
}
