// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// ClusterOptions choose which parts of the control plane to run.
type ClusterOptions struct {
	// Dir holds certificates, data and logs; it must exist.
	Dir string
	// AuditLog records every API request, so tests and benchmarks can count requests per client.
	AuditLog bool
	// ControllerManager runs kube-controller-manager (ReplicaSets, DaemonSets, Deployments,
	// PDB status, service accounts). Without it the ServiceAccount admission plugin is off, so
	// pods can be created without a service account.
	ControllerManager bool
	// Scheduler runs kube-scheduler, for pods that are not bound to a node by the test.
	Scheduler bool
	// NoKwok skips the fake kubelet; nodes then never become Ready.
	NoKwok bool
	// ExtraKwokStages are more kwok Stage YAML files, e.g. one that delays pod deletion.
	ExtraKwokStages []string
	// APIServerArgs are more kube-apiserver flags, e.g. --runtime-config to leave an API out
	// as an older cluster would.
	APIServerArgs []string
	// KwokNice, when below 0, runs kwok at that niceness (every thread of it), ahead of the
	// control plane for the machine's cores. kwok stands in for the kubelets, each on a
	// machine of its own in a cluster; on shared cores its one watch of every pod falls behind
	// a burst, and the API server closes it (Cluster.KwokNice says what was set: 0 when this
	// process may not raise a priority).
	KwokNice int
}

// Cluster is a running Kubernetes control plane on 127.0.0.1.
type Cluster struct {
	Dir            string
	APIServerURL   string
	KubeconfigPath string       // admin kubeconfig (system:masters)
	AdminConfig    *rest.Config // admin client configuration, with high rate limits for fixtures
	Client         kubernetes.Interface
	AuditLogPath   string // "" unless ClusterOptions.AuditLog
	KwokNice       int    // kwok's niceness as set (ClusterOptions.KwokNice), 0: the usual

	tools   Tools
	pki     *pki
	etcdURL string
	opts    ClusterOptions
	procs   map[string]*process
	order   []string // start order; stopped in reverse

	apiserverArgs     []string // kept for RestartAPIServer
	apiserverRestarts int

	baseline  map[string]bool // objects at Snapshot, kept by Reset
	resetList []resetResource
	auditFrom int64 // AuditEvents reads from here (SkipAudit)
}

// StartCluster starts etcd and kube-apiserver, then the optional components, and waits until
// each is ready. On error everything started so far is stopped.
func StartCluster(ctx context.Context, tools Tools, opts ClusterOptions) (*Cluster, error) {
	c := &Cluster{Dir: opts.Dir, tools: tools, opts: opts, procs: map[string]*process{}}
	if err := c.start(ctx); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) start(ctx context.Context) (err error) {
	if c.pki, err = newPKI(c.opts.Dir); err != nil {
		return fmt.Errorf("certificates: %w", err)
	}
	steps := []func(context.Context) error{c.startEtcd, c.startAPIServer}
	if c.opts.ControllerManager {
		steps = append(steps, c.startControllerManager)
	}
	if c.opts.Scheduler {
		steps = append(steps, c.startScheduler)
	}
	if !c.opts.NoKwok {
		steps = append(steps, c.startKwok)
	}
	for _, step := range steps {
		if err := startOnFreePorts(func() error { return step(ctx) }); err != nil {
			return err
		}
	}
	return nil
}

// add registers a started process; a restarted one replaces its predecessor in place.
func (c *Cluster) add(p *process) {
	if _, ok := c.procs[p.name]; !ok {
		c.order = append(c.order, p.name)
	}
	c.procs[p.name] = p
}

// Stop stops every component, newest first.
func (c *Cluster) Stop() {
	for i := len(c.order) - 1; i >= 0; i-- {
		c.procs[c.order[i]].Stop(5 * time.Second)
	}
}

// LogPaths lists the log file of each component.
func (c *Cluster) LogPaths() map[string]string {
	out := map[string]string{}
	for name, p := range c.procs {
		out[name] = p.logPath
	}
	return out
}

func (c *Cluster) startEtcd(ctx context.Context) error {
	ports, err := FreePorts(2)
	if err != nil {
		return err
	}
	client := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	peer := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	// A start that found its port taken may have left a member with the old URLs.
	if err := os.RemoveAll(filepath.Join(c.Dir, "etcd-data")); err != nil {
		return err
	}
	p, err := startProcess(c.Dir, "etcd", c.tools.Path("etcd"), []string{
		"--name=sandbox", "--data-dir=" + filepath.Join(c.Dir, "etcd-data"),
		"--listen-client-urls=" + client, "--advertise-client-urls=" + client,
		"--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=sandbox=" + peer,
		"--unsafe-no-fsync", // test data; durability is not needed and fsync dominates on slow disks
		"--log-level=warn",
	}, nil)
	if err != nil {
		return err
	}
	c.add(p)
	c.etcdURL = client
	return p.waitReady(ctx, 30*time.Second, httpOK(http.DefaultClient, client+"/health"))
}

