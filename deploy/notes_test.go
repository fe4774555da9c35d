// SPDX-License-Identifier: Apache-2.0

package deploy_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNotesRebootGrant: with a node repair policy whose action is reboot (a YAML or a JSON
// list), the install notes say that ec2:RebootInstances is needed and which input of the AWS
// set-ups grants it; without one, or without node repair, they do not.
func TestNotesRebootGrant(t *testing.T) {
	h := newHelm(t)
	const grant = "reboot_repaired_instances"
	repair := []string{"--set", "controller.enabled=true", "--set", "config.queueUrl=https://sqs.us-east-1.amazonaws.com/1/q", "--set", "config.enableNodeRepair=true"}
	cases := []struct {
		name     string
		policies string
		repair   bool
		want     bool
	}{
		{"a YAML policy that reboots", "- condition: AcceleratedHardwareReady\n  status: \"False\"\n  wait: 5m\n  action: reboot\n", true, true},
		{"a JSON policy that reboots after one that does not", `[{"condition":"KernelReady","status":"False","action":"none"},{"condition":"Ready","status":"Unknown","wait":"30m","action":"reboot"}]`, true, true},
		{"policies that only replace", "- condition: KernelReady\n  status: \"False\"\n  wait: 30m\n  action: replace\n", true, false},
		{"the default policies", "", true, false},
		{"a reboot policy with node repair off", "- condition: Ready\n  status: \"False\"\n  wait: 30m\n  action: reboot\n", false, false},
		{"policies that do not parse", "- condition: [", true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{}, repair...)
			if !c.repair {
				args[len(args)-1] = "config.enableNodeRepair=false"
			}
			// --set-file: the list as the string the chart takes, commas and all.
			file := filepath.Join(t.TempDir(), "policies")
			if err := os.WriteFile(file, []byte(c.policies), 0o600); err != nil {
				t.Fatal(err)
			}
			args = append(args, "--set-file", "config.nodeRepairPolicies="+file)
			n := notes(t, h, args...)
			if got := strings.Contains(n, "ec2:RebootInstances") && strings.Contains(n, grant); got != c.want {
				t.Errorf("the notes mention ec2:RebootInstances and %s: %v, want %v\n%s", grant, got, c.want, n)
			}
			if c.repair && !strings.Contains(n, "Node repair:") {
				t.Errorf("the notes do not say node repair is on:\n%s", n)
			}
		})
	}
}
