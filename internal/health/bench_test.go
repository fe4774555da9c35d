// SPDX-License-Identifier: Apache-2.0

package health

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// childEnv names the variable that makes TestIdleConnectionsServer serve, holding MaxConns.
const childEnv = "LIFEBOAT_HEALTH_BENCH_SERVER"

// TestIdleConnectionsServer is BenchmarkIdleConnections' server process, skipped otherwise:
// the probes served by Serve, and on a second port, outside its limits, the process's Go
// memory. It prints both addresses and serves until its input closes.
func TestIdleConnectionsServer(t *testing.T) {
	v, ok := os.LookupEnv(childEnv)
	if !ok {
		t.Skip("runs as BenchmarkIdleConnections' server")
	}
	maxConns, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", childEnv, v, err)
	}
	probes, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stats, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	limits := DefaultLimits()
	limits.MaxConns = maxConns
	go Serve(ctx, probes, Handler("/healthz", func() error { return nil }), WithLimits(limits))
	go http.Serve(stats, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		json.NewEncoder(w).Encode(goMemory{Heap: m.HeapInuse, Stacks: m.StackInuse, Goroutines: runtime.NumGoroutine()})
	}))
	fmt.Printf("serving %s %s\n", probes.Addr(), stats.Addr())
	bufio.NewReader(os.Stdin).ReadString('\n') // until the benchmark closes it
}

type goMemory struct {
	Heap, Stacks uint64
	Goroutines   int
}

// BenchmarkIdleConnections opens thousands of keep-alive connections to the probes server,
// one request each, and leaves them idle: what a client on the node's network can do. The
// server runs in a process of its own; the benchmark reports how much its memory grew, in
// total and per connection served, and how many connections it served and refused. With the
// default limit the growth stops at MaxConns connections; without one it grows with every
// connection (until IdleTimeout closes them).
func BenchmarkIdleConnections(b *testing.B) {
	const conns = 3000
	for _, bc := range []struct {
		name     string
		maxConns int
	}{
		{"limit=default", DefaultLimits().MaxConns},
		{"limit=none", 0},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var served, refused int
			var rss, heapStacks float64
			for range b.N {
				s, r, grewRSS, grewGo := idleConnections(b, bc.maxConns, conns)
				served, refused = served+s, refused+r
				rss, heapStacks = rss+grewRSS, heapStacks+grewGo
			}
			n := float64(b.N)
			b.ReportMetric(float64(served)/n, "conns-served")
			b.ReportMetric(float64(refused)/n, "conns-refused")
			b.ReportMetric(rss/n/(1<<20), "RSS-growth-MiB")
			b.ReportMetric(heapStacks/n/(1<<20), "heap+stacks-growth-MiB")
			if served > 0 {
				b.ReportMetric(rss/float64(served), "RSS-B/conn")
				b.ReportMetric(heapStacks/float64(served), "heap+stacks-B/conn")
			}
		})
	}
}

// idleConnections starts a server process, opens conns idle connections to it and returns
// how many were served and refused, and the growth of its anonymous resident memory and of
// its Go heap and stacks.
func idleConnections(b *testing.B, maxConns, conns int) (served, refused int, rss, goMem float64) {
	b.Helper()
	b.StopTimer()
	cmd := exec.Command(os.Args[0], "-test.run=^TestIdleConnectionsServer$", "-test.count=1")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", childEnv, maxConns))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		stdin.Close()
		cmd.Wait()
	}()
	var probes, stats string
	for line := bufio.NewScanner(stdout); probes == "" && line.Scan(); {
		fmt.Sscanf(line.Text(), "serving %s %s", &probes, &stats)
	}
	if probes == "" {
		b.Fatal("the server process printed no address")
	}
	go func() { // the test framework's last lines, unread otherwise
		for line := bufio.NewScanner(stdout); line.Scan(); {
		}
	}()
	rssBefore, goBefore := anonRSS(b, cmd.Process.Pid), goMemoryOf(b, stats)

	b.StartTimer()
	open := make([]net.Conn, 0, conns)
	defer func() {
		for _, c := range open {
			c.Close()
		}
	}()
	for range conns {
		c, err := net.Dial("tcp", probes)
		if err != nil {
			refused++
			continue
		}
		open = append(open, c)
		if resp, err := get(c, bufio.NewReader(c), "/healthz"); err == nil && resp.StatusCode == http.StatusOK {
			served++
		} else {
			refused++
		}
	}
	b.StopTimer()

	rssAfter, goAfter := anonRSS(b, cmd.Process.Pid), goMemoryOf(b, stats)
	if served > 0 && goAfter.Goroutines < goBefore.Goroutines+served {
		b.Fatalf("%d connections served but the server has %d goroutines, %d before: they are not held idle", served, goAfter.Goroutines, goBefore.Goroutines)
	}
	return served, refused, rssAfter - rssBefore, float64(goAfter.Heap+goAfter.Stacks) - float64(goBefore.Heap+goBefore.Stacks)
}

// anonRSS is a process's anonymous resident memory in bytes: its heap, stacks and runtime.
func anonRSS(b *testing.B, pid int) float64 {
	b.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Skipf("no resident memory to read here: %v", err)
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "RssAnon:" {
			kb, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				b.Fatalf("RssAnon %q: %v", f[1], err)
			}
			return kb * 1024
		}
	}
	b.Fatalf("no RssAnon in /proc/%d/status", pid)
	return 0
}

func goMemoryOf(b *testing.B, stats string) goMemory {
	b.Helper()
	client := http.Client{Timeout: patience}
	resp, err := client.Get("http://" + stats + "/")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var m goMemory
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		b.Fatal(err)
	}
	return m
}
