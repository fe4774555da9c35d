// SPDX-License-Identifier: Apache-2.0

package config

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// Node repair policy actions: what a repair does once its condition has held its status for
// its wait.
const (
	// PolicyReplace drains the node and hands its instance back (NODE_REPAIR_ACTION).
	PolicyReplace = "replace"
	// PolicyReboot drains the node and reboots its instance (RebootInstances); a node still
	// unhealthy NODE_REPAIR_REBOOT_WAIT after its reboot is replaced.
	PolicyReboot = "reboot"
	// PolicyNone never repairs for the condition: it is not counted unhealthy either.
	PolicyNone = "none"
)

// policyActions are the actions a policy may name.
var policyActions = []string{PolicyReplace, PolicyReboot, PolicyNone}

// RepairPolicy is one policy of NODE_REPAIR_POLICIES: a node whose condition Condition has
// had Status (and, when Reason is set, a reason it matches) for Wait is repaired by Action.
type RepairPolicy struct {
	Condition string
	Status    string // True, False or Unknown
	// Reason, when set, is a regular expression (RE2) the condition's whole reason must match.
	Reason string
	Wait   time.Duration
	Action string // PolicyReplace, PolicyReboot or PolicyNone

	reason *regexp.Regexp
}

func (p RepairPolicy) String() string {
	s := p.Condition + "=" + p.Status
	if p.Reason != "" {
		s += " reason ~ " + p.Reason
	}
	if p.Action == PolicyNone {
		return s + ": none"
	}
	return fmt.Sprintf("%s: %s after %s", s, p.Action, p.Wait)
}

// Matches reports whether a condition of this type, status and reason falls under p.
func (p RepairPolicy) Matches(typ, status, reason string) bool {
	return p.Condition == typ && p.Status == status && (p.reason == nil || p.reason.MatchString(reason))
}

// RepairPolicies are the effective policies, the first that matches a condition deciding.
type RepairPolicies []RepairPolicy

// For is the policy of a condition of this type, status and reason, and its rank (lower
// first); ok is false when none matches.
func (ps RepairPolicies) For(typ, status, reason string) (p RepairPolicy, rank int, ok bool) {
	for i, p := range ps {
		if p.Matches(typ, status, reason) {
			return p, i, true
		}
	}
	return RepairPolicy{}, 0, false
}

// Acts reports whether some policy that repairs may match a condition of this type and
// status, whatever its reason (the reason may change while the status holds).
func (ps RepairPolicies) Acts(typ, status string) bool {
	return slices.ContainsFunc(ps, func(p RepairPolicy) bool { return p.Action != PolicyNone && p.Condition == typ && p.Status == status })
}

// Reboots reports whether some policy reboots (ec2:RebootInstances is then needed).
func (ps RepairPolicies) Reboots() bool {
	return slices.ContainsFunc(ps, func(p RepairPolicy) bool { return p.Action == PolicyReboot })
}

// DefaultRepairPolicies follow EKS's documented node auto repair: the EKS node monitoring
// agent's accelerated hardware after 10 minutes, its other conditions after 30; the kubelet's
// Ready False or Unknown after 30, as Karpenter's defaults; never for DiskPressure or
// MemoryPressure, which the kubelet relieves itself by evicting pods.
var DefaultRepairPolicies = RepairPolicies{
	policy("AcceleratedHardwareReady", "False", 10*time.Minute, PolicyReplace),
	policy("ContainerRuntimeReady", "False", 30*time.Minute, PolicyReplace),
	policy("KernelReady", "False", 30*time.Minute, PolicyReplace),
	policy("NetworkingReady", "False", 30*time.Minute, PolicyReplace),
	policy("StorageReady", "False", 30*time.Minute, PolicyReplace),
	policy("Ready", "False", 30*time.Minute, PolicyReplace),
	policy("Ready", "Unknown", 30*time.Minute, PolicyReplace),
	policy("DiskPressure", "True", 0, PolicyNone),
	policy("MemoryPressure", "True", 0, PolicyNone),
}

func policy(condition, status string, wait time.Duration, action string) RepairPolicy {
	return RepairPolicy{Condition: condition, Status: status, Wait: wait, Action: action}
}

// RepairPolicies are the effective policies: NODE_REPAIR_POLICIES first, then the base
// table, which is NODE_REPAIR_CONDITIONS (its short form: each condition replaced after its
// duration) when set, else DefaultRepairPolicies.
func (c *Config) RepairPolicies() RepairPolicies {
	base := DefaultRepairPolicies
	if len(c.NodeRepairConditions) > 0 {
		base = make(RepairPolicies, 0, len(c.NodeRepairConditions))
		for _, r := range c.NodeRepairConditions {
			base = append(base, policy(r.Type, r.Status, r.For, PolicyReplace))
		}
	}
	return append(slices.Clone(c.NodeRepairPolicies), base...)
}

// maxRepairPolicies bounds NODE_REPAIR_POLICIES.
const maxRepairPolicies = 64

