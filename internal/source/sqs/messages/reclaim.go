// SPDX-License-Identifier: Apache-2.0

package messages

import (
	"encoding/json"
	"fmt"
	"time"

	"lifeboat.dev/lifeboat/internal/notice"
)

// Two-minute reclaims: EC2 Spot interruption warnings and interruptible Capacity Reservation
// interruption warnings. Both name one instance and its action.
const (
	kindSpot     = "spot interruption"
	kindCapacity = "capacity reservation interruption"
)

// spotWarning is how long EC2 gives between the interruption warning and the interruption.
const spotWarning = 2 * time.Minute

// parseSpot: the id leaves out every time, and matches the id the instance-metadata source
// builds for the same interruption, so the two coalesce.
func parseSpot(body string, e envelope, at time.Time) (Result, error) {
	return parseReclaim(body, e, at, kindSpot, notice.SpotInterruption, "Spot interruption")
}

// parseCapacityReservation reads EC2 reclaiming an instance of an interruptible capacity
// reservation: a Spot warning's detail, a kind of its own, and the time the instance is
// terminated (detail.instance-termination-time) where the event states it. Without it, or when
// it cannot be read, the two minutes of a Spot warning stand in (with a warning).
func parseCapacityReservation(body string, e envelope, at time.Time) (Result, error) {
	r, err := parseReclaim(body, e, at, kindCapacity, notice.CapacityReservationInterruption, "Capacity reservation interruption")
	if err != nil {
		return r, err
	}
	var d struct {
		TerminationTime *string `json:"instance-termination-time"`
	}
	if json.Unmarshal(e.Detail, &d) != nil || d.TerminationTime == nil {
		return r, nil
	}
	end, err := time.Parse(time.RFC3339, *d.TerminationTime)
	if err != nil {
		r.Warnings = append(r.Warnings, Warning{Problem: problemEndUnreadable,
			Detail: fmt.Sprintf("capacity reservation interruption %s: detail.instance-termination-time %q is not RFC 3339: the deadline is the event's time plus two minutes", e.ID, clip(*d.TerminationTime))})
		return r, nil
	}
	n := &r.Notices[0]
	n.Deadline, n.StartTime = end, end
	n.Description = fmt.Sprintf("Capacity reservation interruption: the instance will %s at %s", n.Action, stamp(end))
	return r, nil
}

// parseReclaim reads a two-minute warning: detail instance-id and instance-action.
func parseReclaim(body string, e envelope, at time.Time, kind string, k notice.Kind, what string) (Result, error) {
	var d struct {
		InstanceID string `json:"instance-id"`
		Action     string `json:"instance-action"`
	}
	if err := json.Unmarshal(e.Detail, &d); err != nil {
		return Result{}, detailError(kind, err, body)
	}
	if err := checkInstance(kind, "detail.instance-id", d.InstanceID, body); err != nil {
		return Result{}, err
	}
	switch d.Action {
	case "terminate", "stop", "hibernate":
	default:
		return Result{}, fmt.Errorf("%s: detail.instance-action %q is not terminate, stop or hibernate (body %q)", kind, clip(d.Action), clip(body))
	}
	deadline := at.Add(spotWarning)
	return one(notice.Notice{
		ID: notice.ID(k, d.InstanceID, d.Action), Kind: k, Source: notice.SourceQueue,
		InstanceID: d.InstanceID, Deadline: deadline, StartTime: deadline, Action: d.Action,
		Description: fmt.Sprintf("%s: the instance will %s at %s", what, d.Action, stamp(deadline)),
	}), nil
}

var _ = register(
	eventKind{source: "aws.ec2", detailTypes: []string{"EC2 Spot Instance Interruption Warning"}, name: kindSpot, parse: parseSpot},
	eventKind{source: "aws.ec2", detailTypes: []string{"EC2 Capacity Reservation Instance Interruption Warning",
		// The spelling of one version of the EC2 user guide's page.
		"EC2 Interruptible Capacity Reservation Instance Interruption Warning"}, name: kindCapacity, parse: parseCapacityReservation},
)
