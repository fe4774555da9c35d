// SPDX-License-Identifier: Apache-2.0

package config

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"
)

func TestRepairConditions(t *testing.T) {
	for _, tc := range []struct {
		raw, want, err string
	}{
		{raw: "", want: ""},
		{raw: "KernelReady=False:30m", want: "KernelReady=False:30m0s"},
		{raw: " Ready=Unknown:5m , GPU=True:0s ,", want: "Ready=Unknown:5m0s,GPU=True:0s"},
		{raw: "KernelReady=False", err: "not Type=Status:Duration"},
		{raw: "KernelReady:30m", err: "not Type=Status:Duration"},
		{raw: "KernelReady=Bad:30m", err: "True, False or Unknown"},
		{raw: "KernelReady=False:soon", err: "not a duration"},
		{raw: "KernelReady=False:-1m", err: "0s to 168h"},
		{raw: "=False:1m", err: "not a name"},
		{raw: "KernelReady=False:1m,KernelReady=False:2m", err: "listed twice"},
	} {
		var got []RepairCondition
		err := repairConditionsValue{&got}.Set(tc.raw)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: error %v, want one saying %q", tc.raw, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("%q: %v", tc.raw, err)
		case tc.err == "" && repairConditionsValue{&got}.String() != tc.want:
			t.Errorf("%q: %q, want %q", tc.raw, repairConditionsValue{&got}.String(), tc.want)
		}
	}
}

// The effective policies: NODE_REPAIR_POLICIES first, then NODE_REPAIR_CONDITIONS as their
// short form, else the defaults; the first that matches a condition decides.
func TestRepairPolicies(t *testing.T) {
	c := &Config{}
	got := c.RepairPolicies()
	if len(got) != 9 || got[0].String() != "AcceleratedHardwareReady=False: replace after 10m0s" || got[6].String() != "Ready=Unknown: replace after 30m0s" ||
		got[7].String() != "DiskPressure=True: none" {
		t.Errorf("defaults %v", got)
	}
	if p, _, ok := got.For("MemoryPressure", "True", "KubeletHasInsufficientMemory"); !ok || p.Action != PolicyNone {
		t.Errorf("MemoryPressure: %v %v, want never repaired", p, ok)
	}
	if !got.Acts("Ready", "Unknown") || got.Acts("DiskPressure", "True") || got.Acts("KernelReady", "True") {
		t.Error("Acts: Ready=Unknown is repaired, DiskPressure=True and KernelReady=True are not")
	}
	c.NodeRepairConditions = []RepairCondition{{Type: "KernelReady", Status: "False", For: time.Minute}}
	if err := (repairPoliciesValue{&c.NodeRepairPolicies}).Set(`
- condition: KernelReady
  status: False
  reason: "Conntrack.*"
  action: none
- {condition: KernelReady, status: "False", reason: "Oops|Panic", wait: 5s, action: replace}
`); err != nil {
		t.Fatal(err)
	}
	got = c.RepairPolicies()
	for _, tc := range []struct {
		reason, want string
		rank         int
	}{
		{"ConntrackExceeded", "none", 0},
		{"Oops", "replace after 5s", 1},
		{"Oopsie", "replace after 1m0s", 2}, // the whole reason must match
		{"", "replace after 1m0s", 2},
	} {
		p, rank, ok := got.For("KernelReady", "False", tc.reason)
		if !ok || rank != tc.rank || !strings.HasSuffix(p.String(), tc.want) {
			t.Errorf("reason %q: %v rank %d (%v), want %q rank %d", tc.reason, p, rank, ok, tc.want, tc.rank)
		}
	}
	if _, _, ok := got.For("NetworkingReady", "False", ""); ok {
		t.Error("NODE_REPAIR_CONDITIONS replaces the default policies, but a default still matched")
	}
}

