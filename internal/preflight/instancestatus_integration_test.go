// SPDX-License-Identifier: Apache-2.0

package preflight

import (
	"strings"
	"testing"

	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// The checks of the Capacity Block lookup, the DescribeInstanceStatus poll and the Unhealthy
// marks, against the fake with each action allowed and denied the way IAM denies it; none
// changes anything.
func TestInstanceStatusChecks(t *testing.T) {
	ctx := testContext(t)
	tests := []struct {
		name string
		deny [2]string
		want map[string]Status
		fix  string // of the row not ok
	}{
		{"all allowed", [2]string{}, map[string]Status{"ec2:DescribeInstances": StatusOK, "ec2:DescribeInstanceStatus": StatusOK, "autoscaling:SetInstanceHealth": StatusOK}, ""},
		{"DescribeInstances denied: Capacity Blocks only, a warning", [2]string{"ec2", "DescribeInstances"},
			map[string]Status{"ec2:DescribeInstances": StatusWarn, "ec2:DescribeInstanceStatus": StatusOK}, "Capacity Blocks"},
		{"DescribeInstanceStatus denied", [2]string{"ec2", "DescribeInstanceStatus"},
			map[string]Status{"ec2:DescribeInstanceStatus": StatusFail}, "allow ec2:DescribeInstanceStatus"},
		{"SetInstanceHealth denied: ambiguous, a warning", [2]string{"autoscaling", "SetInstanceHealth"},
			map[string]Status{"autoscaling:SetInstanceHealth": StatusWarn}, "allow autoscaling:SetInstanceHealth"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := sandboxtest.FakeAWS(t, "")
			if tt.deny[0] != "" {
				fake.Deny(tt.deny[0], tt.deny[1])
			}
			api := NewAWS(sandboxtest.AWSConfig(fake.URL()))
			got := rowsByCheck([]Row{CheckCapacityBlockLookup(ctx, api.EC2), CheckInstanceStatus(ctx, api.EC2), CheckSetInstanceHealth(ctx, api.AutoScaling)})
			for check, want := range tt.want {
				r := got[check]
				if r.Status != want || (want != StatusOK && !strings.Contains(r.Fix, tt.fix)) {
					t.Errorf("%s: %s %q (fix %q), want %s with a fix mentioning %q", check, r.Status, r.Detail, r.Fix, want, tt.fix)
				}
			}
			for _, c := range fake.Calls() {
				if c.Service == "ec2" && c.Params.Get("DryRun") != "true" {
					t.Errorf("EC2 called without DryRun: %s", c.Action)
				}
			}
		})
	}
}
