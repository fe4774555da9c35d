// SPDX-License-Identifier: Apache-2.0

package messages

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Parser reads the messages of one queue.
type Parser struct {
	// QueueAccount is the AWS account that owns the queue. When set, an EventBridge event
	// (its account) and an Auto Scaling message (its AccountId) must come from it or from
	// one of AllowedAccounts, or Parse refuses them with ErrForeignAccount. Empty: the
	// account is not checked.
	QueueAccount string
	// AllowedAccounts are further accounts whose messages are accepted (an event bus that
	// receives another account's events).
	AllowedAccounts []string
}

// Parse reads one queue message without checking the account it comes from (see
// Parser.Parse).
func Parse(body string, receivedAt time.Time) (Result, error) {
	return Parser{}.Parse(body, receivedAt)
}

// Parse reads one queue message. receivedAt stands in for the event time only when the
// message states none (it then sets times, never identity): parsing the same message at
// any moment yields the same notice ids. A message from an account p does not accept fails
// with an error wrapping ErrForeignAccount.
func (p Parser) Parse(body string, receivedAt time.Time) (Result, error) {
	if len(body) > MaxBodyBytes {
		return Result{}, fmt.Errorf("queue message: %d bytes, more than the %d an SQS message holds (body %q)", len(body), MaxBodyBytes, clip(body))
	}
	return p.parse(body, receivedAt, false)
}

// checkAccount refuses a message from an account the queue does not accept.
func (p Parser) checkAccount(kind, field, account, body string) error {
	if p.QueueAccount == "" || account == p.QueueAccount || slices.Contains(p.AllowedAccounts, account) {
		return nil
	}
	also := ""
	if len(p.AllowedAccounts) > 0 {
		also = " nor one of the allowed accounts " + strings.Join(p.AllowedAccounts, ", ")
	}
	if account == "" {
		return fmt.Errorf("%s: %w: it names no %s; the queue's account is %s%s (body %q)", kind, ErrForeignAccount, field, p.QueueAccount, also, clip(body))
	}
	return fmt.Errorf("%s: %w: %s %q is not the queue's account %s%s (body %q)", kind, ErrForeignAccount, field, clip(account), p.QueueAccount, also, clip(body))
}

func (p Parser) parse(body string, receivedAt time.Time, wrapped bool) (Result, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &top); err != nil {
		return Result{}, fmt.Errorf("queue message: not a JSON object: %v (body %q)", err, clip(body))
	}
	if top == nil {
		return Result{}, fmt.Errorf("queue message: not a JSON object (body %q)", clip(body))
	}
	// Keys are matched exactly here: encoding/json folds case when filling structs, and the
	// shapes differ in case only ("time" vs "Time").
	switch {
	case has(top, "Type") && has(top, "Message"):
		if wrapped {
			return Result{}, fmt.Errorf("SNS notification: nested inside another SNS notification (body %q)", clip(body))
		}
		return p.parseSNS(body, receivedAt)
	case has(top, "detail-type") || has(top, "detail_type"):
		// detail_type is the spelling of AWS's Capacity Block examples; EventBridge writes
		// detail-type. Both are read (see readEnvelope).
		return p.parseEnvelope(top, body, receivedAt)
	case has(top, "Event") || has(top, "LifecycleTransition"):
		return p.parseHook(body, receivedAt)
	}
	return Result{}, fmt.Errorf("queue message: neither an EventBridge event, an Auto Scaling hook nor an SNS notification (body %q)", clip(body))
}

func has(m map[string]json.RawMessage, key string) bool {
	_, ok := m[key]
	return ok
}

// parseSNS unwraps one level of SNS.
func (p Parser) parseSNS(body string, receivedAt time.Time) (Result, error) {
	var v struct {
		Type      string      `json:"Type"`
		MessageID looseString `json:"MessageId"` // only logged
		Message   string      `json:"Message"`
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		return Result{}, fmt.Errorf("SNS notification: %v (body %q)", err, clip(body))
	}
	switch v.Type {
	case "Notification":
	case "SubscriptionConfirmation", "UnsubscribeConfirmation":
		return ignored(ignoreSNS, "subscription", "SNS "+v.Type), nil
	default:
		return Result{}, fmt.Errorf("SNS notification: unknown Type %q (body %q)", clip(v.Type), clip(body))
	}
	if v.Message == "" {
		return Result{}, fmt.Errorf("SNS notification %s: empty Message (body %q)", clip(string(v.MessageID)), clip(body))
	}
	r, err := p.parse(v.Message, receivedAt, true)
	if err != nil {
		return Result{}, fmt.Errorf("SNS notification %s: %w", clip(string(v.MessageID)), err)
	}
	return r, nil
}

// envelope is what Lifeboat reads of an EventBridge event: the keys a kind uses, nothing
// else. resources, region and version are never decoded, so no shape of theirs can refuse a
// message (AWS's user guide prints the interruptible Capacity Reservation warning's resources
// as a string, not a list).
type envelope struct {
	ID         string // id, or customer_event_id; "" when it is not a string
	Account    string
	DetailType string
	Source     string
	Time       string
	Detail     json.RawMessage
}

// Envelope keys, in both spellings AWS documents: EventBridge writes detail-type and id, the
// Capacity Block examples of the EC2 user guide detail_type and customer_event_id.
var (
	keysDetailType = []string{"detail-type", "detail_type"}
	keysID         = []string{"id", "customer_event_id"}
)

