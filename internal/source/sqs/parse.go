// Package sqs reads the messages AWS puts on an SQS queue (EventBridge events, Auto Scaling
// lifecycle hooks, and either of those wrapped by SNS) and turns them into notices.
package sqs

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"lifeboat.dev/lifeboat/internal/notice"
)

// Result is what one queue message amounts to.
type Result struct {
	// Notices holds zero or more notices: AWS Health can name several instances, a test
	// notification names none.
	Notices []notice.Notice
	// Ignore means the message is well-formed but there is nothing to act on (a test
	// notification, an uninteresting state change). The consumer deletes it.
	Ignore bool
	// Reason says why the message was ignored, for the log.
	Reason string
	// Lifecycle is set for Auto Scaling lifecycle actions (one hook per message): what the
	// consumer needs to heartbeat and complete the action.
	Lifecycle *Lifecycle
	// Warnings are details the parser could not read while it kept the rest of the message:
	// an affected entity that is not an instance, an unreadable start or end time.
	Warnings []Warning
}

// Warning is one detail of a message that could not be read.
type Warning struct {
	Problem string // a metrics.Problem* value
	Detail  string // what and where, for the log
}

// Lifecycle names one pending Auto Scaling lifecycle action.
type Lifecycle struct {
	Group      string // AutoScalingGroupName
	Hook       string // LifecycleHookName
	Transition string // autoscaling:EC2_INSTANCE_TERMINATING or autoscaling:EC2_INSTANCE_LAUNCHING
}

// Lifecycle transitions.
const (
	TransitionTerminating = "autoscaling:EC2_INSTANCE_TERMINATING"
	TransitionLaunching   = "autoscaling:EC2_INSTANCE_LAUNCHING"
)

// spotWarning is how long EC2 gives between the interruption warning and the interruption.
const spotWarning = 2 * time.Minute

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
	case has(top, "detail-type"):
		return p.parseEnvelope(body, receivedAt)
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
		Type      string `json:"Type"`
		MessageID string `json:"MessageId"`
		Message   string `json:"Message"`
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		return Result{}, fmt.Errorf("SNS notification: %v (body %q)", err, clip(body))
	}
	switch v.Type {
	case "Notification":
	case "SubscriptionConfirmation", "UnsubscribeConfirmation":
		return Result{Ignore: true, Reason: "SNS " + v.Type}, nil
	default:
		return Result{}, fmt.Errorf("SNS notification: unknown Type %q (body %q)", clip(v.Type), clip(body))
	}
	if v.Message == "" {
		return Result{}, fmt.Errorf("SNS notification %s: empty Message (body %q)", clip(v.MessageID), clip(body))
	}
	r, err := p.parse(v.Message, receivedAt, true)
	if err != nil {
		return Result{}, fmt.Errorf("SNS notification %s: %w", clip(v.MessageID), err)
	}
	return r, nil
}

// envelope is an EventBridge event.
type envelope struct {
	ID         string          `json:"id"`
	Account    string          `json:"account"`
	DetailType string          `json:"detail-type"`
	Source     string          `json:"source"`
	Time       string          `json:"time"`
	Resources  []string        `json:"resources"`
	Detail     json.RawMessage `json:"detail"`
}

// Event kinds, as named in errors.
const (
	kindSpot      = "spot interruption"
	kindCapacity  = "capacity reservation interruption"
	kindRebalance = "rebalance recommendation"
	kindState     = "state change"
	kindLifecycle = "lifecycle action"
	kindHealth    = "health event"
	kindHook      = "Auto Scaling hook"
)

