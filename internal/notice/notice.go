// SPDX-License-Identifier: Apache-2.0

// Package notice defines what every source (instance metadata, the queue) turns an AWS
// announcement into, and how a notice is identified.
//
// Identity comes only from stable facts the source states: the instance, the kind, and an
// event id where the source has one. Never from the clock, and never from a time field a
// source may restate differently on each poll, so re-polling, redelivery and restarts all
// name the same notice the same way.
package notice

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"
)

// Source says where a notice came from.
type Source string

const (
	SourceIMDS  Source = "imds"
	SourceQueue Source = "queue"
	// SourceEC2Status is the controller's DescribeInstanceStatus poll (failing status checks
	// and the scheduled events EC2 lists for an instance).
	SourceEC2Status Source = "ec2-status"
	// SourceNodeCondition is the controller's watch of Node conditions (ENABLE_NODE_REPAIR).
	SourceNodeCondition Source = "node-condition"
)

// Notice is one announcement about one instance.
type Notice struct {
	ID         string // stable identity; see New
	Kind       Kind
	Source     Source
	InstanceID string
	// Node, when set, is the Node the notice was read from (a node condition): only that Node
	// may be acted on for it, and only when EC2 describes the instance as that Node.
	Node      string
	Deadline  time.Time // when the instance is expected to go away
	StartTime time.Time // when AWS says the event starts (for messages)
	EndTime   time.Time
	// Announced is the notice's own time, when AWS announced it: the EventBridge event's time,
	// the lifecycle hook's time, or, for a notice that states none (instance metadata), when
	// Lifeboat first saw it. Latencies are measured from it; it is not part of the identity.
	Announced   time.Time
	Description string
	// Released means the event was canceled or completed: undo what its notice (same ID) did.
	Released bool
	// Action is the spot instance-action ("terminate", "stop", "hibernate") or, for
	// scheduled events, the event code ("system-reboot", ...).
	Action string
	// CordonOnly, when set, says why this notice cordons its node but does not drain it: its
	// start time could not be read, so no drain can be scheduled. The notice is still acted
	// on (never dropped); the reason is logged, recorded as an Event and counted.
	CordonOnly string
	// Lifecycle, when set, is the Auto Scaling lifecycle action the notice answers: it is
	// heartbeaten while the node drains and completed once it is drained.
	Lifecycle *Lifecycle
	// LegacyIDDigest, when set, is the Digest of the id an earlier release gave the same
	// notice: a record it wrote is matched on it during a rollout. Only the digest is carried,
	// because an Auto Scaling hook's id once carried its token, which completes the action for
	// whoever holds it.
	LegacyIDDigest string
}

// Restated reports whether a later copy of the notice may restate its start: an AWS Health
// scheduled change is sent again at each status update of one event, and its start may
// move; so may an event DescribeInstanceStatus lists, when its owner reschedules it. Other
// sources' copies change nothing once recorded.
func (n Notice) Restated() bool {
	return n.Kind.Scheduled() && (n.Source == SourceQueue || n.Source == SourceEC2Status)
}

// Lifecycle names one pending Auto Scaling lifecycle action of the notice's instance. It is
// completed by instance id: the action's token is not carried (see TokenDigest).
type Lifecycle struct {
	Group string // AutoScalingGroupName
	Hook  string // LifecycleHookName
}

// TokenDigest identifies a lifecycle action by its token without revealing it: notice ids
// end up in taints, Events, logs and webhooks, which many can read, while the token
// completes the action for whoever holds it.
func TokenDigest(token string) string { return Digest(token) }

// Digest condenses a source's event fact into 32 hex digits (128 bits of SHA-256), so that
// a long or secret fact (an AWS Health event ARN, a lifecycle action token) fits in a notice
// id, and digests of different facts never meet in practice.
func Digest(fact string) string {
	sum := sha256.Sum256([]byte(fact))
	return hex.EncodeToString(sum[:16])
}

// ValidInstanceID reports whether id has the shape of an EC2 instance id: "i-" and 1 to 17
// lower-case hex digits (EC2 issues 8 or 17; shorter ones are accepted for test fixtures and
// older regions' tooling alike).
func ValidInstanceID(id string) bool {
	digits, ok := strings.CutPrefix(id, "i-")
	if !ok || len(digits) < 1 || len(digits) > 17 {
		return false
	}
	for i := 0; i < len(digits); i++ {
		if c := digits[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// ID builds a notice id from the instance, the kind and an optional source event id. The
// result is at most 63 characters of [a-z0-9-] so it can be a taint or label value.
func ID(kind Kind, instanceID, eventID string) string {
	parts := []string{short(kind), instanceID}
	if eventID != "" {
		parts = append(parts, eventID)
	}
	id := strings.ToLower(strings.Join(parts, "-"))
	id = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, id)
	if len(id) > 63 {
		id = id[:63]
	}
	return strings.Trim(id, "-")
}

func short(k Kind) string {
	if r, ok := kinds[k]; ok {
		return r.Short
	}
	return string(k)
}

func (n Notice) String() string {
	return fmt.Sprintf("%s %s for %s (deadline %s)", n.Kind, n.ID, n.InstanceID, n.Deadline.UTC().Format(time.RFC3339))
}

// RebootCodes are scheduled-event codes after which the instance comes back by itself.
var RebootCodes = map[string]bool{"instance-reboot": true, "system-reboot": true}
