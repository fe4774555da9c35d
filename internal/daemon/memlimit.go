// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// cgroupMemoryMax is the container's memory limit under cgroup v2 ("max" when unlimited).
const cgroupMemoryMax = "/sys/fs/cgroup/memory.max"

// memoryLimitShare of the container's limit becomes the Go runtime's soft memory limit, so
// the garbage collector works harder near the limit instead of the kernel killing the pod in
// a burst; the rest is room for what the runtime does not count (stacks of the goroutines a
// burst holds, mapped binary pages).
const memoryLimitShare = 0.9

// softMemoryLimit sets the runtime's soft memory limit from the cgroup's, unless GOMEMLIMIT
// is set. It returns the limit set (0: none) and an error only for a limit file it cannot read
// as one.
func softMemoryLimit(path string, lookupEnv func(string) (string, bool)) (int64, error) {
	if v, ok := lookupEnv("GOMEMLIMIT"); ok && v != "" {
		return 0, nil // the operator's choice; the runtime has read it already
	}
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil // not in a cgroup v2 container
	}
	if err != nil {
		return 0, fmt.Errorf("container memory limit: %w", err)
	}
	s := strings.TrimSpace(string(raw))
	if s == "max" {
		return 0, nil
	}
	limit, err := strconv.ParseInt(s, 10, 64)
	if err != nil || limit <= 0 {
		return 0, fmt.Errorf("container memory limit %s: %q is not a number of bytes", path, s)
	}
	soft := int64(float64(limit) * memoryLimitShare)
	debug.SetMemoryLimit(soft)
	return soft, nil
}

// agentGCPercent is the agent's garbage collection target (GOGC) unless the operator sets
// one. An agent runs on every node and its live heap is a few MiB, mostly built at start; at
// Go's default of 100 the runtime keeps as much again free for the next collection; at 50 it
// keeps half that, for collections twice as often on a heap that small (the figures are in
// docs/benchmarks.md).
const agentGCPercent = 50

// agentGarbageCollection sets the agent's GC target unless GOGC is set. It returns the target
// set (0: none, the operator's or the runtime's).
func agentGarbageCollection(lookupEnv func(string) (string, bool)) int {
	if v, ok := lookupEnv("GOGC"); ok && v != "" {
		return 0 // the operator's choice; the runtime has read it already
	}
	debug.SetGCPercent(agentGCPercent)
	return agentGCPercent
}
