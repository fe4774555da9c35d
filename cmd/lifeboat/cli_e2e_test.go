// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/episode"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/test/sandbox"
	"lifeboat.dev/lifeboat/test/sandbox/fakeaws"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// cliWorld is a sandbox cluster seen from an operator's machine: a kubeconfig in
// $HOME/.kube/config whose current context points nowhere, and a "sandbox" context that works.
type cliWorld struct {
	c     *sandbox.Cluster
	home  string
	node  string // in an episode from the start
	other string // in none until a test records one
}

func newCLIWorld(t *testing.T) *cliWorld {
	t.Helper()
	c, _ := sandboxtest.Shared(t, sandbox.ClusterOptions{NoKwok: true})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nodes, err := c.AddNodes(ctx, sandbox.NodeSpec{Index: 1}, sandbox.NodeSpec{Index: 2})
	if err != nil {
		t.Fatal(err)
	}
	w := &cliWorld{c: c, home: t.TempDir(), node: nodes[0].Name, other: nodes[1].Name}
	cfg := clientcmdapi.NewConfig()
	rc := c.AdminConfig
	cfg.Clusters["sandbox"] = &clientcmdapi.Cluster{Server: rc.Host, CertificateAuthorityData: rc.CAData}
	cfg.Clusters["gone"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1"}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: rc.CertData, ClientKeyData: rc.KeyData}
	cfg.Contexts["sandbox"] = &clientcmdapi.Context{Cluster: "sandbox", AuthInfo: "admin"}
	cfg.Contexts["gone"] = &clientcmdapi.Context{Cluster: "gone", AuthInfo: "admin"}
	cfg.CurrentContext = "gone"
	if err := clientcmd.WriteToFile(*cfg, filepath.Join(w.home, ".kube", "config")); err != nil {
		t.Fatal(err)
	}
	return w
}

// run runs the command line in-process with HOME set to the world's and nothing else in the
// environment but env.
func (w *cliWorld) run(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	lookup := func(k string) (string, bool) {
		if k == "HOME" {
			return w.home, true
		}
		v, ok := env[k]
		return v, ok
	}
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, lookup, &out, &errOut)
	return code, out.String(), errOut.String()
}

// episode records a Spot notice on the node, as intake does, so the node is in an episode.
func (w *cliWorld) episode(t *testing.T, node string) {
	t.Helper()
	inst := episode.InstanceIDOf(mustNode(t, w, node))
	h := episode.NewHandler(sandboxtest.Config(t, config.ModeController, "QUEUE_URL", "https://sqs.us-east-1.amazonaws.com/1/q", "CORDON_ONLY", "true"), w.c.Client, slog.New(slog.DiscardHandler), episode.Options{})
	n := notice.Notice{ID: notice.ID(notice.SpotInterruption, inst, "terminate"), Kind: notice.SpotInterruption, Source: notice.SourceQueue,
		InstanceID: inst, Deadline: time.Now().Add(10 * time.Minute), Action: "terminate"}
	if err := h.Intake(context.Background(), n, node, nil); err != nil {
		t.Fatal(err)
	}
}