func (p Parser) parseEnvelope(body string, receivedAt time.Time) (Result, error) {
	var e envelope
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		return Result{}, fmt.Errorf("EventBridge event: %v (body %q)", err, clip(body))
	}
	if err := p.checkAccount("EventBridge event", "account", e.Account, body); err != nil {
		return Result{}, err
	}
	var (
		kind string
		fn   func(string, envelope, time.Time) (Result, error)
	)
	switch e.Source + "|" + e.DetailType {
	case "aws.ec2|EC2 Spot Instance Interruption Warning":
		kind, fn = kindSpot, parseSpot
	case "aws.ec2|EC2 Capacity Reservation Instance Interruption Warning":
		kind, fn = kindCapacity, parseCapacityReservation
	case "aws.ec2|EC2 Interruptible Capacity Reservation Allocation Reclamation Completed":
		// Sent to the reservation's owner once its capacity is back: nothing runs on it any more.
		return Result{Ignore: true, Reason: "an interruptible Capacity Reservation's reclamation completed: told to the reservation's owner, no instance to act on"}, nil
	case "aws.ec2|EC2 Instance Rebalance Recommendation":
		kind, fn = kindRebalance, parseRebalance
	case "aws.ec2|EC2 Instance State-change Notification":
		kind, fn = kindState, parseStateChange
	case "aws.autoscaling|EC2 Instance-terminate Lifecycle Action", "aws.autoscaling|EC2 Instance-launch Lifecycle Action":
		kind, fn = kindLifecycle, parseLifecycle
	case "aws.health|AWS Health Event":
		kind, fn = kindHealth, parseHealth
	default:
		return Result{}, fmt.Errorf("EventBridge event: unknown kind (source %q, detail-type %q) (body %q)", clip(e.Source), clip(e.DetailType), clip(body))
	}
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
	return fn(body, e, at)
}

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
		return Result{}, fmt.Errorf("%s: detail: %v (body %q)", kind, err, clip(body))
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

// parseRebalance: an instance gets one recommendation, so the instance alone identifies it.
// No deadline: the caller gives the drain budget.
func parseRebalance(body string, e envelope, at time.Time) (Result, error) {
	var d struct {
		InstanceID string `json:"instance-id"`
	}
	if err := json.Unmarshal(e.Detail, &d); err != nil {
		return Result{}, fmt.Errorf("%s: detail: %v (body %q)", kindRebalance, err, clip(body))
	}
	if err := checkInstance(kindRebalance, "detail.instance-id", d.InstanceID, body); err != nil {
		return Result{}, err
	}
	return one(notice.Notice{
		ID: notice.ID(notice.Rebalance, d.InstanceID, ""), Kind: notice.Rebalance, Source: notice.SourceQueue,
		InstanceID: d.InstanceID, StartTime: at,
		Description: fmt.Sprintf("Rebalance recommendation at %s: the instance is at elevated risk of interruption", stamp(at)),
	}), nil
}

// stateGoing are the states after which the instance is gone or going; stateStaying the rest.
var (
	stateGoing   = map[string]bool{"stopping": true, "stopped": true, "shutting-down": true, "terminated": true}
	stateStaying = map[string]bool{"pending": true, "running": true}
)

func parseStateChange(body string, e envelope, at time.Time) (Result, error) {
	var d struct {
		InstanceID string `json:"instance-id"`
		State      string `json:"state"`
	}
	if err := json.Unmarshal(e.Detail, &d); err != nil {
		return Result{}, fmt.Errorf("%s: detail: %v (body %q)", kindState, err, clip(body))
	}
	if err := checkInstance(kindState, "detail.instance-id", d.InstanceID, body); err != nil {
		return Result{}, err
	}
	if stateStaying[d.State] {
		return Result{Ignore: true, Reason: fmt.Sprintf("instance %s is %s", d.InstanceID, d.State)}, nil
	}
	if !stateGoing[d.State] {
		return Result{}, fmt.Errorf("%s: detail.state %q is not an EC2 instance state (body %q)", kindState, clip(d.State), clip(body))
	}
	return one(notice.Notice{
		ID: notice.ID(notice.StateChange, d.InstanceID, d.State), Kind: notice.StateChange, Source: notice.SourceQueue,
		InstanceID: d.InstanceID, StartTime: at, Action: d.State,
		Description: fmt.Sprintf("The instance entered state %s at %s", d.State, stamp(at)),
	}), nil
}

