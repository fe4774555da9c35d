// SPDX-License-Identifier: Apache-2.0

// Package sandboxtest starts sandbox components for a test and stops them when it ends. On
// failure the components' logs are kept and their ends printed.
//
// Tests skip when the sandbox tools are not built, unless LIFEBOAT_REQUIRE_SANDBOX is set
// (as `make test` does), in which case they fail. Under -short (`make unit`) every test that
// would start a sandbox process skips, tools built or not.
package sandboxtest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/ownership"
	"lifeboat.dev/lifeboat/test/sandbox"
	"lifeboat.dev/lifeboat/test/sandbox/fakeaws"
)

// Tools finds the sandbox binaries or skips (fails, under LIFEBOAT_REQUIRE_SANDBOX) the test.
func Tools(t testing.TB) sandbox.Tools {
	t.Helper()
	tools, err := sandbox.FindTools()
	if err != nil {
		if errors.Is(err, sandbox.ErrNoTools) && os.Getenv("LIFEBOAT_REQUIRE_SANDBOX") == "" {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	return tools
}

// startsSandbox skips the test under -short: `make unit` starts no sandbox process. Every
// function here that starts one calls it first.
func startsSandbox(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts sandbox processes (etcd, kube-apiserver, mocks): skipped under -short")
	}
}

// Dir makes a directory for sandbox files. It is removed after a passing test and kept,
// with the ends of its logs printed, after a failing one.
func Dir(t testing.TB) string {
	t.Helper()
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	dir, err := os.MkdirTemp("", "lifeboat-"+name+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			os.RemoveAll(dir)
			return
		}
		logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
		for _, l := range logs {
			if filepath.Base(l) == "audit.log" {
				continue // JSON, one request a line: read the file itself
			}
			t.Logf("---- %s (last lines)\n%s", l, sandbox.Tail(l, 15))
		}
		t.Logf("sandbox files kept in %s", dir)
	})
	return dir
}

func startContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// Cluster starts a control plane (opts.Dir is filled in) that stops when the test ends.
func Cluster(t testing.TB, opts sandbox.ClusterOptions) *sandbox.Cluster {
	t.Helper()
	startsSandbox(t)
	tools := Tools(t)
	opts.Dir = Dir(t)
	c, err := sandbox.StartCluster(startContext(t), tools, opts)
	if err != nil {
		t.Fatalf("start cluster: %v", err)
	}
	t.Cleanup(c.Stop)
	return c
}

// IMDS starts an instance-metadata mock that stops when the test ends.
func IMDS(t testing.TB, opts sandbox.IMDSOptions) *sandbox.IMDS {
	t.Helper()
	startsSandbox(t)
	tools := Tools(t)
	m, err := sandbox.StartIMDS(startContext(t), tools, Dir(t), opts)
	if err != nil {
		t.Fatalf("start IMDS mock: %v", err)
	}
	t.Cleanup(m.Stop)
	return m
}

