// SPDX-License-Identifier: Apache-2.0

package faults

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"lifeboat.dev/lifeboat/test/sandbox"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

var (
	buildOnce sync.Once
	binDir    string
	binPath   string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// lifeboatBinary builds cmd/lifeboat once per test binary.
func lifeboatBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		if binDir, buildErr = os.MkdirTemp("", "lifeboat-faults-bin-"); buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "lifeboat")
		out, err := exec.Command("go", "build", "-o", binPath, "lifeboat.dev/lifeboat/cmd/lifeboat").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build lifeboat: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// fullRun reports whether the full-length runs were asked for (make faults).
func fullRun() bool { return os.Getenv("LIFEBOAT_FAULTS_FULL") != "" }

// pick is short in `make test` and long under LIFEBOAT_FAULTS_FULL.
func pick[T any](short, long T) T {
	if fullRun() {
		return long
	}
	return short
}

// seeded returns the test's random source: LIFEBOAT_FAULTS_SEED, or the clock, mixed with
// the test's name so that each scenario replays on its own.
func seeded(t testing.TB) *rand.Rand {
	t.Helper()
	base := uint64(time.Now().UnixNano())
	if s := os.Getenv("LIFEBOAT_FAULTS_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("LIFEBOAT_FAULTS_SEED=%q: not an unsigned integer", s)
		}
		base = v
	}
	t.Logf("seed %d (LIFEBOAT_FAULTS_SEED=%d replays this run's random choices)", base, base)
	h := fnv.New64a()
	h.Write([]byte(t.Name()))
	return rand.New(rand.NewPCG(base, h.Sum64()))
}

// between is a random duration in [lo, hi).
func between(r *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(r.Int64N(int64(hi-lo)))
}

// lifeboat runs the binary as a pod's container would run: it can be started, killed with
// SIGKILL and started again, and, when supervised, it is restarted after exiting on its own
// (as the kubelet does). Every run appends to one log file in the sandbox directory.
type lifeboat struct {
	t           testing.TB
	name        string
	args, env   []string
	logPath     string
	MetricsPort int
	ProbesPort  int
	// Supervise restarts the process a second after it exits without being killed or
	// stopped. Such exits are counted either way.
	Supervise bool

	mu      sync.Mutex
	cur     *run
	runs    int
	stopped bool
	exits   []string // exits nobody asked for: "run 2: exit status 1"
}

type run struct {
	n      int
	cmd    *exec.Cmd
	done   chan struct{}
	err    error
	killed bool // by kill or stop: an expected end
}

// newLifeboat prepares a lifeboat process; env is added to the test's environment (later
// entries win). The metrics and probes servers listen on free ports.
func newLifeboat(t testing.TB, dir, name string, args []string, env ...string) *lifeboat {
	t.Helper()
	l := &lifeboat{t: t, name: name, args: args, logPath: filepath.Join(dir, "lifeboat-"+name+".log"),
		MetricsPort: sandboxtest.FreePort(t), ProbesPort: sandboxtest.FreePort(t)}
	l.env = append([]string{
		"AWS_ACCESS_KEY_ID=AKIDSANDBOX", "AWS_SECRET_ACCESS_KEY=sandbox-secret", "AWS_EC2_METADATA_DISABLED=true",
		"LOG_LEVEL=debug",
		"ENABLE_PROMETHEUS_SERVER=true", "PROMETHEUS_SERVER_PORT=" + strconv.Itoa(l.MetricsPort),
		"ENABLE_PROBES_SERVER=true", "PROBES_SERVER_PORT=" + strconv.Itoa(l.ProbesPort),
	}, env...)
	bin := lifeboatBinary(t)
	l.args = append([]string{bin}, args...)
	t.Cleanup(func() {
		l.mu.Lock()
		l.stopped = true
		r := l.cur
		l.mu.Unlock()
		if r != nil {
			l.signal(r, syscall.SIGKILL)
			<-r.done
		}
		if t.Failed() {
			t.Logf("---- %s (last lines)\n%s", l.logPath, sandbox.Tail(l.logPath, 60))
		}
	})
	return l
}

// Start runs the binary once more. It fails the test if a run is still going.
func (l *lifeboat) Start() {
	l.t.Helper()
	if err := l.start(); err != nil {
		l.t.Fatal(err)
	}
}

func (l *lifeboat) start() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.startLocked()
}

