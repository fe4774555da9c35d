// SPDX-License-Identifier: Apache-2.0

package config

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// RepairCondition is one entry of NODE_REPAIR_CONDITIONS, the short form of a policy: a node
// whose condition Type has had Status for at least For (counted from the condition's
// lastTransitionTime) is replaced.
type RepairCondition struct {
	Type   string
	Status string // True, False or Unknown
	For    time.Duration
}

func (r RepairCondition) String() string { return fmt.Sprintf("%s=%s:%s", r.Type, r.Status, r.For) }

// Node repair actions (NODE_REPAIR_ACTION): what is asked of AWS once a repaired node is
// drained.
const (
	RepairMarkUnhealthy = "mark-unhealthy"
	RepairTerminate     = "terminate"
)

// repairConditionsValue parses Type=Status:Duration[,...]; empty keeps the defaults.
type repairConditionsValue struct{ p *[]RepairCondition }

// maxRepairConditions bounds NODE_REPAIR_CONDITIONS; a node has a few dozen conditions at most.
const maxRepairConditions = 32

func (v repairConditionsValue) Set(raw string) error {
	var out []RepairCondition
	for part := range strings.SplitSeq(raw, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		r, err := parseRepairCondition(part)
		if err != nil {
			return err
		}
		if slices.ContainsFunc(out, func(o RepairCondition) bool { return o.Type == r.Type && o.Status == r.Status }) {
			return fmt.Errorf("%s=%s is listed twice", r.Type, r.Status)
		}
		out = append(out, r)
	}
	if len(out) > maxRepairConditions {
		return fmt.Errorf("%d conditions, more than %d", len(out), maxRepairConditions)
	}
	*v.p = out
	return nil
}

func parseRepairCondition(s string) (RepairCondition, error) {
	typ, rest, ok := strings.Cut(s, "=")
	status, dur, ok2 := strings.Cut(rest, ":")
	if !ok || !ok2 {
		return RepairCondition{}, fmt.Errorf("%q is not Type=Status:Duration (e.g. KernelReady=False:30m)", s)
	}
	typ, status = strings.TrimSpace(typ), strings.TrimSpace(status)
	if typ == "" || len(typ) > 316 || strings.ContainsAny(typ, " =:,") {
		return RepairCondition{}, fmt.Errorf("%q: the condition type is empty or not a name", s)
	}
	if !slices.Contains([]string{"True", "False", "Unknown"}, status) {
		return RepairCondition{}, fmt.Errorf("%q: the status must be True, False or Unknown", s)
	}
	d, err := time.ParseDuration(strings.TrimSpace(dur))
	switch {
	case err != nil:
		return RepairCondition{}, fmt.Errorf("%q: %q is not a duration (e.g. 30m)", s, dur)
	case d < 0 || d > 7*24*time.Hour:
		return RepairCondition{}, fmt.Errorf("%q: the duration must be 0s to 168h", s)
	}
	return RepairCondition{Type: typ, Status: status, For: d}, nil
}

func (v repairConditionsValue) String() string {
	parts := make([]string, len(*v.p))
	for i, r := range *v.p {
		parts[i] = r.String()
	}
	return strings.Join(parts, ",")
}

// validateNodeRepair checks the node repair settings: a controller feature.
func validateNodeRepair(l *Loaded, mode Mode) (problems []string) {
	c := l.Config
	if mode == ModeAgent && c.EnableNodeRepair {
		l.Warnings = append(l.Warnings, "ENABLE_NODE_REPAIR has no effect in agent mode: the controller watches the cluster's Node conditions")
	}
	if !c.EnableNodeRepair {
		return nil
	}
	if c.NodeRepairEKSLookup && c.ClusterName == "" {
		problems = append(problems, "NODE_REPAIR_EKS_LOOKUP asks EKS about a node's managed node group in the cluster CLUSTER_NAME names, and CLUSTER_NAME is unset: set it to the EKS cluster's name, or turn NODE_REPAIR_EKS_LOOKUP off")
	}
	for _, p := range c.RepairPolicies() {
		if p.Condition == "Ready" && p.Action != PolicyNone && p.Wait < time.Minute {
			problems = append(problems, fmt.Sprintf("NODE_REPAIR_POLICIES or NODE_REPAIR_CONDITIONS: %s repairs a node after less than a minute of a Ready condition; give it at least 1m", p))
		}
		if (p.Condition == "DiskPressure" || p.Condition == "MemoryPressure" || p.Condition == "PIDPressure") && p.Action != PolicyNone {
			l.Warnings = append(l.Warnings, fmt.Sprintf("node repair policy %s: the kubelet relieves %s itself by evicting pods; repairing for it replaces nodes that are only busy", p, p.Condition))
		}
	}
	return problems
}

// EKSAutoRepaired reports whether NODE_REPAIR_EKS_AUTO_REPAIRED_NODEGROUPS names the managed
// node group (or is "*").
func (c *Config) EKSAutoRepaired(nodegroup string) bool {
	if nodegroup == "" {
		return false
	}
	for g := range strings.SplitSeq(c.NodeRepairEKSAutoRepaired, ",") {
		if g = strings.TrimSpace(g); g == "*" || g == nodegroup {
			return true
		}
	}
	return false
}
