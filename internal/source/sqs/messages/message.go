// SPDX-License-Identifier: Apache-2.0

// Package messages reads what AWS puts on an SQS queue (EventBridge events, Auto Scaling
// lifecycle hooks sent straight to the queue, and either of those wrapped by SNS) and turns it
// into notices. parser.go routes a message to its kind's parser (the table eventKinds, which
// each kind's file registers itself in); each kind's parser, fixtures and tests sit in files
// of their own. Receiving and deleting
// messages is the consumer's (package sqs): nothing here does I/O.
package messages

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode"

	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/text"
)

// Result is what one queue message amounts to.
type Result struct {
	// Notices holds zero or more notices: AWS Health can name several instances, a test
	// notification names none.
	Notices []notice.Notice
	// Ignore means the message is well-formed but there is nothing to act on (a test
	// notification, an uninteresting state change). The consumer deletes it.
	Ignore bool
	// Reason says why the message was ignored, for the log; IgnoredKind and IgnoredReason
	// name it for the counter (ignored.go).
	Reason                     string
	IgnoredKind, IgnoredReason string
	// Unknown is set when the message is an EventBridge event of a kind Lifeboat does not
	// know: it is ignored, and the log names the rule that sent it.
	Unknown *UnknownKind
	// Reservations are warnings that name a capacity reservation, not its instances (a
	// Capacity Block's end): the consumer looks up its instances and takes a notice for each.
	Reservations []Reservation
	// Warnings are details the parser could not read while it kept the rest of the message:
	// an affected entity that is not an instance, an unreadable start or end time.
	Warnings []Warning
}

// Warning is one detail of a message that could not be read.
type Warning struct {
	Problem string // a metrics.Problem* value
	Detail  string // what and where, for the log
}

// Problems a Warning names (the same words as the metrics' problem label).
const (
	problemEntityNotInstance = "entity_not_instance"
	problemStartUnreadable   = "start_time_unreadable"
	problemEndUnreadable     = "event_unreadable"
	problemCodeUnknown       = "event_code_unknown"
)

// Bounds of what a message may hold. AWS writes nothing larger: SQS takes messages of up to
// 1 MiB, Auto Scaling allows names of up to 255 characters, an EventBridge event id is a UUID.
const (
	MaxBodyBytes = 1 << 20
	// MaxHealthEntities is the most affected entities an AWS Health event may name.
	MaxHealthEntities = 10000
	// maxNameLength bounds group, hook and event names, tokens and event ids.
	maxNameLength = 255
	// maxEntityWarnings is how many skipped entities of one event are told one by one.
	maxEntityWarnings = 10
)

// ErrForeignAccount marks a message from an AWS account the queue does not accept.
var ErrForeignAccount = errors.New("not from the queue's AWS account")

// checkInstance accepts EC2 instance ids: "i-" and 8 or 17 lower-case hex digits.
func checkInstance(kind, field, id, body string) error {
	if id == "" {
		return fmt.Errorf("%s: missing %s (body %q)", kind, field, clip(body))
	}
	if !isInstanceID(id) {
		return fmt.Errorf("%s: %s %q is not an EC2 instance id (body %q)", kind, field, clip(id), clip(body))
	}
	return nil
}

// printable accepts what Auto Scaling accepts in a group name: no control characters other
// than tab, carriage return and line feed.
func printable(s string) bool {
	for _, r := range s {
		if unicode.IsControl(r) && r != '\t' && r != '\r' && r != '\n' {
			return false
		}
	}
	return true
}

// hookNameChars accepts Auto Scaling's characters for a lifecycle hook name.
func hookNameChars(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '/') {
			return false
		}
	}
	return true
}

func isInstanceID(id string) bool {
	hex, ok := strings.CutPrefix(id, "i-")
	if !ok || (len(hex) != 8 && len(hex) != 17) {
		return false
	}
	for i := 0; i < len(hex); i++ {
		if c := hex[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func one(n notice.Notice) Result { return Result{Notices: []notice.Notice{n}} }

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// tokenValue finds a lifecycle action token's value, also inside an SNS message's escaped JSON.
var tokenValue = regexp.MustCompile(`(LifecycleActionToken\\?"\s*:\s*\\?")[^"\\]*`)

// clip keeps error messages short when a body is garbage, cutting on a rune boundary. A
// lifecycle action token is blanked: it completes the action for whoever reads it in a log.
func clip(s string) string {
	s = tokenValue.ReplaceAllString(s, "${1}(redacted)")
	return text.Clip(s, 120, "…")
}
