// SPDX-License-Identifier: Apache-2.0

package preflight

import (
	"strings"
	"testing"

	"lifeboat.dev/lifeboat/test/sandbox/fakeaws"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// With ABANDON_LIFECYCLE_ACTION_ON_INCOMPLETE_DRAIN, preflight says which groups an incomplete
// drain ABANDONs in (their policy retains abandoned instances) and which it CONTINUEs in, and
// checks the termination of a retained instance without terminating anything.
func TestCheckRetention(t *testing.T) {
	ctx := testContext(t)
	tests := []struct {
		name            string
		retain          map[string]bool // group -> TerminateHookAbandon retain (absent: no policy)
		deny            []string
		describe, term  Status
		mention         string // in the describe row's detail, or its fix when not ok
		terminateDenied bool
	}{
		{"one group retains", map[string]bool{"workers": true, "batch": false}, nil, StatusOK, StatusOK, "ABANDON (then drained and terminated by Lifeboat) in 1 group(s) that retain abandoned instances: workers; CONTINUE in 2 other(s)", false},
		{"none retains", map[string]bool{"batch": false}, nil, StatusWarn, StatusOK, "TerminateHookAbandon=retain", false},
		{"groups unreadable", map[string]bool{"workers": true}, []string{"DescribeAutoScalingGroups"}, StatusWarn, StatusOK, "allow autoscaling:DescribeAutoScalingGroups", false},
		{"termination denied", map[string]bool{"workers": true}, []string{"TerminateInstanceInAutoScalingGroup"}, StatusOK, StatusWarn, "workers", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := sandboxtest.FakeAWS(t, "")
			fake.AddInstance(fakeaws.Instance{ID: "i-0000000000000001", AutoScalingGroup: "workers"})
			fake.AddInstance(fakeaws.Instance{ID: "i-0000000000000002", AutoScalingGroup: "plain"})
			for g, r := range tt.retain {
				fake.SetRetainOnAbandon(g, r)
			}
			for _, a := range tt.deny {
				fake.Deny("autoscaling", a)
			}
			rows := CheckRetention(ctx, NewAWS(sandboxtest.AWSConfig(fake.URL())).AutoScaling)
			got := rowsByCheck(rows)
			d, ok := got["autoscaling:DescribeAutoScalingGroups"]
			text := d.Detail
			if d.Status != StatusOK {
				text = d.Fix
			}
			if !ok || d.Status != tt.describe || !strings.Contains(text, tt.mention) {
				t.Errorf("describe row %+v, want %s mentioning %q", d, tt.describe, tt.mention)
			}
			term := got["autoscaling:TerminateInstanceInAutoScalingGroup"]
			if term.Status != tt.term || (tt.terminateDenied && !strings.Contains(term.Fix, "allow autoscaling:TerminateInstanceInAutoScalingGroup")) {
				t.Errorf("terminate row %+v, want %s", term, tt.term)
			}
			for _, id := range []string{"i-0000000000000001", "i-0000000000000002"} {
				if state, _, _ := fake.InstanceState(id); state != "running" {
					t.Errorf("the probe left instance %s %s", id, state)
				}
			}
		})
	}
}
