// SPDX-License-Identifier: Apache-2.0

// Package record is the Node record of an interruption episode: its schema and versions,
// reading and validating it (the annotation is input: any credential that may write the Node
// can forge it), and the edits that change it inside one conflict-safe Node write. What an
// episode does with its record (plans, ownership, retention) lives with the episode's phases.
package record

import (
	"fmt"
	"slices"
	"time"

	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/text"
)

// Annotation holds a node's Record. Every Lifeboat process (agent, controller
// replicas, a restarted process) reads the same record, so they continue each other's work
// instead of repeating it.
const Annotation = nodes.AnnotationPrefix + "interruption"

// Phase is how far handling a node's interruption has come. Phases only move forward.
type Phase int

const (
	PhaseNone     Phase = iota
	PhaseCordoned       // tainted / labelled / cordoned; no drain wanted
	PhaseDraining       // cordoned, drain started (or scheduled)
	PhaseDrained        // every selected pod is gone
)

var phaseNames = []string{"", "cordoned", "draining", "drained"}

func (p Phase) String() string { return phaseNames[p] }

// MarshalText and UnmarshalText keep the annotation readable.
func (p Phase) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

func (p *Phase) UnmarshalText(b []byte) error {
	i := slices.Index(phaseNames, string(b))
	if i < 0 {
		return fmt.Errorf("unknown phase %q", clipValue(string(b)))
	}
	*p = Phase(i)
	return nil
}

// Version is the schema of the record this binary writes and understands. Records
// written before versions were counted read as version 1. A record of a newer version is
// left alone: during a rollout an older binary must not redo, or undo, a newer one's work.
//
// Version 2 added Intents: the work a notice asks for lives on the Node, not in a queue
// message, so a version-1 binary (which would drop them on its next write) must not touch it.
// Version 3 added Owner.Contested: a controller renews its claim only once contested, so a
// version-2 binary waiting for the drain would take it over a lease after the claim, and
// would drop the contest on its next write.
// Version 4 keeps no lifecycle action token: actions are completed by instance id, and the
// token (which completes an action for whoever holds it) is not left readable on the Node.
// Version 5 added Retained: a termination hook abandoned to its group's retention, whose
// instance Lifeboat terminates once drained; a version-4 binary would complete the abandoned
// notices (and never terminate the instance), and would drop the field on its next write.
// Version 6 added the notice kinds capacity-block-expiration and instance-impaired and the
// source ec2-status: a version-5 binary would find such a record invalid and replace it with
// the next notice, losing the episode's work.
const Version = 6

// ReadableFrom is the oldest schema version that may carry this binary's records on as its
// own, written in each record as readableFrom when below Version (absent, a record is readable
// from its own version only). A binary that finds a record of a newer version reads it as one
// of its own when readableFrom is at or below its version (what it does not know of it is
// dropped at its next write), so that after a rollback the episode goes on rather than the
// node being held. A release that bumps Version sets it to the version before when that
// version carries the new records on safely, and to Version otherwise: the release before
// then holds such a record until its episode is over by the fields every version keeps (see
// LeftByNewer).
const ReadableFrom = 6

// NewerHold is how long past its deadline a record of a newer schema that this binary cannot
// read is left to the newer Lifeboat that wrote it (see LeftByNewer): by then a Lifeboat at work
// has drained the node and handed the instance back, and the instance is gone or stays.
const NewerHold = time.Hour