func (c *Cluster) startAPIServer(ctx context.Context) error {
	if _, _, err := c.pki.issue("apiserver", "kube-apiserver", nil, true,
		[]net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.0.0.1")},
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}); err != nil {
		return err
	}
	if err := c.pki.serviceAccountKey(); err != nil {
		return err
	}
	ports, err := FreePorts(1)
	if err != nil {
		return err
	}
	c.APIServerURL = "https://127.0.0.1:" + strconv.Itoa(ports[0])
	args := []string{
		"--etcd-servers=" + c.etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port=" + strconv.Itoa(ports[0]),
		// A loopback advertise address makes the default reconciler loop on Endpoints errors.
		"--endpoint-reconciler-type=none",
		"--tls-cert-file=" + c.pki.path("apiserver.crt"), "--tls-private-key-file=" + c.pki.path("apiserver.key"),
		"--client-ca-file=" + c.pki.path("ca.crt"),
		"--service-account-key-file=" + c.pki.path("sa.pub"),
		"--service-account-signing-key-file=" + c.pki.path("sa.key"),
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-cluster-ip-range=10.0.0.0/24",
		"--authorization-mode=Node,RBAC",
		"--allow-privileged=true",
		"--profiling=false",
	}
	if !c.opts.ControllerManager {
		args = append(args, "--disable-admission-plugins=ServiceAccount")
	}
	if c.opts.AuditLog {
		policy := filepath.Join(c.Dir, "audit-policy.yaml")
		// One event per request (at completion; watches also when they start), metadata only.
		if err := os.WriteFile(policy, []byte("apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: Metadata\n"), 0o600); err != nil {
			return err
		}
		c.AuditLogPath = filepath.Join(c.Dir, "audit.log")
		args = append(args, "--audit-policy-file="+policy, "--audit-log-path="+c.AuditLogPath,
			"--audit-log-mode=blocking", "--audit-log-maxsize=0")
	}
	c.apiserverArgs = append(args, c.opts.APIServerArgs...)
	if err := c.runAPIServer(ctx); err != nil {
		return err
	}

	if c.AdminConfig, err = c.UserConfig("admin", "system:masters"); err != nil {
		return err
	}
	c.KubeconfigPath = filepath.Join(c.Dir, "admin.kubeconfig")
	if err := c.WriteKubeconfig(c.KubeconfigPath, c.AdminConfig); err != nil {
		return err
	}
	c.Client, err = kubernetes.NewForConfig(c.AdminConfig)
	return err
}

// runAPIServer starts kube-apiserver with the arguments chosen by startAPIServer and waits
// until it is ready.
func (c *Cluster) runAPIServer(ctx context.Context) error {
	p, err := startProcess(c.Dir, "kube-apiserver", c.tools.Path("kube-apiserver"), c.apiserverArgs, nil)
	if err != nil {
		return err
	}
	c.add(p)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(c.pki.caPEM)
	httpClient := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	return p.waitReady(ctx, 60*time.Second, httpOK(httpClient, c.APIServerURL+"/readyz"))
}

// RestartAPIServer stops kube-apiserver (SIGTERM, then SIGKILL after 5 s), keeps it down for
// the given time, and starts it again on the same port with the same certificates and etcd,
// so every client reconnects to the same URL; it returns once the new one is ready. The old
// log is kept as kube-apiserver-<n>.log. Not safe to call concurrently with Stop.
func (c *Cluster) RestartAPIServer(ctx context.Context, down time.Duration) error {
	old, ok := c.procs["kube-apiserver"]
	if !ok {
		return fmt.Errorf("restart kube-apiserver: it was never started")
	}
	old.Stop(5 * time.Second)
	c.apiserverRestarts++
	if err := os.Rename(old.logPath, filepath.Join(c.Dir, fmt.Sprintf("kube-apiserver-%d.log", c.apiserverRestarts))); err != nil {
		return fmt.Errorf("restart kube-apiserver: keep its log: %w", err)
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(down):
	}
	if err := c.runAPIServer(ctx); err != nil {
		return fmt.Errorf("restart kube-apiserver: %w", err)
	}
	return nil
}

// UserConfig returns a client configuration that authenticates as user in groups, with a
// client certificate signed by the sandbox CA. Use it to run code with exactly the RBAC a
// deployment would grant.
func (c *Cluster) UserConfig(user string, groups ...string) (*rest.Config, error) {
	certPEM, keyPEM, err := c.pki.issue("user-"+user, user, groups, false, nil, nil)
	if err != nil {
		return nil, err
	}
	return &rest.Config{
		Host:            c.APIServerURL,
		TLSClientConfig: rest.TLSClientConfig{CAData: c.pki.caPEM, CertData: certPEM, KeyData: keyPEM},
		// Fixtures create hundreds of objects; the client's default 5 QPS would dominate test time.
		QPS: 1000, Burst: 2000,
	}, nil
}