// SQS starts the SQS server that stops when the test ends.
func SQS(t testing.TB, opts sandbox.SQSOptions) *sandbox.SQS {
	t.Helper()
	startsSandbox(t)
	tools := Tools(t)
	s, err := sandbox.StartSQS(startContext(t), tools, Dir(t), opts)
	if err != nil {
		t.Fatalf("start SQS server: %v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

// FakeAWS starts the fake EC2 / Auto Scaling endpoint, routing SQS requests to sqsEndpoint
// when it is not empty, and closes it when the test ends.
func FakeAWS(t testing.TB, sqsEndpoint string) *fakeaws.Server {
	t.Helper()
	s := fakeaws.New(fakeaws.Options{SQSBackend: sqsEndpoint})
	if err := s.Start(); err != nil {
		t.Fatalf("start fake AWS endpoint: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// AWSConfig is an SDK configuration for local endpoints: static dummy credentials and a fixed
// region, so the SDK never looks for credentials on 169.254.169.254. One attempt a call, so
// that tests count calls exactly; its HTTP client sends each request's body from a copy (see
// bufferedBodies).
func AWSConfig(endpoint string) aws.Config {
	return aws.Config{
		Region:           "us-east-1",
		Credentials:      credentials.NewStaticCredentialsProvider("AKIDSANDBOX", "sandbox-secret", ""),
		BaseEndpoint:     aws.String(endpoint),
		RetryMaxAttempts: 1,
		HTTPClient:       bufferedBodies{awshttp.NewBuildableClient()},
	}
}

// bufferedBodies sends a request's body from a copy read before the request goes out. The
// SDK's own body stream can fail the transport's last read (the one that finds its end) once
// the answer is already in, and the transport then closes the connection under the answer
// being read ("use of closed network connection"). The SDK retries that error; with one
// attempt a call, a test would fail now and then for it.
type bufferedBodies struct{ next aws.HTTPClient }

func (b bufferedBodies) Do(req *http.Request) (*http.Response, error) {
	if req.Body != nil && req.Body != http.NoBody {
		body, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	return b.next.Do(req)
}

// IMDSProxy puts a gating and fault-injecting proxy in front of an IMDS mock for the test.
func IMDSProxy(t testing.TB, m *sandbox.IMDS) *sandbox.IMDSProxy {
	t.Helper()
	p, err := sandbox.NewIMDSProxy(m.URL)
	if err != nil {
		t.Fatalf("start IMDS proxy: %v", err)
	}
	t.Cleanup(p.Close)
	return p
}

// LogBuffer collects log output written by concurrent goroutines.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *LogBuffer) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// Config loads Lifeboat's configuration from name/value pairs (as environment variables) and,
// when mode is not empty, validates it for that mode; a problem fails the test.
func Config(tb testing.TB, mode config.Mode, pairs ...string) *config.Config {
	tb.Helper()
	env := map[string]string{}
	for i := 0; i+1 < len(pairs); i += 2 {
		env[pairs[i]] = pairs[i+1]
	}
	loaded, err := config.Load(nil, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		tb.Fatal(err)
	}
	if mode != "" {
		if err := loaded.Validate(mode); err != nil {
			tb.Fatal(err)
		}
	}
	return loaded.Config
}

// FreePort is an unused TCP port on 127.0.0.1 (see sandbox.FreePorts).
func FreePort(tb testing.TB) int {
	tb.Helper()
	ports, err := sandbox.FreePorts(1)
	if err != nil {
		tb.Fatal(err)
	}
	return ports[0]
}

// BlockEvictions puts the pods of namespace matching labels under a PodDisruptionBudget that
// allows no disruption (minAvailable 1, and without a controller-manager its status never
// allows one), so their evictions are refused until the returned function deletes it.
func BlockEvictions(tb testing.TB, ctx context.Context, c *sandbox.Cluster, namespace string, labels map[string]string) (lift func()) {
	tb.Helper()
	one := intstr.FromInt32(1)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "block-evictions", Namespace: namespace},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: labels}},
	}
	if _, err := c.Client.PolicyV1().PodDisruptionBudgets(namespace).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		tb.Fatal(err)
	}
	return func() {
		tb.Helper()
		if err := c.Client.PolicyV1().PodDisruptionBudgets(namespace).Delete(ctx, pdb.Name, metav1.DeleteOptions{}); err != nil {
			tb.Fatal(err)
		}
	}
}

// TerminatingNode adds node Index 1 to the cluster and its instance to the fake EC2, in Auto
// Scaling group "workers" with tags, and begins a termination lifecycle action of hook
// "drain" with token: the setting of a terminate-hook notice.
func TerminatingNode(tb testing.TB, ctx context.Context, c *sandbox.Cluster, fake *fakeaws.Server, tags map[string]string, token string) (node *corev1.Node, instance string) {
	tb.Helper()
	added, err := c.AddNodes(ctx, sandbox.NodeSpec{Index: 1})
	if err != nil {
		tb.Fatal(err)
	}
	node = added[0]
	instance = ownership.InstanceIDFromProviderID(node.Spec.ProviderID)
	fake.AddInstance(fakeaws.Instance{ID: instance, PrivateDNSName: node.Name, AutoScalingGroup: "workers", Tags: tags})
	fake.AddLifecycleHook(fakeaws.LifecycleHook{Name: "drain", AutoScalingGroup: "workers"})
	fake.BeginLifecycleAction("drain", "workers", instance, token)
	return node, instance
}

// ClientWith returns a client for user, who may do exactly what perms say (a ClusterRole and
// its binding, created here): a test of a read-only command runs with no more than the role
// it documents.
func ClientWith(tb testing.TB, ctx context.Context, c *sandbox.Cluster, user string, perms []authorizationv1.ResourceAttributes) kubernetes.Interface {
	tb.Helper()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "test-" + user}, Rules: PolicyRules(perms)}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "test-" + user},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
	if _, err := c.Client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		tb.Fatal(err)
	}
	if _, err := c.Client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		tb.Fatal(err)
	}
	rc, err := c.UserConfig(user)
	if err != nil {
		tb.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		tb.Fatal(err)
	}
	return client
}

// PolicyRules are the RBAC rules that grant exactly perms, one rule each.
func PolicyRules(perms []authorizationv1.ResourceAttributes) []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	for _, p := range perms {
		resource := p.Resource
		if p.Subresource != "" {
			resource += "/" + p.Subresource
		}
		rule := rbacv1.PolicyRule{APIGroups: []string{p.Group}, Resources: []string{resource}, Verbs: []string{p.Verb}}
		if p.Name != "" {
			rule.ResourceNames = []string{p.Name}
		}
		out = append(out, rule)
	}
	return out
}