// Record is what Lifeboat remembers about a node's interruption: its open episode (one
// stretch of interruption work: the notices, the phase, the deadline, the webhook claim) and
// the notices released for good.
type Record struct {
	// Version is the schema (Version); 0 in records written before versions.
	Version int `json:"version,omitempty"`
	// ReadableFrom is what the record says of itself (see the constant ReadableFrom); set by
	// Write, cleared by Read.
	ReadableFrom int `json:"readableFrom,omitempty"`
	// BootID is the node's status.nodeInfo.bootID when the episode opened: another means the
	// instance started again, and the episode is over.
	BootID string `json:"bootID,omitempty"`
	// Notices lists the notice ids handled for this node; the first started the work, later
	// ones were coalesced into it.
	Notices  []string  `json:"notices"`
	Phase    Phase     `json:"phase"`
	Deadline time.Time `json:"deadline,omitzero"`
	// Released lists notices whose events were canceled or completed and undone.
	Released []string `json:"released,omitempty"`
	// RebootAfter is set for scheduled reboots: a node that booted after this time has been
	// through the reboot and is uncordoned.
	RebootAfter time.Time `json:"rebootAfter,omitzero"`
	// Heartbeat is the progress of the Auto Scaling heartbeats sent while the node drains,
	// so that a restarted or new leader goes on from the last one instead of starting over.
	Heartbeat *Heartbeat `json:"heartbeat,omitempty"`
	// Finished lists the notices whose work is complete: the node drained and the notice's
	// own completion (its lifecycle action) done. The phase is the node's; a notice joined to
	// a drain another notice finished is not done until its own completion is.
	Finished []string `json:"finished,omitempty"`
	// Reported lists the outcomes of the episode already reported (webhook, Event): "cordoned"
	// for a cordon-only episode, "drained" once drained. Each is claimed by one write, so
	// notices coalesced into the episode, other replicas and restarts report it once; an
	// episode escalated from a cordon to a drain reports the drain once more.
	Reported []string `json:"reported,omitempty"`
	// Notified is how records written before Reported said an outcome was reported; it is
	// read as every outcome reported, and no longer written.
	Notified bool `json:"notified,omitempty"`
	// Intents holds what each notice of the episode asks for, recorded by intake in the same
	// write as the cordon: the reconciler drives the episode from them (wait for a scheduled
	// start, drain, complete lifecycle actions), so the work outlives the process that took
	// the notice and the queue message that brought it.
	Intents []Intent `json:"intents,omitempty"`
	// Owner is the Lifeboat draining the episode (see Owner); nil when none is.
	Owner *Owner `json:"owner,omitempty"`
	// Held lists the pods ("namespace/name") the last drain left because their owners
	// marked them not to disrupt and no notice was a reclaim. A reclaim that joins the
	// episode later drains the node again for them.
	Held []string `json:"held,omitempty"`
	// Detach is what the detach phase waits for, recorded once one of its waits finds
	// something still held, so that a process that takes over after a restart waits for it
	// too (its own drain finds the node empty and moves nothing). Its JSON name keeps the
	// older word "handback": other releases read the record.
	Detach *Detach `json:"handback,omitempty"`
	// Retained is set once a termination hook whose drain could not finish in time was
	// completed with ABANDON and its group retains the instance (see Retention).
	Retained *Retention `json:"retained,omitempty"`
}

// Detach is what the detach phase waits for beyond the instance itself: the evicted pods'
// claims (their volumes) and IPs (their load-balancer targets).
type Detach struct {
	Claims []string `json:"claims,omitempty"`
	PodIPs []string `json:"podIPs,omitempty"`
}

// Intent is one notice as recorded on its node: what the reconciler needs to do its work.
type Intent struct {
	ID          string    `json:"id"`
	Kind        string    `json:"kind"`
	Source      string    `json:"source"`
	InstanceID  string    `json:"instanceID"`
	Action      string    `json:"action,omitempty"`
	Deadline    time.Time `json:"deadline,omitzero"`
	Start       time.Time `json:"start,omitzero"`
	End         time.Time `json:"end,omitzero"`
	Description string    `json:"description,omitempty"`
	CordonOnly  string    `json:"cordonOnly,omitempty"`
	// Announced is the notice's own time (notice.Notice.Announced), for the latency metric of
	// the stages after intake; older records have none.
	Announced time.Time `json:"announced,omitzero"`
	// Origin is where the Lifeboat that took the notice takes notices from ("imds", or
	// "queue " and the queue's URL): that Lifeboat drives it.
	Origin string `json:"origin,omitempty"`
	// Lifecycle is the Auto Scaling lifecycle action to heartbeat and complete.
	Lifecycle *Lifecycle `json:"lifecycle,omitempty"`
}

// Lifecycle is notice.Lifecycle in the record. The action is completed by instance id:
// no token is kept (records of version 3 and before kept it; it is dropped on the next write).
type Lifecycle struct {
	Group string `json:"group"`
	Hook  string `json:"hook"`
	// LegacyToken is read from older records only, to be dropped.
	LegacyToken string `json:"token,omitempty"`
}