// hookFields are the lifecycle-action fields common to the EventBridge detail and the
// message Auto Scaling sends straight to the queue.
type hookFields struct {
	Token      string `json:"LifecycleActionToken"`
	Group      string `json:"AutoScalingGroupName"`
	Hook       string `json:"LifecycleHookName"`
	InstanceID string `json:"EC2InstanceId"`
	Transition string `json:"LifecycleTransition"`
}

func parseLifecycle(body string, e envelope, at time.Time) (Result, error) {
	var d hookFields
	if err := json.Unmarshal(e.Detail, &d); err != nil {
		return Result{}, fmt.Errorf("%s: detail: %v (body %q)", kindLifecycle, err, clip(body))
	}
	want := TransitionTerminating
	if e.DetailType == "EC2 Instance-launch Lifecycle Action" {
		want = TransitionLaunching
	}
	if d.Transition == "" {
		d.Transition = want
	} else if d.Transition != want {
		return Result{}, fmt.Errorf("%s: detail.LifecycleTransition %q does not match detail-type %q (body %q)", kindLifecycle, clip(d.Transition), e.DetailType, clip(body))
	}
	return lifecycleResult(kindLifecycle, "detail.", d, at, body)
}

// parseHook reads a message Auto Scaling sent straight to the queue (no EventBridge).
func (p Parser) parseHook(body string, receivedAt time.Time) (Result, error) {
	var v struct {
		hookFields
		Event     string `json:"Event"`
		Time      string `json:"Time"`
		AccountID string `json:"AccountId"`
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		return Result{}, fmt.Errorf("%s: %v (body %q)", kindHook, err, clip(body))
	}
	if err := p.checkAccount(kindHook, "AccountId", v.AccountID, body); err != nil {
		return Result{}, err
	}
	if v.Event == "autoscaling:TEST_NOTIFICATION" {
		return Result{Ignore: true, Reason: fmt.Sprintf("Auto Scaling test notification for group %q", clip(v.Group))}, nil
	}
	if v.Event != "" {
		return Result{}, fmt.Errorf("%s: unknown Event %q (body %q)", kindHook, clip(v.Event), clip(body))
	}
	if v.Transition != TransitionTerminating && v.Transition != TransitionLaunching {
		return Result{}, fmt.Errorf("%s: unknown LifecycleTransition %q (body %q)", kindHook, clip(v.Transition), clip(body))
	}
	at := receivedAt
	if v.Time != "" {
		t, err := time.Parse(time.RFC3339, v.Time)
		if err != nil {
			return Result{}, fmt.Errorf("%s: Time %q is not RFC 3339 (body %q)", kindHook, clip(v.Time), clip(body))
		}
		at = t
	}
	return lifecycleResult(kindHook, "", v.hookFields, at, body)
}

