// SPDX-License-Identifier: Apache-2.0

// Package panics keeps a panic inside the unit of work that met it: one node's reconcile, one
// notice, one pod's eviction, one poll, one webhook send. Each goroutine that handles input
// defers Recover (or runs its unit in Do): the panic is counted by site
// (lifeboat_reconcile_panics_total{site}), logged at ERROR with its stack, and becomes that
// unit's error, which the caller fails as it fails any error; the rest of the process goes on.
// A panic is a bug, and the log line is what to report. Only a panic of the goroutine that
// deferred Recover is caught: a goroutine the unit starts needs its own.
package panics

import (
	"fmt"
	"log/slog"
	"runtime/debug"
)

// Site is one kind of unit of work whose panics are recovered.
type Site struct {
	// Name is the metric's site label.
	Name string
	// Then says, in the log line, what becomes of the unit and of the rest.
	Then string
}

// The sites. Each is a label value of the metric from the start, so that its first panic
// shows as an increase.
var (
	Reconcile      = Site{"reconcile", "the node's interruption work is retried with backoff; the other nodes go on"}
	QueueMessage   = Site{"queue_message", "the message is left on the queue and comes back after its visibility timeout"}
	Notice         = Site{"notice", "the notice is retried as after an error (its message comes back); the message's other notices go on"}
	HookTimeout    = Site{"hook_timeout", "the termination hook's timeout is taken as unknown: the notice goes on to its intake with Auto Scaling's default of one hour"}
	Heartbeat      = Site{"lifecycle_heartbeat", "this lifecycle action's heartbeats stop and the drain's deadline is brought to the action's expiry; other actions go on"}
	Eviction       = Site{"eviction", "this pod's eviction failed and the pod is reported left on the node; the drain's other pods go on"}
	PodWatch       = Site{"pod_watch", "the drain failed and its node is retried with backoff"}
	DrainClaim     = Site{"drain_claim", "the drain's claim is given up as a lost one is: the drain stops and its node is retried with backoff"}
	GraceCut       = Site{"grace_cut", "this cut of leaving pods' grace periods is over; the drain goes on"}
	InstanceStatus = Site{"instance_status", "this DescribeInstanceStatus pass is over; the next runs on time"}
	IMDSPoll       = Site{"imds_poll", "the poll counts as failed; the next runs after the usual backoff"}
	InstanceLookup = Site{"instance_lookup", "the DescribeInstances batch failed; its lookups (ownership, the instance gate) get an error and are retried"}
	DetachWait     = Site{"handback_wait", "this hand-back wait is skipped; the others go on"}
	NodeEvent      = Site{"node_event", "this informer event of the node is dropped; its next change is looked at"}
	PeriodicCheck  = Site{"readiness_check", "this readiness check failed; the last findings stay published and the next check runs on time"}
	Webhook        = Site{"webhook", "this webhook send failed"}
	NodeRepair     = Site{"node_repair", "this look at the node's conditions is over; the node is looked at again on its next change"}
	NodeCleanup    = Site{"node_cleanup", "this node clean-up pass is over; the next runs on time"}
	RetainedSweep  = Site{"retained_sweep", "this sweep of retained instances is over; the next runs on time"}
	NodeCondition  = Site{"node_condition", "this write of the node's lifeboat.dev/Interruption condition is dropped; its next state is written"}
	SetupCheck     = Site{"setup_check", "this check of the AWS set-up is over; the next runs on time"}
)

// Sites lists every site.
var Sites = []Site{Reconcile, QueueMessage, Notice, HookTimeout, Heartbeat, Eviction, PodWatch, DrainClaim, GraceCut,
	InstanceStatus, IMDSPoll, InstanceLookup, DetachWait, NodeEvent, PeriodicCheck, Webhook, NodeRepair, NodeCleanup,
	RetainedSweep, NodeCondition, SetupCheck}

// Counter counts recovered panics by site name (metrics.Metrics does).
type Counter interface {
	PanicRecovered(site string)
}

// Error is a recovered panic, as the error of the unit of work it ended.
type Error struct {
	Site  string
	Panic string // the panic's value, as text
}

func (e *Error) Error() string { return "panic in " + e.Site + ": " + e.Panic }

// Recover, deferred, recovers a panic of the goroutine's unit of work at site: it counts it in
// c, logs it at ERROR with the stack and attrs, and sets *err (when err is not nil) to an
// *Error. Without a panic it does nothing. A nil log is slog.Default(); a nil c counts nothing.
func Recover(site Site, log *slog.Logger, c Counter, err *error, attrs ...any) {
	if p := recover(); p != nil {
		caught(site, log, c, err, p, nil, attrs)
	}
}

// RecoverRedacted is Recover for a site whose panic may carry a secret (the webhook's URL):
// redact rewrites the panic's text and the stack before they are logged or returned.
func RecoverRedacted(site Site, log *slog.Logger, c Counter, err *error, redact func(string) string, attrs ...any) {
	if p := recover(); p != nil {
		caught(site, log, c, err, p, redact, attrs)
	}
}

// Do runs f as one unit of work at site and returns its panic, recovered as Recover does, or
// nil.
func Do(site Site, log *slog.Logger, c Counter, f func(), attrs ...any) (err error) {
	defer Recover(site, log, c, &err, attrs...)
	f()
	return nil
}

func caught(site Site, log *slog.Logger, c Counter, err *error, p any, redact func(string) string, attrs []any) {
	text, stack := fmt.Sprint(p), string(debug.Stack())
	if redact != nil {
		text, stack = redact(text), redact(stack)
	}
	if c != nil {
		c.PanicRecovered(site.Name)
	}
	if log == nil {
		log = slog.Default()
	}
	log.Error("recovered a panic: only its own unit of work failed (a bug: please report this line)",
		append([]any{"site", site.Name, "then", site.Then, "panic", text}, append(attrs, "stack", stack)...)...)
	if err != nil {
		*err = &Error{Site: site.Name, Panic: text}
	}
}