// maxDescription bounds a recorded description: AWS Health descriptions run to paragraphs,
// and a Node's annotations share 256 KiB.
const maxDescription = 512

// IntentOf records the notice n, taken from origin.
func IntentOf(n notice.Notice, origin string) Intent {
	i := Intent{Origin: origin,
		ID: n.ID, Kind: string(n.Kind), Source: string(n.Source), InstanceID: n.InstanceID, Action: n.Action,
		Deadline: n.Deadline.UTC().Truncate(time.Second), Start: n.StartTime.UTC(), End: n.EndTime.UTC(),
		Description: n.Description, CordonOnly: n.CordonOnly, Announced: n.Announced.UTC().Truncate(time.Second),
	}
	i.Description = text.Clip(i.Description, maxDescription, "…")
	if lc := n.Lifecycle; lc != nil {
		i.Lifecycle = &Lifecycle{Group: lc.Group, Hook: lc.Hook}
	}
	return i
}

// Notice is the notice the intent records.
func (i Intent) Notice() notice.Notice {
	n := notice.Notice{
		ID: i.ID, Kind: notice.Kind(i.Kind), Source: notice.Source(i.Source), InstanceID: i.InstanceID, Action: i.Action,
		Deadline: i.Deadline, StartTime: i.Start, EndTime: i.End, Description: i.Description, CordonOnly: i.CordonOnly, Announced: i.Announced,
	}
	if lc := i.Lifecycle; lc != nil {
		n.Lifecycle = &notice.Lifecycle{Group: lc.Group, Hook: lc.Hook}
	}
	return n
}

// intent returns the recorded intent of the notice id.
func (r Record) Intent(id string) (Intent, bool) {
	for _, i := range r.Intents {
		if i.ID == id {
			return i, true
		}
	}
	return Intent{}, false
}

// Outcomes an episode reports.
const (
	OutcomeCordoned = "cordoned"
	OutcomeDrained  = "drained"
)

// reported reports whether the episode's outcome was already reported.
func (r Record) WasReported(outcome string) bool {
	return slices.Contains(r.Reported, outcome) || (r.Notified && len(r.Reported) == 0)
}

// Heartbeat counts the lifecycle heartbeats sent for one notice.
type Heartbeat struct {
	Notice string    `json:"notice"`
	Count  int       `json:"count"`
	Last   time.Time `json:"last"`
}

// Known reports whether this binary understands the record's schema.
func (r Record) Known() bool { return r.Version <= Version }

// Open reports whether the record has an open episode this binary understands: work
// recorded, and not all of it released.
func (r Record) Open() bool { return r.Known() && r.Phase > PhaseNone && !r.AllReleased() }

// AllReleased reports whether every notice in the record has been released.
func (r Record) AllReleased() bool {
	for _, id := range r.Notices {
		if !slices.Contains(r.Released, id) {
			return false
		}
	}
	return len(r.Notices) > 0
}

// WorkDone reports whether the notice needs no more work: finished after a drain, or (for a plan
// without one) the node cordoned for it.
func (r Record) WorkDone(id string, drains bool) bool {
	if !r.Has(id) {
		return false
	}
	if drains {
		return r.Phase == PhaseDrained && slices.Contains(r.Finished, id)
	}
	return r.Phase >= PhaseCordoned
}

// MatchLegacyID gives n the id an earlier release recorded it under, when the record holds
// that form and not the current one: a message from before a rollout, delivered again, is
// then the notice already recorded rather than a second one.
func (r Record) MatchLegacyID(n notice.Notice) notice.Notice {
	if n.LegacyIDDigest == "" || r.Has(n.ID) || slices.Contains(r.Released, n.ID) {
		return n
	}
	for _, ids := range [][]string{r.Notices, r.Released} {
		for _, id := range ids {
			if notice.Digest(id) == n.LegacyIDDigest {
				n.ID = id
				return n
			}
		}
	}
	return n
}

// Has reports whether the notice was already taken into account.
func (r Record) Has(id string) bool { return slices.Contains(r.Notices, id) }