// repairPoliciesValue parses NODE_REPAIR_POLICIES: a YAML or JSON list of
// {condition, status, reason, wait, action}.
type repairPoliciesValue struct{ p *RepairPolicies }

// policyEntry is one policy as written.
type policyEntry struct {
	Condition string       `json:"condition"`
	Status    statusString `json:"status"`
	Reason    string       `json:"reason,omitempty"`
	Wait      string       `json:"wait,omitempty"`
	Action    string       `json:"action"`
}

func (v repairPoliciesValue) Set(raw string) error {
	if strings.TrimSpace(raw) == "" {
		*v.p = nil
		return nil
	}
	var entries []policyEntry
	if err := yaml.UnmarshalStrict([]byte(raw), &entries); err != nil {
		return fmt.Errorf("not a YAML or JSON list of {condition, status, reason, wait, action}: %v", err)
	}
	if len(entries) > maxRepairPolicies {
		return fmt.Errorf("%d policies, more than %d", len(entries), maxRepairPolicies)
	}
	out := make(RepairPolicies, 0, len(entries))
	for i, e := range entries {
		p, err := parsePolicy(e)
		if err != nil {
			return fmt.Errorf("policy %d (%s): %w", i+1, e.Condition, err)
		}
		if slices.ContainsFunc(out, func(o RepairPolicy) bool {
			return o.Condition == p.Condition && o.Status == p.Status && o.Reason == p.Reason
		}) {
			return fmt.Errorf("policy %d: %s=%s with reason %q is listed twice", i+1, p.Condition, p.Status, p.Reason)
		}
		out = append(out, p)
	}
	*v.p = out
	return nil
}

// statusString is a condition status as written: YAML reads an unquoted False or True as a
// boolean, which means the status of that name.
type statusString string

func (s *statusString) UnmarshalJSON(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	switch v := v.(type) {
	case bool:
		*s = statusString(strings.ToUpper(fmt.Sprint(v)[:1]) + fmt.Sprint(v)[1:])
	case string:
		*s = statusString(v)
	default:
		return fmt.Errorf("status %s is not True, False or Unknown", b)
	}
	return nil
}

func parsePolicy(e policyEntry) (RepairPolicy, error) {
	p := RepairPolicy{Condition: strings.TrimSpace(e.Condition), Status: strings.TrimSpace(string(e.Status)), Reason: e.Reason, Action: strings.TrimSpace(e.Action)}
	switch {
	case p.Condition == "" || len(p.Condition) > 316 || strings.ContainsAny(p.Condition, " =:,"):
		return p, fmt.Errorf("condition %q is empty or not a condition type", p.Condition)
	case !slices.Contains([]string{"True", "False", "Unknown"}, p.Status):
		return p, fmt.Errorf("status %q: must be True, False or Unknown", p.Status)
	case !slices.Contains(policyActions, p.Action):
		return p, fmt.Errorf("action %q: must be one of %s", p.Action, strings.Join(policyActions, ", "))
	case len(p.Reason) > 1024:
		return p, fmt.Errorf("reason: a pattern of %d characters, more than 1024", len(p.Reason))
	}
	if p.Reason != "" {
		re, err := regexp.Compile("^(?:" + p.Reason + ")$")
		if err != nil {
			return p, fmt.Errorf("reason %q is not a regular expression: %v", p.Reason, err)
		}
		p.reason = re
	}
	if p.Action == PolicyNone {
		return p, nil
	}
	d, err := time.ParseDuration(strings.TrimSpace(e.Wait))
	switch {
	case err != nil:
		return p, fmt.Errorf("wait %q is not a duration (e.g. 30m)", e.Wait)
	case d < 0 || d > 7*24*time.Hour:
		return p, fmt.Errorf("wait %s: must be 0s to 168h", d)
	}
	p.Wait = d
	return p, nil
}

func (v repairPoliciesValue) String() string {
	if len(*v.p) == 0 {
		return ""
	}
	entries := make([]policyEntry, len(*v.p))
	for i, p := range *v.p {
		entries[i] = policyEntry{Condition: p.Condition, Status: statusString(p.Status), Reason: p.Reason, Action: p.Action}
		if p.Action != PolicyNone {
			entries[i].Wait = p.Wait.String()
		}
	}
	b, _ := json.Marshal(entries)
	return string(b)
}

// selectorValue is a label selector, as kubectl -l takes it; empty selects everything.
type selectorValue struct{ p *string }

func (v selectorValue) Set(raw string) error {
	raw = strings.TrimSpace(raw)
	if _, err := labels.Parse(raw); err != nil {
		return fmt.Errorf("not a label selector (e.g. team=ml,node.kubernetes.io/instance-type in (p5.48xlarge)): %v", err)
	}
	*v.p = raw
	return nil
}

func (v selectorValue) String() string { return *v.p }

// RepairSelector selects the nodes node repair applies to (NODE_REPAIR_NODE_SELECTOR).
func (c *Config) RepairSelector() labels.Selector {
	s, err := labels.Parse(c.NodeRepairNodeSelector)
	if err != nil { // checked when set
		return labels.Nothing()
	}
	return s
}