func TestRepairPoliciesParse(t *testing.T) {
	for _, tc := range []struct{ raw, err string }{
		{raw: ""},
		{raw: `[{"condition":"GPU","status":"Unknown","wait":"10m","action":"replace"}]`},
		{raw: `[{condition: GPU, status: True, action: none}]`},
		{raw: `{condition: GPU}`, err: "not a YAML or JSON list"},
		{raw: `[{condition: GPU, status: "False", wait: 10m, action: replace, extra: 1}]`, err: "not a YAML or JSON list"},
		{raw: `[{condition: "", status: "False", wait: 10m, action: replace}]`, err: "not a condition type"},
		{raw: `[{condition: GPU, status: Broken, wait: 10m, action: replace}]`, err: "must be True, False or Unknown"},
		{raw: `[{condition: GPU, status: "False", wait: 10m, action: explode}]`, err: "must be one of replace, reboot, none"},
		{raw: `[{condition: GPU, status: "False", action: replace}]`, err: "is not a duration"},
		{raw: `[{condition: GPU, status: "False", wait: 200h, action: replace}]`, err: "0s to 168h"},
		{raw: `[{condition: GPU, status: "False", reason: "(", wait: 1m, action: replace}]`, err: "not a regular expression"},
		{raw: `[{condition: GPU, status: "False", wait: 1m, action: replace}, {condition: GPU, status: "False", wait: 2m, action: replace}]`, err: "listed twice"},
	} {
		var got RepairPolicies
		err := repairPoliciesValue{&got}.Set(tc.raw)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%q: %v", tc.raw, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: error %v, want one saying %q", tc.raw, err, tc.err)
		}
	}
	var got RepairPolicies
	raw := `[{"condition":"GPU","status":"False","reason":"X.*","wait":"10m0s","action":"replace"}]`
	if err := (repairPoliciesValue{&got}).Set(raw); err != nil || (repairPoliciesValue{&got}).String() != raw {
		t.Errorf("round trip: %q (%v)", repairPoliciesValue{&got}.String(), err)
	}
}

func TestNodeRepairValidation(t *testing.T) {
	l := &Loaded{Config: &Config{EnableNodeRepair: true, NodeRepairConditions: []RepairCondition{{Type: "Ready", Status: "Unknown", For: time.Second}}}}
	if p := validateNodeRepair(l, ModeController); len(p) != 1 {
		t.Errorf("problems %v, want one about Ready's short duration", p)
	}
	l = &Loaded{Config: &Config{EnableNodeRepair: true, NodeRepairConditions: []RepairCondition{{Type: "DiskPressure", Status: "True", For: time.Hour}}}}
	if p := validateNodeRepair(l, ModeController); len(p) != 0 || len(l.Warnings) != 1 || !strings.Contains(l.Warnings[0], "DiskPressure") {
		t.Errorf("problems %v, warnings %v; want one warning about repairing for DiskPressure", p, l.Warnings)
	}
	l = &Loaded{Config: &Config{EnableNodeRepair: true}}
	if p := validateNodeRepair(l, ModeAgent); len(p) != 0 || len(l.Warnings) != 1 {
		t.Errorf("agent mode: problems %v, warnings %v; want one warning", p, l.Warnings)
	}
}

func TestEKSAutoRepaired(t *testing.T) {
	c := &Config{NodeRepairEKSAutoRepaired: " ng-1, ng-2"}
	if !c.EKSAutoRepaired("ng-2") || c.EKSAutoRepaired("ng-3") || c.EKSAutoRepaired("") {
		t.Error("a listed group is not, or another is, auto repaired")
	}
	if !(&Config{NodeRepairEKSAutoRepaired: "*"}).EKSAutoRepaired("any") {
		t.Error("* does not name every group")
	}
}

func TestRepairSelector(t *testing.T) {
	c := &Config{}
	if err := (selectorValue{&c.NodeRepairNodeSelector}).Set("team=ml,gpu in (a,b)"); err != nil {
		t.Fatal(err)
	}
	sel := c.RepairSelector()
	if !sel.Matches(labels.Set{"team": "ml", "gpu": "a"}) || sel.Matches(labels.Set{"team": "ml"}) {
		t.Errorf("selector %v", sel)
	}
	if !(&Config{}).RepairSelector().Matches(labels.Set{}) {
		t.Error("an empty selector does not select every node")
	}
	if err := (selectorValue{&c.NodeRepairNodeSelector}).Set("team in (ml"); err == nil || !strings.Contains(err.Error(), "not a label selector") {
		t.Errorf("a bad selector: %v", err)
	}
}
