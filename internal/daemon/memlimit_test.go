// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

func TestSoftMemoryLimit(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1)) // restore the runtime's limit
	dir := t.TempDir()
	write := func(content string) string {
		path := filepath.Join(dir, "memory.max")
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	noEnv := func(string) (string, bool) { return "", false }

	got, err := softMemoryLimit(write("536870912\n"), noEnv)
	if err != nil || got != 483183820 || debug.SetMemoryLimit(-1) != got {
		t.Errorf("512 MiB limit: soft limit %d, %v; want 90%%, 483183820, set in the runtime", got, err)
	}
	if got, err := softMemoryLimit(write("max\n"), noEnv); got != 0 || err != nil {
		t.Errorf("unlimited: %d, %v; want nothing set", got, err)
	}
	if got, err := softMemoryLimit(filepath.Join(dir, "absent"), noEnv); got != 0 || err != nil {
		t.Errorf("no cgroup file: %d, %v; want nothing set", got, err)
	}
	withEnv := func(k string) (string, bool) { return "300MiB", k == "GOMEMLIMIT" }
	if got, err := softMemoryLimit(write("536870912"), withEnv); got != 0 || err != nil {
		t.Errorf("GOMEMLIMIT set: %d, %v; want it left to the operator", got, err)
	}
	if _, err := softMemoryLimit(write("lots"), noEnv); err == nil || !strings.Contains(err.Error(), `"lots"`) {
		t.Errorf("a bad limit file: %v; want an error quoting it", err)
	}
}

func TestAgentGarbageCollection(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100)) // restore the runtime's target
	noEnv := func(string) (string, bool) { return "", false }
	if got := agentGarbageCollection(noEnv); got != agentGCPercent || debug.SetGCPercent(100) != agentGCPercent {
		t.Errorf("GOGC unset: target %d; want %d, set in the runtime", got, agentGCPercent)
	}
	withEnv := func(k string) (string, bool) { return "200", k == "GOGC" }
	if got := agentGarbageCollection(withEnv); got != 0 || debug.SetGCPercent(100) != 100 {
		t.Errorf("GOGC set: target %d; want it left to the operator", got)
	}
}
