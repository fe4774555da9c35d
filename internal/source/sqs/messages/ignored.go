// SPDX-License-Identifier: Apache-2.0

package messages

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// Messages that are well-formed and recognised but name nothing to act on are ignored: the
// consumer deletes them, logs why at Info and counts them by kind and reason (these label
// values). A message of a kind Lifeboat does not know is ignored too, and its log line names
// the EventBridge rule pattern that must have sent it (UnknownKind.Rule).
const (
	IgnoreCapacityBlockDelivered       = "capacity_block_delivered"
	IgnoreCapacityBlockExpiration      = "capacity_block_expiration" // decided by the controller, from EC2
	IgnoreCapacityReservationState     = "capacity_reservation_state"
	IgnoreCapacityReservationReclaimed = "capacity_reservation_reclaimed"
	IgnoreHealth                       = "health"
	IgnoreStateChange                  = "state_change"
	IgnoreASGTestNotification          = "asg_test_notification"
	ignoreSNS                          = "sns"
	IgnoreUnknown                      = "unknown"

	ReasonCapacityStarts       = "capacity_starts"
	ReasonStateChange          = "state_change"
	ReasonReclamationCompleted = "reclamation_completed"
	ReasonOtherService         = "other_service"
	ReasonInformational        = "informational_category"
	ReasonInstanceStays        = "instance_stays"
	ReasonNoInstance           = "no_instance"
	ReasonTestNotification     = "test_notification"
	ReasonUnknownKind          = "unknown_kind"
	// Capacity Block warnings checked against EC2 (the controller's).
	ReasonBlockExtended     = "extended"
	ReasonNotCapacityBlock  = "not_capacity_block"
	ReasonBlockNotActive    = "not_active"
	ReasonNoInstanceOfOurs  = "no_instance_of_ours"
	ReasonReservationAbsent = "reservation_not_found"
)

// IgnoredLabels are every kind and reason an ignored message is counted by.
func IgnoredLabels() [][2]string {
	return [][2]string{
		{IgnoreCapacityBlockDelivered, ReasonCapacityStarts},
		{IgnoreCapacityBlockExpiration, ReasonBlockExtended},
		{IgnoreCapacityBlockExpiration, ReasonNotCapacityBlock},
		{IgnoreCapacityBlockExpiration, ReasonBlockNotActive},
		{IgnoreCapacityBlockExpiration, ReasonReservationAbsent},
		{IgnoreCapacityBlockExpiration, ReasonNoInstanceOfOurs},
		{IgnoreCapacityReservationState, ReasonStateChange},
		{IgnoreCapacityReservationReclaimed, ReasonReclamationCompleted},
		{IgnoreHealth, ReasonOtherService},
		{IgnoreHealth, ReasonInformational},
		{IgnoreHealth, ReasonInstanceStays},
		{IgnoreHealth, ReasonNoInstance},
		{IgnoreStateChange, ReasonInstanceStays},
		{IgnoreASGTestNotification, ReasonTestNotification},
		{ignoreSNS, "subscription"},
		{IgnoreUnknown, ReasonUnknownKind},
	}
}

// UnknownKind is an EventBridge event of a source and detail-type Lifeboat does not know.
type UnknownKind struct{ Source, DetailType string }

// Rule is the EventBridge event pattern that matches the event: the rule that sent it here,
// or one broader than it (a prefix, a whole source).
func (u UnknownKind) Rule() string {
	b, _ := json.Marshal(map[string][]string{"source": {clip(u.Source)}, "detail-type": {clip(u.DetailType)}})
	return string(b)
}

func ignored(kind, reason, why string) Result {
	return Result{Ignore: true, Reason: why, IgnoredKind: kind, IgnoredReason: reason}
}

func unknownKind(source, detailType string) Result {
	u := UnknownKind{Source: source, DetailType: detailType}
	r := ignored(IgnoreUnknown, ReasonUnknownKind, fmt.Sprintf("an EventBridge event of a kind Lifeboat does not know (source %q, detail-type %q): the rule %s sent it to this queue; narrow that rule to the kinds in the docs", clip(source), clip(detailType), u.Rule()))
	r.Unknown = &u
	return r
}

// looseString reads a JSON string; any other value reads as "". For fields that are only
// logged or optional, whose shape must not refuse a message.
type looseString string

func (s *looseString) UnmarshalJSON(b []byte) error {
	var v string
	if json.Unmarshal(b, &v) == nil {
		*s = looseString(v)
	}
	return nil
}

// jsonKind names the kind of a JSON value, for errors: "a number", "an array", ...
func jsonKind(raw json.RawMessage) string {
	for _, c := range raw {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		case '"':
			return "a string"
		case '{':
			return "an object"
		case '[':
			return "an array"
		case 't', 'f':
			return "a boolean"
		case 'n':
			return "null"
		}
		return "a number"
	}
	return "empty"
}

// detailError is the error for a detail that could not be decoded: it names the field whose
// value has the wrong type (json's own message names Go's types).
func detailError(kind string, err error, body string) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return fmt.Errorf("%s: detail.%s is a JSON %s, not a %s (body %q)", kind, te.Field, te.Value, jsonType(te.Type.Kind().String()), clip(body))
	}
	return fmt.Errorf("%s: detail: %v (body %q)", kind, err, clip(body))
}

func jsonType(goKind string) string {
	switch goKind {
	case "string":
		return "string"
	case "slice", "array":
		return "list"
	case "struct", "map":
		return "object"
	}
	return strconv.Quote(goKind)
}

var _ = register(
	eventKind{source: "aws.ec2", detailTypes: []string{"EC2 Interruptible Capacity Reservation Allocation Reclamation Completed",
		"EC2 Capacity Reservation Interruptible Reclamation Complete"}, // both printed by the EC2 user guide
		// Sent to the reservation's owner once its capacity is back: nothing runs on it any more.
		ignored:    "an interruptible Capacity Reservation's reclamation completed: told to the reservation's owner, no instance to act on",
		ignoreKind: IgnoreCapacityReservationReclaimed, ignoreReason: ReasonReclamationCompleted},
	eventKind{source: "aws.ec2", detailTypes: capacityReservationStates,
		// A rule for the prefix "EC2 Capacity Reservation" delivers these beside the
		// interruption warning: a (future-dated) reservation changed state, no instance named.
		ignored:    "a Capacity Reservation changed state: the event names no instance to act on",
		ignoreKind: IgnoreCapacityReservationState, ignoreReason: ReasonStateChange},
)
