// SPDX-License-Identifier: Apache-2.0

package agent_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"lifeboat.dev/lifeboat/internal/record"
	"lifeboat.dev/lifeboat/internal/source/imds"
	"lifeboat.dev/lifeboat/test/sandbox"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// BenchmarkAgentDrainMemory runs `lifeboat agent` as the image has it (lifeboat-agent beside
// it, which it hands over to) through a Spot interruption of a node with 100 pods and reports
// its anonymous resident memory once the drain is done, beside testdata/clientgofloor's (a
// clientset and one node read: the floor any client-go agent pays on this machine), and the
// same drain by lifeboat alone (the agent run in the binary that also holds the controller and
// its AWS clients). Then the same drain with testdata/agentprofile (the agent as
// `lifeboat agent` builds it, with Go's profiles served on loopback) says where that memory
// goes: the Go runtime's split (live heap after a GC, free space in the heap, stacks, the
// runtime's metadata) and the live heap by the package that allocated it.
//
//	go test -run '^$' -bench AgentDrainMemory -benchtime 1x ./internal/agent
func BenchmarkAgentDrainMemory(b *testing.B) {
	c := sandboxtest.Cluster(b, sandbox.ClusterOptions{})
	dir := b.TempDir()
	built := buildPrograms(b, dir, "../../cmd/lifeboat", "../../cmd/lifeboat-agent", "./testdata/agentprofile", "./testdata/clientgofloor")
	bin, profiled, floorBin := built[0], built[2], built[3]
	alone := buildPrograms(b, filepath.Join(dir, "alone"), "../../cmd/lifeboat")[0]
	for i := range b.N {
		// The real binary's resident memory, with the floor's measured at the same moment.
		env := drainWorld(b, c, dir, fmt.Sprintf("real-%d", i))
		agentLog := filepath.Join(dir, fmt.Sprintf("agent-%d.log", i))
		agent, stopAgent := startIdle(b, agentLog, env.vars, bin, "agent")
		floor, stopFloor := startIdle(b, filepath.Join(dir, fmt.Sprintf("floor-%d.log", i)), env.vars, floorBin)
		env.drain(b)
		_, anon, _ := rssMiB(b, agent.Process.Pid)
		_, floorAnon, _ := rssMiB(b, floor.Process.Pid)
		stopAgent()
		stopFloor()
		if log, _ := os.ReadFile(agentLog); !strings.Contains(string(log), "binary=lifeboat-agent") {
			b.Fatalf("lifeboat agent did not hand over to lifeboat-agent:\n%s", log)
		}

		// The same drain by lifeboat alone: what the agent's own binary saves.
		env = drainWorld(b, c, dir, fmt.Sprintf("alone-%d", i))
		one, stopOne := startIdle(b, filepath.Join(dir, fmt.Sprintf("alone-%d.log", i)), env.vars, alone, "agent")
		env.drain(b)
		_, oneAnon, _ := rssMiB(b, one.Process.Pid)
		stopOne()

		// The same drain again, profiled: where the memory goes.
		env = drainWorld(b, c, dir, fmt.Sprintf("profiled-%d", i))
		pprofAddr := fmt.Sprintf("127.0.0.1:%d", sandboxtest.FreePort(b))
		withProfiles, stopProfiled := startIdle(b, filepath.Join(dir, fmt.Sprintf("profiled-%d.log", i)), append(env.vars, "PPROF_ADDRESS="+pprofAddr, profileRate), profiled)
		env.drain(b)
		profile := filepath.Join(dir, fmt.Sprintf("heap-%d.pb.gz", i))
		fetch(b, "http://"+pprofAddr+"/debug/pprof/heap?gc=1", profile)            // a GC first: the live heap
		stats := memStats(b, "http://"+pprofAddr+"/debug/pprof/heap?debug=1&gc=1") // read right after a GC
		_, profiledAnon, _ := rssMiB(b, withProfiles.Process.Pid)
		stopProfiled()

		mib := func(k string) float64 { return float64(stats[k]) / (1 << 20) }
		metadata := mib("MSpan") + mib("MCache") + mib("GCSys") + mib("BuckHashSys") + mib("OtherSys")
		b.ReportMetric(anon, "anon-RSS-MiB")
		b.ReportMetric(floorAnon, "clientgo-floor-anon-RSS-MiB")
		b.ReportMetric(oneAnon, "one-binary-anon-RSS-MiB")
		b.ReportMetric(profiledAnon, "profiled-anon-RSS-MiB")
		b.ReportMetric(mib("HeapAlloc"), "live-heap-MiB")
		b.ReportMetric(mib("HeapInuse")-mib("HeapAlloc"), "heap-spans-free-MiB")
		b.ReportMetric(mib("HeapIdle")-mib("HeapReleased"), "heap-kept-free-MiB")
		b.ReportMetric(mib("Stack"), "stacks-MiB")
		b.ReportMetric(metadata, "runtime-metadata-MiB")
		byPackage, top := heapByPackage(b, profiled, profile)
		b.Logf("after a 100-pod drain: the agent's anonymous resident memory %.1f MiB (lifeboat alone %.1f), the client-go floor's %.1f MiB", anon, oneAnon, floorAnon)
		b.Logf("profiled (%.1f MiB anonymous): live heap %.1f MiB, free in the heap's spans %.1f, heap kept free and not returned %.1f, "+
			"stacks %.1f, the runtime's metadata %.1f (of which the profile's own records %.1f)", profiledAnon, mib("HeapAlloc"),
			mib("HeapInuse")-mib("HeapAlloc"), mib("HeapIdle")-mib("HeapReleased"), mib("Stack"), metadata, mib("BuckHashSys"))
		b.Logf("live heap by the package that allocated it (MiB): %s", byPackage)
		b.Logf("the heap profile's top functions:\n%s", top)
	}
}

