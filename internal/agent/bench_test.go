// SPDX-License-Identifier: Apache-2.0

package agent_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	"lifeboat.dev/lifeboat/test/sandbox"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// BenchmarkNoticeToCordon measures, at the default 500 ms poll interval, the time from the
// instant a spot notice becomes visible in instance metadata to the node being cordoned. Each
// iteration runs 7 trials, each on a fresh node with a fresh agent; p50 and p99 are over all
// trials (make bench runs 3 iterations: 21 trials).
func BenchmarkNoticeToCordon(b *testing.B) {
	c := sandboxtest.Cluster(b, sandbox.ClusterOptions{})
	var latencies []time.Duration
	for range b.N {
		for range 7 {
			latencies = append(latencies, cordonLatency(b, c))
		}
	}
	slices.Sort(latencies)
	pct := func(p float64) float64 {
		return float64(latencies[int(p*float64(len(latencies)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.5), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(len(latencies)), "trials")
}

func cordonLatency(b *testing.B, c *sandbox.Cluster) time.Duration {
	b.Helper()
	w := newWorld(b, c, []string{"spot", "-a", "terminate", "-t", time.Now().Add(2 * time.Minute).UTC().Format(time.RFC3339)})
	w.proxy.Hide(spotPath)
	a, stop := w.start(b, "IMDS_POLL_INTERVAL", "500ms", "LOG_LEVEL", "info")
	defer stop()
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return a.Healthy() == nil, nil
	})
	if err != nil {
		b.Fatal("agent never started polling")
	}
	time.Sleep(time.Duration(time.Now().UnixNano()%500) * time.Millisecond) // a random phase of the poll cycle
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	watcher, err := c.Client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", w.node).String()})
	if err != nil {
		b.Fatal(err)
	}
	defer watcher.Stop()
	visible := time.Now()
	w.proxy.Show(spotPath)
	for ev := range watcher.ResultChan() {
		if n, ok := ev.Object.(*corev1.Node); ok && ev.Type == watch.Modified && n.Spec.Unschedulable {
			return time.Since(visible)
		}
	}
	b.Fatal("node never cordoned")
	return 0
}

// BenchmarkIdleAgent runs the real lifeboat binary in agent mode (handing over to
// lifeboat-agent beside it, as in the image) with no notice for 30 s after
// a 5 s warm-up, and reports its resident memory, its Kubernetes requests per minute (from
// the audit log) and its instance-metadata requests per second.
//
// Beside it runs testdata/clientgofloor, a program that only builds a client-go clientset
// and reads its node: its resident memory, measured at the same moment, is the floor any
// client-go agent pays on this machine and kernel, so the agent's own share is the difference.
// Most of both is file-backed: pages of the binary that the kernel maps, which depends on the
// binary's size far more than on what the program does.
func BenchmarkIdleAgent(b *testing.B) {
	c := sandboxtest.Cluster(b, sandbox.ClusterOptions{AuditLog: true})
	dir := b.TempDir()
	built := buildPrograms(b, dir, "../../cmd/lifeboat", "../../cmd/lifeboat-agent", "./testdata/clientgofloor") // as the image has them
	bin, floorBin := built[0], built[2]
	for i := range b.N {
		w := newWorld(b, c, []string{"spot", "-a", "terminate", "-t", time.Now().Add(time.Hour).UTC().Format(time.RFC3339)})
		w.proxy.Hide(spotPath)
		rc, err := c.UserConfig(w.user, "system:masters")
		if err != nil {
			b.Fatal(err)
		}
		kubeconfig := filepath.Join(dir, fmt.Sprintf("kubeconfig-%d", i))
		if err := c.WriteKubeconfig(kubeconfig, rc); err != nil {
			b.Fatal(err)
		}
		env := append(os.Environ(), "KUBECONFIG="+kubeconfig, "NODE_NAME="+w.node, "INSTANCE_METADATA_URL="+w.proxy.URL,
			"PROBES_SERVER_BIND_ADDRESS=127.0.0.1", fmt.Sprintf("PROBES_SERVER_PORT=%d", sandboxtest.FreePort(b)))
		agent, stopAgent := startIdle(b, filepath.Join(dir, fmt.Sprintf("agent-%d.log", i)), env, bin, "agent")
		floor, stopFloor := startIdle(b, filepath.Join(dir, fmt.Sprintf("floor-%d.log", i)), env, floorBin)
		time.Sleep(5 * time.Second)
		requestsBefore, imdsBefore := len(auditOf(b, c, w.user)), w.proxy.Requests()
		const window = 30 * time.Second
		time.Sleep(window)
		requests, imdsRequests := len(auditOf(b, c, w.user))-requestsBefore, w.proxy.Requests()-imdsBefore
		rss, anon, file := rssMiB(b, agent.Process.Pid)
		floorRSS, _, _ := rssMiB(b, floor.Process.Pid)
		stopAgent()
		stopFloor()
		b.ReportMetric(rss, "idle-RSS-MiB")
		b.ReportMetric(anon, "idle-RSS-anon-MiB")
		b.ReportMetric(file, "idle-RSS-file-MiB")
		b.ReportMetric(floorRSS, "clientgo-floor-RSS-MiB")
		b.ReportMetric(float64(requests)/window.Minutes(), "kube-requests/min")
		b.ReportMetric(float64(imdsRequests)/window.Seconds(), "imds-requests/s")
	}
}

// buildPrograms builds each package into dir and returns the programs' paths, in order.
func buildPrograms(b *testing.B, dir string, pkgs ...string) []string {
	b.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	out := make([]string, len(pkgs))
	for i, pkg := range pkgs {
		out[i] = filepath.Join(dir, filepath.Base(pkg))
		if msg, err := exec.Command("go", "build", "-o", out[i], pkg).CombinedOutput(); err != nil {
			b.Fatalf("build %s: %v\n%s", pkg, err, msg)
		}
	}
	return out
}

// startIdle starts a program with its output in logPath. stop interrupts it and waits for
// it; it runs at the latest when the benchmark ends.
func startIdle(b *testing.B, logPath string, env []string, name string, args ...string) (cmd *exec.Cmd, stop func()) {
	b.Helper()
	logs, err := os.Create(logPath)
	if err != nil {
		b.Fatal(err)
	}
	cmd = exec.Command(name, args...)
	cmd.Env, cmd.Stdout, cmd.Stderr = env, logs, logs
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	stop = sync.OnceFunc(func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
		logs.Close()
	})
	b.Cleanup(stop)
	return cmd, stop
}

func auditOf(tb testing.TB, c *sandbox.Cluster, user string) []sandbox.AuditEvent {
	tb.Helper()
	ev, err := c.AuditEvents(sandbox.ByUser(user))
	if err != nil {
		tb.Fatal(err)
	}
	return ev
}

// rssMiB reads a process's resident memory in MiB: total, anonymous (heap, stacks) and
// file-backed (the mapped binary).
func rssMiB(b *testing.B, pid int) (total, anon, file float64) {
	b.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	fields := map[string]*float64{"VmRSS:": &total, "RssAnon:": &anon, "RssFile:": &file}
	for line := range strings.SplitSeq(string(status), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && fields[f[0]] != nil {
			kb, _ := strconv.Atoi(f[1])
			*fields[f[0]] = float64(kb) / 1024
		}
	}
	if total == 0 {
		b.Fatal("no VmRSS")
	}
	return total, anon, file
}
