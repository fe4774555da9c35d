// SPDX-License-Identifier: Apache-2.0

package demo

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"lifeboat.dev/lifeboat/test/sandbox"
)

// The demo runs the binaries users deploy: lifeboat, and beside it the agent's own binary,
// which `lifeboat agent` hands over to (as in the image).
const (
	lifeboatPackage = "lifeboat.dev/lifeboat/cmd/lifeboat"
	agentPackage    = "lifeboat.dev/lifeboat/cmd/lifeboat-agent"
)

// BuildLifeboat builds lifeboat and lifeboat-agent into dir and returns lifeboat's path.
func BuildLifeboat(ctx context.Context, dir string) (string, error) {
	for _, b := range [][2]string{{"lifeboat-agent", agentPackage}, {"lifeboat", lifeboatPackage}} {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(dir, b[0]), b[1])
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("go build %s: %w\n%s", b[1], err, out)
		}
	}
	return filepath.Join(dir, "lifeboat"), nil
}

// process is a started lifeboat sub-command.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	metrics string // URL of its /metrics
	ready   string // URL of its readiness probe
	done    chan struct{}
	waitErr error
}

// startLifeboat runs `lifeboat <mode>` with exactly the given environment (plus PATH and
// HOME: nothing else leaks in from the caller's shell), logging to dir/<mode>.log. Like the
// sandbox's processes it gets a process group of its own, and the kernel kills it if the
// demo dies first.
func startLifeboat(bin, mode, dir string, env map[string]string) (*process, error) {
	ports, err := sandbox.FreePorts(2)
	if err != nil {
		return nil, err
	}
	env["ENABLE_PROMETHEUS_SERVER"] = "true"
	env["PROMETHEUS_SERVER_PORT"] = fmt.Sprint(ports[0])
	// Probes are on by default; two processes on one host need a port each.
	env["PROBES_SERVER_PORT"] = fmt.Sprint(ports[1])
	env["PROBES_SERVER_BIND_ADDRESS"] = "127.0.0.1"
	env["JSON_LOGGING"] = "true" // the demo reads the log for its summary
	env["LOG_LEVEL"] = "debug"   // the drain names each pod it leaves, and why, at debug
	list := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	for k, v := range env {
		list = append(list, k+"="+v)
	}
	logPath := filepath.Join(dir, mode+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, mode)
	cmd.Dir = dir
	cmd.Env = list
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start lifeboat %s: %w", mode, err)
	}
	p := &process{name: "lifeboat " + mode, cmd: cmd, logPath: logPath, done: make(chan struct{}),
		metrics: fmt.Sprintf("http://127.0.0.1:%d/metrics", ports[0]),
		ready:   fmt.Sprintf("http://127.0.0.1:%d/readyz", ports[1])}
	go func() {
		p.waitErr = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended, and how.
func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.waitErr
	default:
		return false, nil
	}
}

// stop sends SIGTERM to the process group, and SIGKILL if it is still there after 12 s
// (Lifeboat promises to exit within 10 s).
func (p *process) stop() error {
	if done, err := p.exited(); done {
		return err
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
		return p.waitErr
	case <-time.After(12 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
		return fmt.Errorf("%s did not stop within 12 s of SIGTERM; killed", p.name)
	}
}

// waitLog waits until the process logs a line containing want.
func (p *process) waitLog(ctx context.Context, want string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		if b, err := os.ReadFile(p.logPath); err == nil && strings.Contains(string(b), want) {
			return nil
		}
		if done, err := p.exited(); done {
			return fmt.Errorf("%s exited (%v) before logging %q; log %s:\n%s", p.name, err, want, p.logPath, sandbox.Tail(p.logPath, 15))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s did not log %q within %s; log %s:\n%s", p.name, want, timeout, p.logPath, sandbox.Tail(p.logPath, 15))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// startProcesses starts the agent for node A and the controller for the cluster and waits
// until both are working.
func startProcesses(ctx context.Context, e *env, bin, outDir, nodeA, nodeB string) ([]*process, error) {
	agentKubeconfig, err := e.kubeconfigFor(agentUser)
	if err != nil {
		return nil, err
	}
	controllerKubeconfig, err := e.kubeconfigFor(controllerUser)
	if err != nil {
		return nil, err
	}
	agent, err := startLifeboat(bin, "agent", outDir, map[string]string{
		"KUBECONFIG": agentKubeconfig, "NODE_NAME": nodeA, "INSTANCE_METADATA_URL": e.imdsA.URL, "TAINT_NODE": "true",
	})
	if err != nil {
		return nil, err
	}
	procs := []*process{agent}
	controller, err := startLifeboat(bin, "controller", outDir, map[string]string{
		"KUBECONFIG": controllerKubeconfig, "QUEUE_URL": e.queueURL, "AWS_ENDPOINT": e.aws.URL(), "AWS_REGION": "us-east-1",
		"AWS_ACCESS_KEY_ID": "AKIDSANDBOX", "AWS_SECRET_ACCESS_KEY": "sandbox-secret", "AWS_EC2_METADATA_DISABLED": "true",
		"CLUSTER_NAME": ClusterName, "CHECK_TAG_BEFORE_DRAINING": "true", "TAINT_NODE": "true",
		"NAMESPACE": systemNamespace, "POD_NAME": ControllerPodName, "NODE_NAME": nodeB,
	})
	if err != nil {
		return procs, err
	}
	procs = append(procs, controller)
	if err := agent.waitLog(ctx, "agent watching instance metadata", 60*time.Second); err != nil {
		return procs, err
	}
	if err := controller.waitLog(ctx, "controller consuming the queue", 60*time.Second); err != nil {
		return procs, err
	}
	// As the kubelet would: both pods count as Ready only once their readiness probe says so.
	for _, p := range procs {
		if err := p.waitReady(ctx, 30*time.Second); err != nil {
			return procs, err
		}
	}
	return procs, nil
}

// waitReady waits until the process's readiness probe answers 200.
func (p *process) waitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	last := "no answer"
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.ready, nil)
		if err != nil {
			return err
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(body)))
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready within %s (%s); log %s:\n%s", p.name, timeout, last, p.logPath, sandbox.Tail(p.logPath, 15))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Users the processes authenticate as, so the audit log tells their requests apart.
const (
	agentUser      = "lifeboat-agent"
	controllerUser = "lifeboat-controller"
)
