// SPDX-License-Identifier: Apache-2.0

package config

// validateInstanceStatus checks the settings of the DescribeInstanceStatus poll: a controller
// feature, whose Unhealthy marks only follow its drains.
func (l *Loaded) validateInstanceStatus(mode Mode) (problems []string) {
	c := l.Config
	if c.SetImpairedInstanceUnhealthy && !c.EnableInstanceStatusDraining {
		problems = append(problems, "SET_IMPAIRED_INSTANCE_UNHEALTHY=true needs ENABLE_INSTANCE_STATUS_DRAINING=true: only the drains of impaired instances mark them Unhealthy")
	}
	if mode == ModeAgent && c.EnableInstanceStatusDraining {
		l.Warnings = append(l.Warnings, "ENABLE_INSTANCE_STATUS_DRAINING has no effect in agent mode: the controller polls DescribeInstanceStatus for the whole cluster")
	}
	return problems
}