// WriteKubeconfig writes rc (from UserConfig) as a kubeconfig file, for programs run as
// separate processes.
func (c *Cluster) WriteKubeconfig(path string, rc *rest.Config) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["sandbox"] = &clientcmdapi.Cluster{Server: rc.Host, CertificateAuthorityData: rc.CAData}
	cfg.AuthInfos["user"] = &clientcmdapi.AuthInfo{ClientCertificateData: rc.CertData, ClientKeyData: rc.KeyData}
	cfg.Contexts["sandbox"] = &clientcmdapi.Context{Cluster: "sandbox", AuthInfo: "user"}
	cfg.CurrentContext = "sandbox"
	return clientcmd.WriteToFile(*cfg, path)
}

func (c *Cluster) startControllerManager(ctx context.Context) error {
	// Admin credentials: with its own certificate and --use-service-account-credentials=false
	// its controllers are forbidden; per-controller credentials cost seconds at start.
	p, err := startProcess(c.Dir, "kube-controller-manager", c.tools.Path("kube-controller-manager"), []string{
		"--kubeconfig=" + c.KubeconfigPath,
		"--authentication-kubeconfig=" + c.KubeconfigPath, "--authorization-kubeconfig=" + c.KubeconfigPath,
		"--bind-address=127.0.0.1", "--secure-port=0",
		"--leader-elect=false", "--use-service-account-credentials=false",
		"--service-account-private-key-file=" + c.pki.path("sa.key"),
		"--root-ca-file=" + c.pki.path("ca.crt"),
		"--controllers=*,-nodeipam,-cloud-node-lifecycle,-route,-service",
	}, nil)
	if err != nil {
		return err
	}
	c.add(p)
	// Its health endpoint answers before the controllers run; the default ServiceAccount
	// appears only once they do.
	return p.waitReady(ctx, 60*time.Second, func(ctx context.Context) error {
		_, err := c.Client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err
	})
}

func (c *Cluster) startScheduler(ctx context.Context) error {
	ports, err := FreePorts(1)
	if err != nil {
		return err
	}
	p, err := startProcess(c.Dir, "kube-scheduler", c.tools.Path("kube-scheduler"), []string{
		"--kubeconfig=" + c.KubeconfigPath,
		"--authentication-kubeconfig=" + c.KubeconfigPath, "--authorization-kubeconfig=" + c.KubeconfigPath,
		"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(ports[0]),
		"--leader-elect=false",
	}, nil)
	if err != nil {
		return err
	}
	c.add(p)
	insecure := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	return p.waitReady(ctx, 60*time.Second, httpOK(insecure, "https://127.0.0.1:"+strconv.Itoa(ports[0])+"/healthz"))
}

func (c *Cluster) startKwok(ctx context.Context) error {
	stages, err := filepath.Glob(filepath.Join(c.tools.Dir, "kwok-stages", "*.yaml"))
	if err != nil || len(stages) == 0 {
		return fmt.Errorf("kwok stages missing in %s: run 'make sandbox'", filepath.Join(c.tools.Dir, "kwok-stages"))
	}
	ports, err := FreePorts(1)
	if err != nil {
		return err
	}
	args := []string{
		"--kubeconfig=" + c.KubeconfigPath,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=" + KwokNodeAnnotation + "=fake",
		"--server-address=127.0.0.1:" + strconv.Itoa(ports[0]),
		"--node-ip=127.0.0.1",
	}
	for _, s := range append(stages, c.opts.ExtraKwokStages...) {
		args = append(args, "--config="+s)
	}
	bin := c.tools.Path("kwok")
	if c.opts.KwokNice < 0 && os.Geteuid() == 0 {
		// Through nice(1), so that every thread kwok starts inherits the niceness.
		args = append([]string{"-n", strconv.Itoa(c.opts.KwokNice), bin}, args...)
		if bin, err = exec.LookPath("nice"); err != nil {
			return fmt.Errorf("kwok at niceness %d: %w", c.opts.KwokNice, err)
		}
		c.KwokNice = c.opts.KwokNice
	}
	p, err := startProcess(c.Dir, "kwok", bin, args, nil)
	if err != nil {
		return err
	}
	c.add(p)
	return p.waitReady(ctx, 30*time.Second, httpOK(http.DefaultClient, "http://127.0.0.1:"+strconv.Itoa(ports[0])+"/healthz"))
}

// EnsureNamespace creates a namespace unless it exists.
func (c *Cluster) EnsureNamespace(ctx context.Context, name string) error {
	_, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", name, err)
	}
	return nil
}