func mustNode(t *testing.T, w *cliWorld, name string) *corev1.Node {
	t.Helper()
	n, err := w.c.Client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// The read-only commands load Kubernetes' configuration as kubectl does, take kubectl's flags
// anywhere on the line, read only the settings they use, and exit 0 ok, 1 findings, 2 usage,
// 3 runtime error.
func TestReadOnlyCommandsLikeKubectl(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the sandbox")
	}
	w := newCLIWorld(t)
	w.episode(t, w.node)

	t.Run("~/.kube/config's current context is used, and --context picks another", func(t *testing.T) {
		if code, _, errOut := w.run(t, nil, "status"); code != exitRuntime || !strings.Contains(errOut, "127.0.0.1:1") {
			t.Errorf("current context pointing nowhere: exit %d, %q; want 3 naming the server", code, errOut)
		}
		code, out, errOut := w.run(t, nil, "status", "--context", "sandbox")
		if code != exitOK || !strings.Contains(out, w.node) || !strings.Contains(out, "NODE") {
			t.Errorf("--context sandbox: exit %d\n%s%s", code, out, errOut)
		}
		if code, out, _ := w.run(t, nil, "--context=sandbox", "status"); code != exitOK || !strings.Contains(out, w.node) {
			t.Errorf("a global flag before the command: exit %d\n%s", code, out)
		}
	})
	t.Run("--kubeconfig to a missing file is a usage error naming it", func(t *testing.T) {
		code, _, errOut := w.run(t, nil, "status", "--kubeconfig", "/nonexistent/config")
		if code != exitUsage || !strings.Contains(errOut, "/nonexistent/config") || strings.Contains(errOut, "KUBERNETES_MASTER") {
			t.Errorf("exit %d, %q", code, errOut)
		}
	})
	t.Run("no configuration at all says what to set", func(t *testing.T) {
		var out, errOut bytes.Buffer
		code := run(context.Background(), []string{"status"}, func(k string) (string, bool) {
			if k == "HOME" {
				return t.TempDir(), true
			}
			return "", false
		}, &out, &errOut)
		if code != exitUsage || !strings.Contains(errOut.String(), "no kubeconfig found") || strings.Contains(errOut.String(), "KUBERNETES_MASTER") {
			t.Errorf("exit %d, %q", code, errOut.String())
		}
	})
	t.Run("a daemon setting status never uses cannot stop it", func(t *testing.T) {
		if code, _, errOut := w.run(t, map[string]string{"WORKERS": "abc", "QUEUE_URL": "not a url"}, "status", "--context", "sandbox"); code != exitOK {
			t.Errorf("exit %d, %q", code, errOut)
		}
		if code, _, errOut := w.run(t, map[string]string{"IGNORE_DAEMON_SETS": "maybe"}, "status", "--context", "sandbox"); code != exitUsage ||
			!strings.Contains(errOut, "IGNORE_DAEMON_SETS") {
			t.Errorf("a setting it uses, invalid: exit %d, %q", code, errOut)
		}
	})
	t.Run("status NODE, -o json as a versioned object with numbers", func(t *testing.T) {
		code, out, errOut := w.run(t, nil, "status", w.node, w.other, "--context", "sandbox", "-o", "json")
		if code != exitOK {
			t.Fatalf("exit %d, %s", code, errOut)
		}
		var r struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Nodes      []struct {
				Name        string `json:"name"`
				Phase       string `json:"phase"`
				SecondsLeft *int64 `json:"secondsLeft"`
			} `json:"nodes"`
		}
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if r.APIVersion != "lifeboat.dev/v1alpha1" || r.Kind != "NodeStatusReport" || len(r.Nodes) != 2 {
			t.Fatalf("%+v", r)
		}
		if r.Nodes[0].Name != w.node || r.Nodes[0].SecondsLeft == nil || *r.Nodes[0].SecondsLeft < 500 || r.Nodes[1].Phase != "none" {
			t.Errorf("nodes %+v", r.Nodes)
		}
		if code, _, errOut := w.run(t, nil, "status", "no-such-node", "--context", "sandbox"); code != exitRuntime || !strings.Contains(errOut, "no-such-node") {
			t.Errorf("a node that does not exist: exit %d, %q", code, errOut)
		}
	})
	t.Run("-o name, wide and jsonpath", func(t *testing.T) {
		if _, out, _ := w.run(t, nil, "status", "--context", "sandbox", "-o", "name"); strings.TrimSpace(out) != "node/"+w.node {
			t.Errorf("-o name: %q", out)
		}
		if _, out, _ := w.run(t, nil, "status", "--context", "sandbox", "-o", "wide"); !strings.Contains(out, "KINDS") || !strings.Contains(out, "spot-interruption") {
			t.Errorf("-o wide: %q", out)
		}
		if _, out, errOut := w.run(t, nil, "status", "--context", "sandbox", "-o", "jsonpath={.nodes[*].name}"); strings.TrimSpace(out) != w.node {
			t.Errorf("-o jsonpath: %q %q", out, errOut)
		}
	})
	t.Run("status -w prints a node again as its episode changes", func(t *testing.T) {
		other := w.other
		out := &watchedBuffer{}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan int, 1)
		go func() {
			lookup := func(k string) (string, bool) { return w.home, k == "HOME" }
			done <- run(ctx, []string{"status", "-w", "--context", "sandbox"}, lookup, out, &sandboxtest.LogBuffer{})
		}()
		defer func() {
			cancel()
			if code := <-done; code != exitOK {
				t.Errorf("status -w ended with %d", code)
			}
		}()
		out.waitFor(t, "the first report", w.node)
		w.episode(t, other)
		out.waitFor(t, "the second node's row", other)
	})
	t.Run("check -n: findings exit 1, none exit 0, forbidden exit 3", func(t *testing.T) {
		ctx := context.Background()
		for _, ns := range []string{"pinned", "calm"} {
			if err := w.c.EnsureNamespace(ctx, ns); err != nil {
				t.Fatal(err)
			}
		}
		labels := map[string]string{"app": "pinned"}
		dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "pinned", Namespace: "pinned"}, Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}}}
		if _, err := w.c.Client.AppsV1().Deployments("pinned").Create(ctx, dep, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pinned-0", Namespace: "pinned", Labels: labels},
			Spec: corev1.PodSpec{NodeName: w.node, Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
		if _, err := w.c.Client.CoreV1().Pods("pinned").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		zero := intstr.FromInt32(0)
		pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "pinned", Namespace: "pinned"},
			Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &zero, Selector: &metav1.LabelSelector{MatchLabels: labels}}}
		if _, err := w.c.Client.PolicyV1().PodDisruptionBudgets("pinned").Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if code, out, errOut := w.run(t, nil, "check", "-n", "pinned", "--context", "sandbox"); code != exitFindings || !strings.Contains(out, "pinned") {
			t.Errorf("check -n pinned: exit %d\n%s%s", code, out, errOut)
		}
		if code, out, errOut := w.run(t, nil, "check", "-n", "calm", "--context", "sandbox"); code != exitOK || !strings.Contains(out, "Every workload can leave") {
			t.Errorf("check -n calm: exit %d\n%s%s", code, out, errOut)
		}
		nobody, err := w.c.UserConfig("nobody")
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "nobody")
		if err := w.c.WriteKubeconfig(path, nobody); err != nil {
			t.Fatal(err)
		}
		if code, _, errOut := w.run(t, nil, "check", "--kubeconfig", path); code != exitRuntime || !strings.Contains(errOut, "forbidden") {
			t.Errorf("check without rights: exit %d, %q; want 3, not a finding", code, errOut)
		}
	})
	t.Run("check: each group's instance maintenance policy, a finding with node repair on", func(t *testing.T) {
		w.checkGroups(t)
	})
	t.Run("completion scripts for bash, zsh and fish", func(t *testing.T) {
		for _, shell := range []string{"bash", "zsh", "fish"} {
			code, out, errOut := w.run(t, nil, "completion", shell)
			if code != exitOK || !strings.Contains(out, "lifeboat") || len(out) < 500 {
				t.Errorf("completion %s: exit %d, %d bytes, %q", shell, code, len(out), errOut)
			}
		}
		code, out, _ := w.run(t, nil, "__complete", "status", "--context", "sandbox", "")
		if code != exitOK || !strings.Contains(out, w.node) {
			t.Errorf("node names offered to the shell: exit %d, %q", code, out)
		}
	})
}

