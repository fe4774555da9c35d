// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"lifeboat.dev/lifeboat/internal/episode"
	"lifeboat.dev/lifeboat/internal/record"
	"lifeboat.dev/lifeboat/test/sandbox"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// The built binary in agent mode, configured only through NTH-style environment variables:
// it answers its probes and metrics, drains its node when a spot notice appears, and exits 0
// promptly on SIGTERM. Alone, lifeboat runs the agent itself; with lifeboat-agent of the same
// build beside it (as in the image), it hands over to that binary in the same process, which
// does the same; a lifeboat-agent of another build is passed over, and that is said.
func TestAgentBinaryEndToEnd(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the binary and starts the sandbox")
	}
	for _, tc := range []struct {
		name    string
		beside  []string // go build's flags for lifeboat-agent beside it; nil: none
		runs    string   // the binary the start line names
		warning string   // in the log
	}{
		{"alone", nil, "lifeboat", ""},
		{"with lifeboat-agent beside it", []string{}, "lifeboat-agent", ""},
		{"with lifeboat-agent of another build beside it", []string{"-ldflags=-X lifeboat.dev/lifeboat/internal/version.Version=v0.0.0-another"},
			"lifeboat", "running the agent in this binary: lifeboat-agent beside it is of another build"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			logs := runAgentBinary(t, tc.beside)
			if got := binaryLine.FindStringSubmatch(logs); got == nil || got[1] != tc.runs {
				t.Errorf("the start line names binary %q, want %q:\n%s", got, tc.runs, logs)
			}
			if !strings.Contains(logs, tc.warning) {
				t.Errorf("the log lacks %q:\n%s", tc.warning, logs)
			}
		})
	}
}

// binaryLine is the start line's binary.
var binaryLine = regexp.MustCompile(`msg=starting .*binary=(\S+)`)

// runAgentBinary runs `lifeboat` with no command through a Spot notice and a SIGTERM, with
// the agent's own binary beside it (built with the flags beside) or not (nil), and returns
// its log.
func runAgentBinary(t *testing.T, beside []string) string {
	c, _ := sandboxtest.Shared(t, sandbox.ClusterOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	nodes, err := c.AddNodes(ctx, sandbox.NodeSpec{Index: 1})
	if err != nil {
		t.Fatal(err)
	}
	node := nodes[0].Name
	if err := c.EnsureNamespace(ctx, "shop"); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: fmt.Sprintf("web-%d", i)},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "img"}}}}
		if _, err := c.Client.CoreV1().Pods("shop").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	m := sandboxtest.IMDS(t, sandbox.IMDSOptions{InstanceID: episode.InstanceIDOf(nodes[0]), Hostname: node,
		Args: []string{"spot", "-a", "terminate", "-t", time.Now().Add(2 * time.Minute).UTC().Format(time.RFC3339)}})
	proxy := sandboxtest.IMDSProxy(t, m)
	const spot = "/latest/meta-data/spot/instance-action"
	proxy.Hide(spot)

	dir := t.TempDir()
	bin := filepath.Join(dir, "lifeboat")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	if beside != nil {
		build := append(append([]string{"build"}, beside...), "-o", filepath.Join(dir, "lifeboat-agent"), "../lifeboat-agent")
		if out, err := exec.Command("go", build...).CombinedOutput(); err != nil {
			t.Fatalf("build lifeboat-agent: %v\n%s", err, out)
		}
	}
	probes, metricsPort := sandboxtest.FreePort(t), sandboxtest.FreePort(t)
	cmd := exec.Command(bin) // no sub-command: NTH's selection picks agent mode
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.KubeconfigPath, "NODE_NAME="+node, "INSTANCE_METADATA_URL="+proxy.URL,
		"TAINT_NODE=true", fmt.Sprintf("PROBES_SERVER_PORT=%d", probes),
		"ENABLE_PROMETHEUS_SERVER=true", fmt.Sprintf("PROMETHEUS_SERVER_PORT=%d", metricsPort),
		"PROBES_SERVER_BIND_ADDRESS=127.0.0.1", "PROMETHEUS_SERVER_BIND_ADDRESS=127.0.0.1")
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		if t.Failed() {
			t.Logf("lifeboat log:\n%s", logs.String())
		}
	})

	get := func(port int, path string) (int, string) {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d%s", port, path))
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		code, _ := get(probes, "/readyz")
		return code == http.StatusOK, nil
	})
	if err != nil {
		t.Fatal("never ready")
	}
	if code, _ := get(probes, "/healthz"); code != http.StatusOK {
		t.Errorf("liveness %d", code)
	}

	proxy.Show(spot)
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		r, _ := record.Read(n)
		return r.Phase == record.PhaseDrained, nil
	})
	if err != nil {
		t.Fatal("node never drained")
	}
	if pods, _ := c.Client.CoreV1().Pods("shop").List(ctx, metav1.ListOptions{}); len(pods.Items) != 0 {
		t.Errorf("%d pods left", len(pods.Items))
	}
	if _, body := get(metricsPort, "/metrics"); !strings.Contains(body, `lifeboat_notices_total{kind="spot_interruption",source="imds"} 1`) ||
		!strings.Contains(body, `lifeboat_imds_polls_total{path="spot/instance-action",result="ok"}`) {
		t.Errorf("metrics lack the notice and poll counters:\n%s", body)
	}

	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("exit after SIGTERM: %v, want status 0", err)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("took %v to stop", d)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("still running 15 s after SIGTERM")
	}
	return logs.String()
}