// readEnvelope reads the envelope's keys one by one. The keys a notice depends on (source,
// detail-type, account, time) must be strings, and an error names the key; the id is only
// needed by AWS Health events (which check it) and is read leniently.
func readEnvelope(top map[string]json.RawMessage, body string) (envelope, error) {
	var e envelope
	for _, f := range []struct {
		keys []string
		to   *string
	}{{[]string{"source"}, &e.Source}, {keysDetailType, &e.DetailType}, {[]string{"account"}, &e.Account}, {[]string{"time"}, &e.Time}} {
		if err := stringKey(top, f.keys, f.to); err != nil {
			return envelope{}, fmt.Errorf("EventBridge event: %v (body %q)", err, clip(body))
		}
	}
	_ = stringKey(top, keysID, &e.ID)
	e.Detail = top["detail"]
	return e, nil
}

// stringKey reads the first of keys that top has, which must be a JSON string (or null).
func stringKey(top map[string]json.RawMessage, keys []string, to *string) error {
	for _, k := range keys {
		raw, ok := top[k]
		if !ok {
			continue
		}
		var v *string
		if err := json.Unmarshal(raw, &v); err != nil {
			return fmt.Errorf("%s is %s, not a string", k, jsonKind(raw))
		}
		if v != nil {
			*to = *v
		}
		return nil
	}
	return nil
}

func (p Parser) parseEnvelope(top map[string]json.RawMessage, body string, receivedAt time.Time) (Result, error) {
	e, err := readEnvelope(top, body)
	if err != nil {
		return Result{}, err
	}
	if err := p.checkAccount("EventBridge event", "account", e.Account, body); err != nil {
		return Result{}, err
	}
	k, ok := eventKindOf(e.Source, e.DetailType)
	if !ok {
		return unknownKind(e.Source, e.DetailType), nil
	}
	if k.ignored != "" {
		return ignored(k.ignoreKind, k.ignoreReason, k.ignored), nil
	}
	kind := k.name
	if len(e.Detail) == 0 || string(e.Detail) == "null" {
		return Result{}, fmt.Errorf("%s: missing detail (body %q)", kind, clip(body))
	}
	at := receivedAt
	if e.Time != "" {
		t, err := time.Parse(time.RFC3339, e.Time)
		if err != nil {
			return Result{}, fmt.Errorf("%s: time %q is not RFC 3339 (body %q)", kind, clip(e.Time), clip(body))
		}
		at = t
	}
	res, err := k.parse(body, e, at)
	return announced(res, at), err
}

// announced stamps the notices of res with at, the message's own time, unless they carry one.
func announced(res Result, at time.Time) Result {
	for i := range res.Notices {
		if res.Notices[i].Announced.IsZero() {
			res.Notices[i].Announced = at
		}
	}
	return res
}

// eventKind is one kind of EventBridge event: where it comes from, how it is named, and its
// parser (each in a file of its own).
type eventKind struct {
	source      string   // the envelope's source
	detailTypes []string // the envelope's detail-type values that name it
	name        string   // how errors name it
	// parse reads the event's detail; at is its time (the envelope's, else the receipt's).
	parse func(body string, e envelope, at time.Time) (Result, error)
	// ignored, when set, says why such an event is well-formed but never acted on;
	// ignoreKind and ignoreReason name it for the counter.
	ignored, ignoreKind, ignoreReason string
}

// eventKinds are the EventBridge events a queue may carry: each parser's file registers its
// own (register), so a kind is added in its file alone. A kind not listed is unreadable.
var eventKinds []eventKind

// register adds kinds to the table; a detail-type registered twice for one source is a bug
// that stops the process at start, before any message is read.
func register(kinds ...eventKind) bool {
	for _, k := range kinds {
		for _, dt := range k.detailTypes {
			if _, dup := eventKindOf(k.source, dt); dup {
				panic(fmt.Sprintf("messages: %s %q registered twice", k.source, dt))
			}
		}
		eventKinds = append(eventKinds, k)
	}
	slices.SortStableFunc(eventKinds, func(a, b eventKind) int { return strings.Compare(a.source+a.name, b.source+b.name) })
	return true
}

// capacityReservationStates are the detail-types of a Capacity Reservation's state changes.
var capacityReservationStates = []string{
	"EC2 Capacity Reservation Scheduled", "EC2 Capacity Reservation Active", "EC2 Capacity Reservation Delayed",
	"EC2 Capacity Reservation Unsupported", "EC2 Capacity Reservation Failed", "EC2 Capacity Reservation Expired",
}

// eventKindOf finds the kind of an event by its source and detail-type.
func eventKindOf(source, detailType string) (eventKind, bool) {
	for _, k := range eventKinds {
		if k.source == source && slices.Contains(k.detailTypes, detailType) {
			return k, true
		}
	}
	return eventKind{}, false
}

// EventKind is one kind of EventBridge event Lifeboat acts on, as an EventBridge rule
// selects it: its source and the detail-type values that name it.
type EventKind struct {
	Name        string
	Source      string
	DetailTypes []string
}

// EventKinds are the EventBridge events Lifeboat acts on (those it only recognises are left
// out): each needs a rule that sends it to the queue. deploy/aws's tests hold the shipped
// rules to this list.
func EventKinds() []EventKind {
	var out []EventKind
	for _, k := range eventKinds {
		if k.ignored == "" {
			out = append(out, EventKind{Name: k.name, Source: k.source, DetailTypes: slices.Clone(k.detailTypes)})
		}
	}
	return out
}
