// SPDX-License-Identifier: Apache-2.0

package sandboxtest

import (
	"context"
	"flag"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"lifeboat.dev/lifeboat/test/sandbox"
)

// Shared clusters: a package's tests take turns on one control plane per set of options,
// started when a test first asks for it and stopped when the package's tests end, instead of
// each starting etcd and kube-apiserver (and more) of its own.
//
// A test holds its cluster alone from Shared until it ends; before the next test gets it,
// everything the last one added is deleted (sandbox.Cluster.Reset): its namespaces and all
// they hold, Nodes, Leases, RBAC, admission policies and webhooks. Each test starts from an
// empty cluster, so tests may keep fixed names (a node ip-10-0-0-1.ec2.internal, a namespace
// "shop"). Tests that run in parallel get clusters of their own from the same pool.
//
// A test needs Cluster, a control plane of its own, when it restarts or stops a component,
// starts the API server with flags of its own, or changes an object the control plane made
// (a bootstrap ClusterRole, the default namespace) rather than adding its own.

var pool = struct {
	sync.Mutex
	main bool
	idle map[string][]*sharedCluster
	all  []*sharedCluster
}{idle: map[string][]*sharedCluster{}}

type sharedCluster struct {
	c      *sandbox.Cluster
	dir    string
	failed bool // a test on it failed: its files are kept
}

// Main gives the package's tests static AWS keys (and no instance metadata), runs them, then
// stops the clusters Shared started (keeping their files when a test on them failed). Every
// package that calls Shared needs it:
//
//	func TestMain(m *testing.M) { sandboxtest.Main(m) }
func Main(m *testing.M) {
	// The AWS SDK's credential chain must never reach a real account or the instance
	// metadata address; set once here, so tests that run in parallel need no t.Setenv.
	for name, value := range map[string]string{"AWS_ACCESS_KEY_ID": "AKIDSANDBOX",
		"AWS_SECRET_ACCESS_KEY": "sandbox-secret", "AWS_EC2_METADATA_DISABLED": "true"} {
		os.Setenv(name, value)
	}
	parallelByDefault()
	pool.Lock()
	pool.main = true
	pool.Unlock()
	code := m.Run()
	pool.Lock()
	all := pool.all
	pool.all, pool.idle = nil, map[string][]*sharedCluster{}
	pool.Unlock()
	for _, s := range all {
		s.c.Stop()
		if s.failed {
			fmt.Fprintf(os.Stderr, "shared sandbox files kept in %s\n", s.dir)
		} else {
			os.RemoveAll(s.dir)
		}
	}
	if testing.Verbose() && len(all) > 0 {
		fmt.Fprintf(os.Stderr, "sandboxtest: %d shared cluster(s) started\n", len(all))
	}
	os.Exit(code)
}

// sandboxParallel is how many tests marked t.Parallel run at once in a package that shares
// clusters, unless -parallel says otherwise: such tests mostly wait (Leases, hook timeouts,
// polls), so more of them than there are CPUs keeps the package's time down. Each takes a
// cluster of its own from the pool, so this is also the most clusters a package starts.
const sandboxParallel = 8

func parallelByDefault() {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		flag.Set("test.parallel", strconv.Itoa(max(sandboxParallel, runtime.GOMAXPROCS(0))))
	}
}

// Shared hands the test a control plane with opts (opts.Dir is ignored; AuditLog is always
// on) that no other test uses until this one ends, and a namespace made for it. The cluster
// is kept for the package's next test with the same options, which finds it emptied.
func Shared(t testing.TB, opts sandbox.ClusterOptions) (*sandbox.Cluster, string) {
	t.Helper()
	startsSandbox(t)
	tools := Tools(t)
	pool.Lock()
	if !pool.main {
		pool.Unlock()
		t.Fatal("sandboxtest.Shared needs the package's TestMain to call sandboxtest.Main(m), which stops the shared clusters")
	}
	// Every shared cluster keeps an audit log (AuditEvents reads only the test's own
	// requests): tests that read it and tests that do not take turns on one cluster.
	opts.Dir, opts.AuditLog = "", true
	key := fmt.Sprintf("%#v", opts)
	var s *sharedCluster
	if idle := pool.idle[key]; len(idle) > 0 {
		s, pool.idle[key] = idle[len(idle)-1], idle[:len(idle)-1]
	}
	pool.Unlock()

	if s != nil && !s.empty(t) {
		s = nil
	}
	if s == nil {
		var err error
		if s, err = startShared(t, tools, opts); err != nil {
			t.Fatalf("start shared cluster: %v", err)
		}
		pool.Lock()
		pool.all = append(pool.all, s)
		pool.Unlock()
	}
	t.Cleanup(func() { release(t, key, s) })
	if err := s.c.SkipAudit(); err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: namespacePrefix(t.Name())}}
	ns, err := s.c.Client.CoreV1().Namespaces().Create(startContext(t), ns, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create the test's namespace: %v", err)
	}
	return s.c, ns.Name
}

func startShared(t testing.TB, tools sandbox.Tools, opts sandbox.ClusterOptions) (*sharedCluster, error) {
	dir, err := os.MkdirTemp("", "lifeboat-shared-")
	if err != nil {
		return nil, err
	}
	opts.Dir = dir
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := sandbox.StartCluster(ctx, tools, opts)
	if err != nil {
		return nil, err
	}
	if err := c.Snapshot(ctx); err != nil {
		c.Stop()
		return nil, err
	}
	return &sharedCluster{c: c, dir: dir}, nil
}

// release puts the cluster back for the package's next test, which empties it first (so
// the package's last test leaves nothing to empty).
func release(t testing.TB, key string, s *sharedCluster) {
	if t.Failed() {
		s.failed = true
		logs := s.c.LogPaths()
		names := make([]string, 0, len(logs))
		for name := range logs {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			t.Logf("---- %s (last lines, shared cluster)\n%s", logs[name], sandbox.Tail(logs[name], 15))
		}
		t.Logf("shared sandbox files kept in %s", s.dir)
	}
	pool.Lock()
	defer pool.Unlock()
	pool.idle[key] = append(pool.idle[key], s)
}

// empty deletes what the previous test left; a cluster that cannot be emptied is stopped,
// and the test gets a new one.
func (s *sharedCluster) empty(t testing.TB) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.c.Reset(ctx); err != nil {
		t.Logf("shared cluster not reused: %v", err)
		s.c.Stop()
		return false
	}
	return true
}

var notDNS = regexp.MustCompile(`[^a-z0-9]+`)

// namespacePrefix is a namespace name prefix from the test's name.
func namespacePrefix(test string) string {
	p := strings.Trim(notDNS.ReplaceAllString(strings.ToLower(test), "-"), "-")
	if len(p) > 50 {
		p = p[:50]
	}
	return strings.TrimRight(p, "-") + "-"
}
