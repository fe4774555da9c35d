// SPDX-License-Identifier: Apache-2.0

package status

import (
	"fmt"
	"io"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/source/nodecondition"
)

// repairBreaker is the node repair breaker as the controller would read it from these nodes
// (ENABLE_NODE_REPAIR; nil when off, or when only some nodes were read).
func repairBreaker(cfg *config.Config, nodes []*corev1.Node, named bool) *nodecondition.Breaker {
	if cfg == nil || !cfg.EnableNodeRepair || named {
		return nil
	}
	nodes = slices.DeleteFunc(slices.Clone(nodes), func(n *corev1.Node) bool { return !nodecondition.Selected(n, cfg.RepairSelector()) })
	started := nodecondition.RecordedStarts(nodes, time.Now())
	b := nodecondition.Assess(nodes, cfg.RepairPolicies(), nodecondition.LimitsOf(cfg), nodecondition.Tally{Started: len(started)})
	b.Held = nodecondition.HeldBy(nodes)
	return &b
}

// printRepairs writes the breaker's line.
func printRepairs(w io.Writer, b *nodecondition.Breaker) {
	if b == nil {
		return
	}
	state := "closed: repairs start when due"
	if b.Open {
		state = "open: no new repair starts (" + b.Reason + ")"
	}
	fmt.Fprintf(w, "Node repair breaker %s; %d of %d nodes unhealthy, %d repairs running, %d started in the last hour (as recorded on the nodes)\n",
		state, b.Unhealthy, b.Nodes, b.Running, b.Started)
	for _, h := range b.Held {
		fmt.Fprintf(w, "Node repair of %s held: %s\n", h.Node, h.Reason)
	}
}