// Installed as kubectl-lifeboat, the binary is a kubectl plugin.
func TestKubectlPlugin(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the binary and starts the sandbox")
	}
	w := newCLIWorld(t)
	w.episode(t, w.node)
	dir := t.TempDir()
	if out, err := exec.Command("go", "build", "-o", filepath.Join(dir, "kubectl-lifeboat"), ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	kubectl := sandboxtest.Tools(t).Path("kubectl")
	for _, args := range [][]string{{"lifeboat", "status", "--context", "sandbox"}, {"lifeboat", "--context", "sandbox", "status", "-o", "name"}} {
		cmd := exec.Command(kubectl, args...)
		cmd.Env = append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"), "HOME="+w.home, "KUBECONFIG=")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), w.node) {
			t.Errorf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	cmd := exec.Command(kubectl, "lifeboat", "--help")
	cmd.Env = append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"), "HOME="+w.home)
	out, _ := cmd.CombinedOutput()
	if !strings.Contains(string(out), "kubectl lifeboat [command]") || strings.Contains(string(out), "  agent ") || strings.Contains(string(out), "  controller ") {
		t.Errorf("plugin help names it as kubectl lifeboat and offers only the read-only commands:\n%s", out)
	}
	cmd = exec.Command(kubectl, "lifeboat", "status", "--bogus")
	cmd.Env = append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"), "HOME="+w.home)
	if out, _ := cmd.CombinedOutput(); !strings.Contains(string(out), "Run 'kubectl lifeboat status --help' for usage.") {
		t.Errorf("the usage hint under kubectl:\n%s", out)
	}
	t.Run("kubectl completes the plugin through the binary linked as kubectl_complete-lifeboat", func(t *testing.T) {
		if err := os.Symlink("kubectl-lifeboat", filepath.Join(dir, "kubectl_complete-lifeboat")); err != nil {
			t.Fatal(err)
		}
		kubectlCompletes(t, w, kubectl, dir)
	})
	t.Run("and through the script the krew archive ships", func(t *testing.T) {
		script, err := os.ReadFile("../../deploy/krew/kubectl_complete-lifeboat")
		if err != nil {
			t.Fatal(err)
		}
		helper := filepath.Join(dir, "kubectl_complete-lifeboat")
		if err := os.Remove(helper); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(helper, script, 0o755); err != nil {
			t.Fatal(err)
		}
		kubectlCompletes(t, w, kubectl, dir)
	})
}

// kubectlCompletes runs kubectl's own completion of "kubectl lifeboat ..." with the
// completion helper on PATH in dir, next to the plugin.
func kubectlCompletes(t *testing.T, w *cliWorld, kubectl, dir string) {
	t.Helper()
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{""}, []string{"status", "check"}},
		{[]string{"status", "-o", ""}, []string{"wide", "jsonpath="}},
		{[]string{"--context", ""}, []string{"sandbox", "gone"}},
		{[]string{"status", "--context", "sandbox", "-n", ""}, []string{"default", "kube-system"}},
		{[]string{"status", "--context", "sandbox", ""}, []string{w.node}},
	} {
		cmd := exec.Command(kubectl, append([]string{"__complete", "lifeboat"}, tc.args...)...)
		cmd.Env = append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"), "HOME="+w.home, "KUBECONFIG=")
		out, err := cmd.Output()
		for _, want := range tc.want {
			if err != nil || !strings.Contains("\n"+string(out), "\n"+want) {
				t.Errorf("kubectl __complete lifeboat %q: %v, lacks %q:\n%s", tc.args, err, want, out)
			}
		}
	}
}

