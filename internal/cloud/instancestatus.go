// SPDX-License-Identifier: Apache-2.0

package cloud

import (
	"fmt"
	"time"
)

// MaxStatusInstances is how many instance ids EC2 accepts in one DescribeInstanceStatus
// request.
const MaxStatusInstances = 100

// InstanceStatus is what DescribeInstanceStatus says of one running instance.
type InstanceStatus struct {
	InstanceID string
	// Instance, System and EBS are the summaries of the instance, system and attached-EBS
	// status checks: ok, impaired, insufficient-data, not-applicable or initializing.
	Instance, System, EBS string
	// Failed names the checks whose detail is failed ("instance reachability", "ebs
	// reachability", ...).
	Failed []string
	// ImpairedSince is the earliest time a failed check says it began failing; zero when none
	// says.
	ImpairedSince time.Time
	// Events are the scheduled events EC2 lists for the instance.
	Events []ScheduledEvent
}

// Impaired reports whether a status check of the instance fails: the instance or system
// status is impaired, or the attached EBS status is impaired or one of its checks failed.
func (s InstanceStatus) Impaired() bool {
	return s.Instance == "impaired" || s.System == "impaired" || s.EBS == "impaired" || len(s.Failed) > 0
}

// ScheduledEvent is one scheduled event of an instance, as DescribeInstanceStatus lists it.
type ScheduledEvent struct {
	ID          string // InstanceEventId, the id instance metadata gives the same event
	Code        string // instance-reboot, system-reboot, system-maintenance, instance-retirement, instance-stop
	Description string // "[Completed] ..." or "[Canceled] ..." once the event is over
	NotBefore   time.Time
	NotAfter    time.Time
}

// UnknownInstancesError is EC2 refusing a DescribeInstanceStatus request because some of its
// ids name no instance (terminated long ago): the request can be made again without them.
type UnknownInstancesError struct {
	IDs []string
	Err error
}

func (e *UnknownInstancesError) Error() string {
	return fmt.Sprintf("EC2 knows no instance %s: %v", IDList(e.IDs), e.Err)
}

func (e *UnknownInstancesError) Unwrap() error { return e.Err }
