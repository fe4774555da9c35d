// SPDX-License-Identifier: Apache-2.0

package config

import (
	"strings"
	"testing"
	"time"
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
	c := &Config{}
	if got := c.RepairConditions(); len(got) != 5 || got[0].Type != "AcceleratedHardwareReady" || got[0].For != 10*time.Minute {
		t.Errorf("defaults %v", got)
	}
}

func TestNodeRepairValidation(t *testing.T) {
	l := &Loaded{Config: &Config{EnableNodeRepair: true, NodeRepairConditions: []RepairCondition{{Type: "Ready", Status: "Unknown", For: time.Second}}}}
	if p := validateNodeRepair(l, ModeController); len(p) != 1 {
		t.Errorf("problems %v, want one about Ready's short duration", p)
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