// The binary typed bare on an operator's machine prints its commands and a hint; in a pod
// (KUBERNETES_SERVICE_HOST) it is the daemon, as NTH's image is.
func TestBareBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	binary := filepath.Join(t.TempDir(), "lifeboat")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	home := "HOME=" + t.TempDir()
	for _, tc := range []struct {
		env      []string
		args     []string
		wantCode int
		want     string
	}{
		{[]string{home}, nil, 0, bareHint},
		{[]string{home, "KUBECONFIG=/nonexistent"}, []string{"--context", "prod"}, 0, bareHint},
		{[]string{home, "KUBERNETES_SERVICE_HOST=10.0.0.1"}, nil, 2, "NODE_NAME is required"},
		{[]string{home, "NODE_NAME=n", "ENABLE_PROBES_SERVER=false"}, nil, 2, "no Kubernetes API configured"},
	} {
		cmd := exec.Command(binary, tc.args...)
		cmd.Env = tc.env
		out, _ := cmd.CombinedOutput()
		if cmd.ProcessState.ExitCode() != tc.wantCode || !strings.Contains(string(out), tc.want) {
			t.Errorf("%q lifeboat %q: exit %d, want %d and %q:\n%s", tc.env, tc.args, cmd.ProcessState.ExitCode(), tc.wantCode, tc.want, out)
		}
	}
}

// watchedBuffer is an output a test waits on, write by write.
type watchedBuffer struct {
	mu    sync.Mutex
	b     strings.Builder
	wrote chan struct{} // closed and replaced at every write
}

func (w *watchedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.wrote != nil {
		close(w.wrote)
	}
	w.wrote = make(chan struct{})
	return w.b.Write(p)
}

// waitFor waits until the output holds want, failing the test after 30 s.
func (w *watchedBuffer) waitFor(t *testing.T, what, want string) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		w.mu.Lock()
		if w.wrote == nil {
			w.wrote = make(chan struct{})
		}
		got, next := w.b.String(), w.wrote
		w.mu.Unlock()
		if strings.Contains(got, want) {
			return
		}
		select {
		case <-next:
		case <-timeout:
			t.Fatalf("timed out waiting for %s: %q not in the output", what, want)
		}
	}
}