// startLocked starts a run; l.mu is held.
func (l *lifeboat) startLocked() error {
	if l.cur != nil {
		select {
		case <-l.cur.done:
		default:
			return fmt.Errorf("lifeboat %s: run %d is still going", l.name, l.cur.n)
		}
	}
	logFile, err := os.OpenFile(l.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	l.runs++
	fmt.Fprintf(logFile, "==== run %d of lifeboat %s at %s\n", l.runs, l.name, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(l.args[0], l.args[1:]...)
	cmd.Env = append(os.Environ(), l.env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("start lifeboat %s: %w", l.name, err)
	}
	r := &run{n: l.runs, cmd: cmd, done: make(chan struct{})}
	l.cur = r
	go func() {
		r.err = cmd.Wait()
		logFile.Close()
		l.mu.Lock()
		unexpected := !r.killed
		if unexpected {
			l.exits = append(l.exits, fmt.Sprintf("run %d: %v", r.n, exitText(r.err)))
		}
		restart := unexpected && l.Supervise && !l.stopped
		close(r.done)
		l.mu.Unlock()
		if restart {
			time.Sleep(time.Second)
			l.mu.Lock()
			if !l.stopped {
				if err := l.startLocked(); err != nil {
					l.exits = append(l.exits, "restart failed: "+err.Error())
				}
			}
			l.mu.Unlock()
		}
	}()
	return nil
}

func exitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

func (l *lifeboat) signal(r *run, sig syscall.Signal) {
	_ = syscall.Kill(-r.cmd.Process.Pid, sig)
}

// Kill ends the current run with SIGKILL, as a crash or an OOM kill would, and returns once
// it is gone. It fails the test if the run had already ended on its own.
func (l *lifeboat) Kill() {
	l.t.Helper()
	l.mu.Lock()
	r := l.cur
	ended := r == nil
	if r != nil {
		select {
		case <-r.done:
			ended = true
		default:
			r.killed = true
		}
	}
	l.mu.Unlock()
	if ended {
		l.t.Errorf("lifeboat %s was not running when it was to be killed (exits: %v)", l.name, l.Exits())
		return
	}
	l.signal(r, syscall.SIGKILL)
	<-r.done
}

// Stop sends SIGTERM and waits; Lifeboat must exit 0 within 10 s (15 s allowed here, the
// machine being loaded).
func (l *lifeboat) Stop() {
	l.t.Helper()
	l.mu.Lock()
	l.stopped = true
	r := l.cur
	if r != nil {
		r.killed = true
	}
	l.mu.Unlock()
	if r == nil {
		return
	}
	select {
	case <-r.done:
		return
	default:
	}
	l.signal(r, syscall.SIGTERM)
	select {
	case <-r.done:
		if r.err != nil {
			l.t.Errorf("lifeboat %s after SIGTERM: %v, want exit status 0", l.name, r.err)
		}
	case <-time.After(15 * time.Second):
		l.signal(r, syscall.SIGKILL)
		<-r.done
		l.t.Errorf("lifeboat %s still running 15 s after SIGTERM", l.name)
	}
}

// Running reports whether a run is going.
func (l *lifeboat) Running() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cur == nil {
		return false
	}
	select {
	case <-l.cur.done:
		return false
	default:
		return true
	}
}

// Exits lists the runs that ended without being killed or stopped.
func (l *lifeboat) Exits() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.exits...)
}

// Runs counts the starts so far.
func (l *lifeboat) Runs() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.runs
}

// Log returns everything the runs have logged.
func (l *lifeboat) Log() string {
	b, _ := os.ReadFile(l.logPath)
	return string(b)
}

// Metric reads one metric from /metrics (see Metric); ok is false when the server does not
// answer or the metric is absent.
func (l *lifeboat) Metric(name string, labelPairs ...string) (v float64, ok bool) {
	code, body := httpGet(l.MetricsPort, "/metrics")
	if code != http.StatusOK {
		return 0, false
	}
	v, found, err := Metric(body, name, labelPairs...)
	if err != nil {
		l.t.Errorf("lifeboat %s /metrics: %v", l.name, err)
	}
	return v, found
}

// Ready is the status code of /readyz (0 when nothing answers) and its body.
func (l *lifeboat) Ready() (int, string) { return httpGet(l.ProbesPort, "/readyz") }

var probeClient = &http.Client{Timeout: 3 * time.Second}

func httpGet(port int, path string) (int, string) {
	resp, err := probeClient.Get(fmt.Sprintf("http://127.0.0.1:%d%s", port, path))
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitFor polls cond every 100 ms until it is true, the timeout passes (false) or ctx ends.
func waitFor(ctx context.Context, timeout time.Duration, cond func() bool) bool {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		if cond() {
			return true
		}
		select {
		case <-ctx.Done():
			return cond()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// sleep waits d unless ctx ends first.
func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// result is one row of the reliability table (docs/reliability.md).
type result struct {
	Fault       string
	Mode        string
	Trials      int
	Survived    int
	NoticesLost int
	Notes       string
	Run         string // the go test -run pattern that reproduces it
}

// report logs the row and, with LIFEBOAT_FAULTS_REPORT set, appends it to that file.
func report(t testing.TB, r result) {
	t.Helper()
	cmd := fmt.Sprintf("`LIFEBOAT_FAULTS_FULL=1 go test -count=1 -run '%s' ./test/faults`", runPattern(r.Run))
	row := fmt.Sprintf("| %s | %s | %d | %d | %d | %s | %s |", r.Fault, r.Mode, r.Trials, r.Survived, r.NoticesLost, r.Notes, cmd)
	t.Log("result: " + row)
	path := os.Getenv("LIFEBOAT_FAULTS_REPORT")
	if path == "" {
		return
	}
	reportMu.Lock()
	defer reportMu.Unlock()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err == nil {
		_, err = fmt.Fprintln(f, row)
		err = errors.Join(err, f.Close())
	}
	if err != nil {
		t.Errorf("LIFEBOAT_FAULTS_REPORT=%s: %v", path, err)
	}
}

var reportMu sync.Mutex

// runPattern turns a test name into a -run pattern that selects exactly it and is safe inside
// single quotes: each level anchored, any character but letters, digits, '_' and '-' matched
// by '.'.
func runPattern(name string) string {
	levels := strings.Split(name, "/")
	for i, l := range levels {
		levels[i] = "^" + strings.Map(func(r rune) rune {
			if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' {
				return r
			}
			return '.'
		}, l) + "$"
	}
	return strings.Join(levels, "/")
}