// profileRate samples one allocation per 16 KiB rather than 512 from the process's start,
// package initialisation included (client-go's schemes are built there): a small agent's live
// heap is a few MiB. The profile's own records show in the runtime's metadata (BuckHashSys).
const profileRate = "GODEBUG=memprofilerate=16384"

// drainEnv is a node with 100 pods, a Spot warning its instance metadata hides until drain,
// and the environment an agent on it runs with.
type drainEnv struct {
	w    *world
	vars []string
}

func drainWorld(b *testing.B, c *sandbox.Cluster, dir, name string) drainEnv {
	b.Helper()
	w := newWorld(b, c, []string{"spot", "-a", "terminate", "-t", time.Now().Add(2 * time.Minute).UTC().Format(time.RFC3339)})
	w.proxy.Hide(spotPath)
	w.addPods(b, replicaSetPods("shop", "app-"+name, 100)...)
	rc, err := c.UserConfig(w.user, "system:masters")
	if err != nil {
		b.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig-"+name)
	if err := c.WriteKubeconfig(kubeconfig, rc); err != nil {
		b.Fatal(err)
	}
	return drainEnv{w: w, vars: append(os.Environ(), "KUBECONFIG="+kubeconfig, "NODE_NAME="+w.node, "INSTANCE_METADATA_URL="+w.proxy.URL,
		"PROBES_SERVER_BIND_ADDRESS=127.0.0.1", fmt.Sprintf("PROBES_SERVER_PORT=%d", sandboxtest.FreePort(b)), "LOG_LEVEL=info")}
}

// drain waits for the agent to poll, shows the Spot warning and waits for the drain's end.
func (e drainEnv) drain(b *testing.B) {
	b.Helper()
	e.w.awaitPolls(b, imds.PathSpot, 1) // the agent polls: it is up
	e.w.proxy.Show(spotPath)
	e.w.waitPhase(b, record.PhaseDrained, 2*time.Minute)
}

// fetch saves url's body in path.
func fetch(b *testing.B, url, path string) {
	b.Helper()
	var body []byte
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		resp, err := http.Get(url)
		if err != nil {
			return false, nil
		}
		defer resp.Body.Close()
		body, err = io.ReadAll(resp.Body)
		return err == nil && resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		b.Fatalf("get %s: %v", url, err)
	}
	if err := os.WriteFile(path, body, 0o600); err != nil {
		b.Fatal(err)
	}
}