// lifecycleResult checks a hook and builds its notice. The token identifies the action. No
// deadline: the caller uses the hook's heartbeat timeout.
func lifecycleResult(kind, prefix string, d hookFields, at time.Time, body string) (Result, error) {
	if err := checkInstance(kind, prefix+"EC2InstanceId", d.InstanceID, body); err != nil {
		return Result{}, err
	}
	for _, f := range []struct {
		name, value string
		valid       func(string) bool
		want        string
		secret      bool // never repeated in an error
	}{
		{"LifecycleActionToken", d.Token, printable, "printable characters", true},
		{"AutoScalingGroupName", d.Group, printable, "printable characters", false},
		{"LifecycleHookName", d.Hook, hookNameChars, "letters, digits, -, _ and /", false},
	} {
		if strings.TrimSpace(f.value) == "" {
			return Result{}, fmt.Errorf("%s: missing %s%s (body %q)", kind, prefix, f.name, clip(body))
		}
		shown := ""
		if !f.secret {
			shown = fmt.Sprintf(" %q", clip(f.value))
		}
		if n := utf8.RuneCountInString(f.value); n > maxNameLength {
			return Result{}, fmt.Errorf("%s: %s%s%s is %d characters long, more than %d (body %q)", kind, prefix, f.name, shown, n, maxNameLength, clip(body))
		}
		if !f.valid(f.value) {
			return Result{}, fmt.Errorf("%s: %s%s%s holds characters other than %s (body %q)", kind, prefix, f.name, shown, f.want, clip(body))
		}
	}
	k, verb := notice.ASGTermination, "terminating"
	if d.Transition == TransitionLaunching {
		k, verb = notice.ASGLaunch, "launching"
	}
	// The id carries a digest of the token, never the token: ids reach taints, Events, logs
	// and webhooks. Earlier releases put the token's start in it; a record they wrote is
	// still matched on that form (LegacyID) while messages from before a rollout come back.
	r := one(notice.Notice{
		ID: notice.ID(k, d.InstanceID, notice.TokenDigest(d.Token)), LegacyID: notice.ID(k, d.InstanceID, d.Token), Kind: k, Source: notice.SourceQueue,
		InstanceID: d.InstanceID, StartTime: at, Action: d.Transition,
		Description: fmt.Sprintf("Auto Scaling group %s is %s the instance (hook %s)", d.Group, verb, d.Hook),
	})
	r.Lifecycle = &Lifecycle{Group: d.Group, Hook: d.Hook, Transition: d.Transition}
	return r, nil
}

// healthStays are the EC2 scheduled-change codes after which AWS documents the instance as
// still running, without a stop, a reboot or a retirement: network maintenance only cuts its
// network for a short while. They are ignored.
var healthStays = map[string]string{
	"AWS_EC2_INSTANCE_NETWORK_MAINTENANCE_SCHEDULED":       "network maintenance: the instance keeps running and loses connectivity briefly",
	"AWS_EC2_DEDICATED_HOST_NETWORK_MAINTENANCE_SCHEDULED": "network maintenance of its Dedicated Host: the instance keeps running and loses connectivity briefly",
}

// healthTakesDown are the EC2 scheduled-change codes known to stop, reboot, retire or
// terminate the instance. A code in neither list is taken as one too (the pods leave an
// instance that may go), with a warning.
var healthTakesDown = map[string]bool{
	"AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED":                     true,
	"AWS_EC2_INSTANCE_RETIREMENT_EXPEDITED":                     true,
	"AWS_EC2_PERSISTENT_INSTANCE_RETIREMENT_SCHEDULED":          true,
	"AWS_EC2_PERSISTENT_INSTANCE_RETIREMENT_EXPEDITED":          true,
	"AWS_EC2_INSTANCE_STOP_SCHEDULED":                           true,
	"AWS_EC2_INSTANCE_TERMINATION_SCHEDULED":                    true,
	"AWS_EC2_INSTANCE_REBOOT_MAINTENANCE_SCHEDULED":             true,
	"AWS_EC2_INSTANCE_REBOOT_FLEXIBLE_MAINTENANCE_SCHEDULED":    true,
	"AWS_EC2_SYSTEM_REBOOT_MAINTENANCE_SCHEDULED":               true,
	"AWS_EC2_INSTANCE_POWER_MAINTENANCE_SCHEDULED":              true,
	"AWS_EC2_PERSISTENT_INSTANCE_POWER_MAINTENANCE_SCHEDULED":   true,
	"AWS_EC2_MAINTENANCE_SCHEDULED":                             true,
	"AWS_EC2_DEDICATED_HOST_MAINTENANCE_SCHEDULED":              true,
	"AWS_EC2_DEDICATED_HOST_POWER_MAINTENANCE_SCHEDULED":        true,
	"AWS_EC2_DEDICATED_HOST_RETIREMENT_SCHEDULED":               true,
	"AWS_EC2_DEDICATED_HOST_ACCESSREVOKED_RETIREMENT_SCHEDULED": true,
}