// checkGroups puts the world's two nodes in two Auto Scaling groups of the sandbox's AWS, one
// launching before it terminates, and runs check on a namespace without findings.
func (w *cliWorld) checkGroups(t *testing.T) {
	fake := sandboxtest.FakeAWS(t, "")
	fake.AddInstance(fakeaws.Instance{ID: episode.InstanceIDOf(mustNode(t, w, w.node)), AutoScalingGroup: "ng-launch-first"})
	fake.AddInstance(fakeaws.Instance{ID: episode.InstanceIDOf(mustNode(t, w, w.other)), AutoScalingGroup: "ng-plain"})
	fake.SetMaintenancePolicy("ng-launch-first", &fakeaws.MaintenancePolicy{MinHealthyPercentage: 100, MaxHealthyPercentage: 110})
	// The SDK reads its credentials from the process; the settings come from the lookup.
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDSANDBOX")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "sandbox-secret")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	aws := map[string]string{"AWS_REGION": "us-east-1", "AWS_ENDPOINT": fake.URL()}
	repair := map[string]string{"AWS_REGION": "us-east-1", "AWS_ENDPOINT": fake.URL(), "ENABLE_NODE_REPAIR": "true"}
	if err := w.c.EnsureNamespace(context.Background(), "calm"); err != nil {
		t.Fatal(err)
	}

	code, out, errOut := w.run(t, aws, "check", "-n", "calm", "--context", "sandbox")
	t.Logf("lifeboat check:\n%s", out)
	if code != exitOK {
		t.Errorf("node repair off: exit %d, want 0 (advice only)\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"Every workload can leave", "ng-launch-first", "launch-before-terminate", "replacement launched before the node goes",
		"ng-plain", "no-policy", "fix: aws autoscaling update-auto-scaling-group --auto-scaling-group-name ng-plain --instance-maintenance-policy MinHealthyPercentage=100,MaxHealthyPercentage=110",
		"node repair is off (ENABLE_NODE_REPAIR), so this is advice"} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q", want)
		}
	}

	code, out, errOut = w.run(t, repair, "check", "-n", "calm", "--context", "sandbox", "-o", "json")
	if code != exitFindings {
		t.Errorf("node repair on: exit %d, want 1\n%s%s", code, out, errOut)
	}
	var r struct {
		Findings          []json.RawMessage `json:"findings"`
		AutoScalingGroups struct {
			Groups []struct {
				Name                 string `json:"name"`
				MinHealthyPercentage *int   `json:"minHealthyPercentage"`
				Replacement          string `json:"replacement"`
				Fix                  string `json:"fix"`
				Finding              bool   `json:"finding"`
			} `json:"groups"`
			NotChecked string `json:"notChecked"`
		} `json:"autoScalingGroups"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	got := map[string]string{}
	for _, g := range r.AutoScalingGroups.Groups {
		got[g.Name] = fmt.Sprintf("%s finding=%v fix=%v", g.Replacement, g.Finding, g.Fix != "")
	}
	want := map[string]string{"ng-launch-first": "launch-before-terminate finding=false fix=false", "ng-plain": "no-policy finding=true fix=true"}
	if len(r.Findings) != 0 || r.AutoScalingGroups.NotChecked != "" || !maps.Equal(got, want) {
		t.Errorf("JSON: groups %v, want %v\n%s", got, want, out)
	}
	if _, out, _ := w.run(t, repair, "check", "-n", "calm", "--context", "sandbox", "-o", "name"); out != "autoscalinggroup/ng-plain\n" {
		t.Errorf("-o name: %q", out)
	}
	if _, out, _ := w.run(t, repair, "check", "-n", "calm", "--context", "sandbox", "-o", "jsonpath={.autoScalingGroups.groups[?(@.finding==true)].name}"); strings.TrimSpace(out) != "ng-plain" {
		t.Errorf("-o jsonpath: %q", out)
	}

	fake.SetFault(fakeaws.Fault{Service: "autoscaling", Action: "DescribeAutoScalingGroups", Status: 403, Code: "AccessDenied"})
	code, out, errOut = w.run(t, repair, "check", "-n", "calm", "--context", "sandbox")
	if code != exitOK || !strings.Contains(out, "Every workload can leave") ||
		!strings.Contains(out, "Auto Scaling groups not checked: AccessDenied: allow autoscaling:DescribeAutoScalingGroups") {
		t.Errorf("denied: exit %d, want 0 with the permission named\n%s%s", code, out, errOut)
	}
	fake.ClearFaults()
	code, out, errOut = w.run(t, map[string]string{"ENABLE_NODE_REPAIR": "true", "AWS_ENDPOINT": fake.URL()}, "check", "-n", "calm", "--context", "sandbox", "-o", "json")
	if code != exitOK || !strings.Contains(errOut, "Auto Scaling groups not checked: AWS not configured: no region") || !json.Valid([]byte(out)) {
		t.Errorf("no region: exit %d, want 0 and one line on stderr\n%s%s", code, out, errOut)
	}
	if code, out, _ := w.run(t, repair, "check", "-n", "calm", "--context", "sandbox", "--auto-scaling-groups=false"); code != exitOK || strings.Contains(out, "Auto Scaling") {
		t.Errorf("--auto-scaling-groups=false: exit %d\n%s", code, out)
	}
}
