// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// process is one started program with its log file.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{} // closed when the process has exited
	waitErr error
}

// startProcess runs bin with args, logging stdout and stderr to dir/<name>.log. The process
// gets its own process group (so Stop reaches its children) and is killed by the kernel if
// this process dies, so a crashed or timed-out test leaves nothing running.
func startProcess(dir, name, bin string, args []string, env []string) (*process, error) {
	logPath := filepath.Join(dir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// Exited reports whether the process has ended.
func (p *process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Stop sends SIGTERM to the process group, and SIGKILL after grace.
func (p *process) Stop(grace time.Duration) {
	if p.Exited() {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// Kill ends the process group at once, as a crash would.
func (p *process) Kill() {
	if !p.Exited() {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// LogTail returns the last n lines of the process's log, for error messages.
func (p *process) LogTail(n int) string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// waitReady polls check until it succeeds, the process exits, or the timeout passes; the
// error carries the end of the process's log.
func (p *process) waitReady(ctx context.Context, timeout time.Duration, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		if p.Exited() {
			return fmt.Errorf("%s exited during start-up (%v); log %s:\n%s", p.name, p.waitErr, p.logPath, p.LogTail(20))
		}
		if last = check(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready after %s: %v; log %s:\n%s", p.name, timeout, last, p.logPath, p.LogTail(20))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// httpOK is a readiness check: GET url answers 200 with client.
func httpOK(client *http.Client, url string) func(context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
		}
		return nil
	}
}

// FreePorts chooses n distinct unused TCP ports on 127.0.0.1. They lie outside the kernel's
// ephemeral range when it leaves room, because the source port of any outgoing connection
// (thousands, with tests in parallel) is taken from that range and could take a chosen port
// before its server binds it. Another sandbox can still pick the same port at the same time:
// startOnFreePorts tries again when a server finds its port taken.
func FreePorts(n int) ([]int, error) {
	// Hold all listeners until every port is chosen, so the ports differ.
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	lo, hi := outsideEphemeralRange()
	ports := make([]int, 0, n)
	for len(ports) < n {
		l, err := listenFree(lo, hi)
		if err != nil {
			return nil, errors.Join(errors.New("choose a free port"), err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// listenFree listens on a random port in [lo, hi), or on one the kernel chooses when the
// range is empty or every try finds its port taken.
func listenFree(lo, hi int) (net.Listener, error) {
	for range 50 {
		if hi <= lo {
			break
		}
		if l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(lo+rand.IntN(hi-lo))); err == nil {
			return l, nil
		}
	}
	return net.Listen("tcp", "127.0.0.1:0")
}

// outsideEphemeralRange is the larger span of ports, between 10000 and 65536, that the kernel
// does not hand out as source ports; empty when it cannot be read.
func outsideEphemeralRange() (lo, hi int) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0
	}
	var first, last int
	if _, err := fmt.Sscan(string(b), &first, &last); err != nil {
		return 0, 0
	}
	below, above := [2]int{10000, first}, [2]int{last + 1, 65536}
	if above[1]-above[0] > below[1]-below[0] {
		below = above
	}
	if below[1]-below[0] < 1000 {
		return 0, 0
	}
	return below[0], below[1]
}

// firstLine is the first line of err's message (start-up errors carry a log tail after it).
func firstLine(err error) string {
	line, _, _ := strings.Cut(err.Error(), "\n")
	return line
}

// portTaken reports whether a start-up error says a chosen port was already bound.
func portTaken(err error) bool {
	return err != nil && strings.Contains(err.Error(), "address already in use")
}

// startOnFreePorts runs start, which chooses its ports afresh each time, again (up to three
// times in all) when its server found a port taken between the choice and the bind.
func startOnFreePorts(start func() error) error {
	err := start()
	for try := 1; try < 3 && portTaken(err); try++ {
		// Said on stderr, which go test shows: a clash that keeps coming back would otherwise
		// only show as slower start-ups.
		fmt.Fprintf(os.Stderr, "sandbox: a chosen port was taken before its server bound it; starting again on new ports (try %d of 3): %v\n", try+1, firstLine(err))
		err = start()
	}
	return err
}

// Tail returns the last n lines of a log file (or the error reading it), for failure reports.
func Tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