// memStats reads runtime.MemStats from the text heap profile, which ends with them as
// "# Name = value" lines.
func memStats(b *testing.B, url string) map[string]uint64 {
	b.Helper()
	path := filepath.Join(b.TempDir(), "heap.txt")
	fetch(b, url, path)
	raw, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	stats := map[string]uint64{}
	// "# HeapAlloc = 123", or "# Stack = 123 / 456" (in use / from the system).
	line := regexp.MustCompile(`^# (\w+) = (\d+)(?: / \d+)?$`)
	for s := bufio.NewScanner(bytes.NewReader(raw)); s.Scan(); {
		if m := line.FindStringSubmatch(s.Text()); m != nil {
			v, _ := strconv.ParseUint(m[2], 10, 64)
			stats[m[1]] = v
		}
	}
	if stats["HeapAlloc"] == 0 {
		b.Fatalf("no runtime.MemStats in %s", url)
	}
	return stats
}

// heapByPackage sums the profile's live heap (inuse_space) by the package of the function
// that allocated it, and returns the sums, largest first, and pprof's top functions.
func heapByPackage(b *testing.B, bin, profile string) (string, string) {
	b.Helper()
	top := func(n string) string {
		out, err := exec.Command("go", "tool", "pprof", "-top", "-sample_index=inuse_space", "-unit=B", "-nodecount="+n, bin, profile).CombinedOutput()
		if err != nil {
			b.Fatalf("go tool pprof: %v\n%s", err, out)
		}
		return string(out)
	}
	sums := map[string]float64{}
	row := regexp.MustCompile(`^\s*(\d+)B\s+\S+%\s+\S+%\s+\d+B\s+\S+%\s+(\S+)`)
	for l := range strings.SplitSeq(top("0"), "\n") {
		if m := row.FindStringSubmatch(l); m != nil {
			v, _ := strconv.ParseFloat(m[1], 64)
			sums[packageOf(m[2])] += v / (1 << 20)
		}
	}
	names := make([]string, 0, len(sums))
	for k := range sums {
		names = append(names, k)
	}
	slices.SortFunc(names, func(x, y string) int {
		switch {
		case sums[x] > sums[y]:
			return -1
		case sums[x] < sums[y]:
			return 1
		}
		return strings.Compare(x, y)
	})
	var parts []string
	for _, k := range names {
		parts = append(parts, fmt.Sprintf("%s %.2f", k, sums[k]))
	}
	return strings.Join(parts, ", "), top("15")
}

// packageOf is the module or standard package a function belongs to, at the depth that says
// whose it is: k8s.io/client-go, github.com/prometheus/client_golang, lifeboat's own
// packages, or the standard library's top package.
func packageOf(fn string) string {
	path := fn
	if i := strings.LastIndex(fn, "/"); i >= 0 {
		if j := strings.Index(fn[i:], "."); j >= 0 {
			path = fn[:i+j]
		}
	} else if j := strings.Index(fn, "."); j >= 0 {
		path = fn[:j]
	}
	parts := strings.Split(path, "/")
	switch {
	case parts[0] == "lifeboat.dev" && len(parts) >= 4:
		return strings.Join(parts[:4], "/")
	case strings.Contains(parts[0], ".") && len(parts) >= 3 && (parts[0] == "github.com" || parts[0] == "golang.org" || parts[0] == "google.golang.org" && len(parts) >= 2):
		return strings.Join(parts[:3], "/")
	case strings.Contains(parts[0], ".") && len(parts) >= 2:
		return strings.Join(parts[:2], "/")
	}
	return parts[0]
}