// parseHealth makes one notice per affected instance of an EC2 scheduled change that takes
// the instance down. AWS Health sends one event (one detail.eventArn) again at each status
// update (upcoming, open, closed), each time in a new EventBridge envelope: the notice's
// identity is the event ARN and the instance, so updates are the same notice, and "closed"
// releases it. A detail that cannot be read never drops the rest: an entity that is not an
// instance is skipped, and an unreadable start time makes cordon-only notices (no drain can
// be scheduled without it).
func parseHealth(body string, e envelope, _ time.Time) (Result, error) {
	var d struct {
		EventArn string `json:"eventArn"`
		Service  string `json:"service"`
		Category string `json:"eventTypeCategory"`
		Code     string `json:"eventTypeCode"`
		Status   string `json:"statusCode"` // upcoming, open, closed
		Start    string `json:"startTime"`
		End      string `json:"endTime"`
		Entities []struct {
			Value string `json:"entityValue"`
		} `json:"affectedEntities"`
	}
	if err := json.Unmarshal(e.Detail, &d); err != nil {
		return Result{}, fmt.Errorf("%s: detail: %v (body %q)", kindHealth, err, clip(body))
	}
	if d.Service != "EC2" {
		return Result{Ignore: true, Reason: fmt.Sprintf("AWS Health %s event %s of service %q concerns no EC2 instance", clip(d.Category), clip(d.Code), clip(d.Service))}, nil
	}
	if d.Category != "scheduledChange" {
		return Result{Ignore: true, Reason: fmt.Sprintf("AWS Health %s event %s is not an EC2 scheduled change", clip(d.Category), clip(d.Code))}, nil
	}
	if why, ok := healthStays[d.Code]; ok {
		return Result{Ignore: true, Reason: fmt.Sprintf("AWS Health scheduled change %s does not take the instance down (%s)", d.Code, why)}, nil
	}
	if e.ID == "" {
		return Result{}, fmt.Errorf("%s: missing id (body %q)", kindHealth, clip(body))
	}
	for _, f := range []struct{ name, value string }{{"id", e.ID}, {"detail.eventArn", d.EventArn}, {"detail.eventTypeCode", d.Code}} {
		if n := utf8.RuneCountInString(f.value); n > maxNameLength {
			return Result{}, fmt.Errorf("%s: %s %q is %d characters long, more than %d (body %q)", kindHealth, f.name, clip(f.value), n, maxNameLength, clip(body))
		}
	}
	if len(d.Entities) == 0 {
		return Result{}, fmt.Errorf("%s: no detail.affectedEntities (body %q)", kindHealth, clip(body))
	}
	if len(d.Entities) > MaxHealthEntities {
		return Result{}, fmt.Errorf("%s %s: %d affected entities, more than the %d a message may name (body %q)", kindHealth, e.ID, len(d.Entities), MaxHealthEntities, clip(body))
	}
	var r Result
	// The event's name in what is logged: its ARN, else the envelope id.
	name := d.EventArn
	fact := notice.Digest(d.EventArn)
	if d.EventArn == "" {
		// AWS always states it; without it each update is a notice of its own, and a
		// "closed" one cannot find what the event did.
		name, fact = e.ID, e.ID
		r.Warnings = append(r.Warnings, Warning{Problem: problemEndUnreadable,
			Detail: fmt.Sprintf("the AWS Health event %s states no detail.eventArn: its notices are named by the envelope id, and its later updates cannot release them", e.ID)})
	}
	if d.Code == "" || !healthTakesDown[d.Code] {
		r.Warnings = append(r.Warnings, Warning{Problem: problemCodeUnknown,
			Detail: fmt.Sprintf("the AWS Health event %s has detail.eventTypeCode %q, not one Lifeboat knows: taken as a change that takes the instance down", name, clip(d.Code))})
	}
	// "closed" means the change is over (done or canceled): it releases what its notices did,
	// like a completed scheduled event.
	released := d.Status == "closed"
	start, startErr := ParseHealthTime(d.Start)
	cordonOnly := ""
	switch {
	case released:
	case d.Start == "":
		cordonOnly = "the AWS Health event " + name + " states no detail.startTime"
	case startErr != nil:
		cordonOnly = fmt.Sprintf("the AWS Health event %s has detail.startTime %v", name, startErr)
	}
	if cordonOnly != "" {
		r.Warnings = append(r.Warnings, Warning{Problem: problemStartUnreadable, Detail: cordonOnly + ": its instances are cordoned, not drained"})
	}
	end, endErr := ParseHealthTime(d.End)
	if d.End != "" && endErr != nil {
		r.Warnings = append(r.Warnings, Warning{Problem: problemEndUnreadable, Detail: fmt.Sprintf("the AWS Health event %s has detail.endTime %v: ignored", name, endErr)})
	}
	when := "at an unreadable time"
	if !start.IsZero() {
		when = "from " + stamp(start)
	}
	seen := map[string]bool{}
	skipped := 0
	for i, ent := range d.Entities {
		if !isInstanceID(ent.Value) {
			// Told one by one up to a few, then counted.
			if skipped++; skipped <= maxEntityWarnings {
				r.Warnings = append(r.Warnings, Warning{Problem: problemEntityNotInstance,
					Detail: fmt.Sprintf("the AWS Health event %s: detail.affectedEntities[%d].entityValue %q is not an EC2 instance id: skipped", name, i, clip(ent.Value))})
			}
			continue
		}
		if seen[ent.Value] {
			continue
		}
		seen[ent.Value] = true
		// Earlier releases named the notice by the envelope id: only that very message,
		// delivered again, still matches a record they wrote (each update has a new id).
		r.Notices = append(r.Notices, notice.Notice{
			ID: notice.ID(notice.ScheduledMaintenance, ent.Value, fact), LegacyID: notice.ID(notice.ScheduledMaintenance, ent.Value, e.ID),
			Kind: notice.ScheduledMaintenance, Source: notice.SourceQueue,
			InstanceID: ent.Value, Deadline: start, StartTime: start, EndTime: end, Action: d.Code, CordonOnly: cordonOnly, Released: released,
			Description: fmt.Sprintf("AWS Health scheduled change %s %s", d.Code, when),
		})
	}
	if more := skipped - maxEntityWarnings; more > 0 {
		r.Warnings = append(r.Warnings, Warning{Problem: problemEntityNotInstance,
			Detail: fmt.Sprintf("the AWS Health event %s: %d more affected entities are not EC2 instance ids: skipped", name, more)})
	}
	if len(r.Notices) == 0 {
		return Result{Ignore: true, Reason: fmt.Sprintf("AWS Health event %s (%s) names no EC2 instance", name, d.Code), Warnings: r.Warnings}, nil
	}
	return r, nil
}

// Health time layouts: RFC 1123 with a zone name (checked below) or a numeric offset. The day
// may have one digit.
const (
	healthTimeNamedZone = "Mon, 2 Jan 2006 15:04:05 MST"
	healthTimeOffset    = "Mon, 2 Jan 2006 15:04:05 -0700"
)

// ParseHealthTime reads an AWS Health time: RFC 3339, or RFC 1123 with GMT, UT, UTC or a
// numeric offset. Other zone names are refused rather than guessed (Go would read an unknown
// abbreviation as UTC). An empty string is the zero time and no error.
func ParseHealthTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(healthTimeOffset, s); err == nil {
		return t, nil
	}
	named := s
	if rest, ok := strings.CutSuffix(s, " UT"); ok {
		named = rest + " UTC" // Go reads zone names of three letters or more
	}
	if t, err := time.Parse(healthTimeNamedZone, named); err == nil {
		switch zone, _ := t.Zone(); zone {
		case "GMT", "UT", "UTC":
			return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC), nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is neither RFC 3339 nor RFC 1123 with GMT, UT, UTC or a numeric offset", clip(s))
}

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
	const max = 120
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > max-utf8.UTFMax && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
