package interruption

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/notice"
)

// AnnotationRecord holds a node's Record. Every Lifeboat process (agent, controller
// replicas, a restarted process) reads the same record, so they continue each other's work
// instead of repeating it.
const AnnotationRecord = nodes.AnnotationPrefix + "interruption"

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

// RecordVersion is the schema of the record this binary writes and understands. Records
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
const RecordVersion = 5

// Record is what Lifeboat remembers about a node's interruption: its open episode (one
// stretch of interruption work: the notices, the phase, the deadline, the webhook claim) and
// the notices released for good.
type Record struct {
	// Version is the schema (RecordVersion); 0 in records written before versions.
	Version int `json:"version,omitempty"`
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
	// Handback is what the drain's hand-back waits for, recorded once one of its waits finds
	// something still held, so that a process that takes over after a restart waits for it
	// too (its own drain finds the node empty and moves nothing).
	Handback *HandbackRecord `json:"handback,omitempty"`
	// Retained is set once a termination hook whose drain could not finish in time was
	// completed with ABANDON and its group retains the instance (see Retention).
	Retained *Retention `json:"retained,omitempty"`
}

// HandbackRecord is what a hand-back waits for beyond the instance itself: the evicted pods'
// claims (their volumes) and IPs (their load-balancer targets).
type HandbackRecord struct {
	Claims []string `json:"claims,omitempty"`
	PodIPs []string `json:"podIPs,omitempty"`
}

// drainWanted reports whether the episode's pending notices need a drain: the node is not
// drained yet, or its drain left pods marked not to disrupt that a reclaim now evicts.
func (r Record) drainWanted(pending []notice.Notice) bool {
	if r.Phase < PhaseDrained {
		return true
	}
	return len(r.Held) > 0 && slices.ContainsFunc(pending, func(n notice.Notice) bool { return n.Kind.Reclaims() })
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
	// Origin is where the Lifeboat that took the notice takes notices from ("imds", or
	// "queue " and the queue's URL): that Lifeboat drives it.
	Origin string `json:"origin,omitempty"`
	// Lifecycle is the Auto Scaling lifecycle action to heartbeat and complete.
	Lifecycle *IntentLifecycle `json:"lifecycle,omitempty"`
}

// IntentLifecycle is notice.Lifecycle in the record. The action is completed by instance id:
// no token is kept (records of version 3 and before kept it; it is dropped on the next write).
type IntentLifecycle struct {
	Group string `json:"group"`
	Hook  string `json:"hook"`
	// LegacyToken is read from older records only, to be dropped.
	LegacyToken string `json:"token,omitempty"`
}

// maxDescription bounds a recorded description: AWS Health descriptions run to paragraphs,
// and a Node's annotations share 256 KiB.
const maxDescription = 512

// intentOf records the notice n, taken from origin.
func intentOf(n notice.Notice, origin string) Intent {
	i := Intent{Origin: origin,
		ID: n.ID, Kind: string(n.Kind), Source: string(n.Source), InstanceID: n.InstanceID, Action: n.Action,
		Deadline: n.Deadline.UTC().Truncate(time.Second), Start: n.StartTime.UTC(), End: n.EndTime.UTC(),
		Description: n.Description, CordonOnly: n.CordonOnly,
	}
	if len(i.Description) > maxDescription {
		i.Description = i.Description[:maxDescription] + "…"
	}
	if lc := n.Lifecycle; lc != nil {
		i.Lifecycle = &IntentLifecycle{Group: lc.Group, Hook: lc.Hook}
	}
	return i
}

// Notice is the notice the intent records.
func (i Intent) Notice() notice.Notice {
	n := notice.Notice{
		ID: i.ID, Kind: notice.Kind(i.Kind), Source: notice.Source(i.Source), InstanceID: i.InstanceID, Action: i.Action,
		Deadline: i.Deadline, StartTime: i.Start, EndTime: i.End, Description: i.Description, CordonOnly: i.CordonOnly,
	}
	if lc := i.Lifecycle; lc != nil {
		n.Lifecycle = &notice.Lifecycle{Group: lc.Group, Hook: lc.Hook}
	}
	return n
}

// intent returns the recorded intent of the notice id.
func (r Record) intent(id string) (Intent, bool) {
	for _, i := range r.Intents {
		if i.ID == id {
			return i, true
		}
	}
	return Intent{}, false
}

// Pending lists the notices of the open episode whose work is not done: recorded, neither
// released nor finished, and whose plan under c drains the node. With an origin, only the
// notices taken from it: an agent and a controller (or two controllers with their own
// queues) on one cluster each drive the notices they took; the record has no owner yet to
// share them safely.
func (r Record) Pending(c *config.Config, origin string) []notice.Notice {
	if !r.Known() || !r.open() {
		return nil
	}
	var out []notice.Notice
	for _, i := range r.Intents {
		if !r.Has(i.ID) || slices.Contains(r.Released, i.ID) || slices.Contains(r.Finished, i.ID) || (origin != "" && i.Origin != origin) {
			continue
		}
		if n := i.Notice(); planFor(n, c).Drain {
			out = append(out, n)
		}
	}
	return out
}

// Outcomes an episode reports.
const (
	OutcomeCordoned = "cordoned"
	OutcomeDrained  = "drained"
)

// reported reports whether the episode's outcome was already reported.
func (r Record) reported(outcome string) bool {
	return slices.Contains(r.Reported, outcome) || (r.Notified && len(r.Reported) == 0)
}

// Heartbeat counts the lifecycle heartbeats sent for one notice.
type Heartbeat struct {
	Notice string    `json:"notice"`
	Count  int       `json:"count"`
	Last   time.Time `json:"last"`
}

// Known reports whether this binary understands the record's schema.
func (r Record) Known() bool { return r.Version <= RecordVersion }

// open reports whether an episode is open: work recorded and not all of it released.
func (r Record) open() bool { return r.Phase > PhaseNone && !r.AllReleased() }

// Open reports whether the record has an open episode this binary understands.
func (r Record) Open() bool { return r.Known() && r.open() }

// EpisodeEnded says why the node's open episode is over, or "" when it is not (or none is
// open): the instance booted again since it opened (Spot stop and hibernate, scheduled
// reboots and stops keep the instance id and the Node, and often the notice id), or someone
// else made the node schedulable again (an operator took it back). The next notice, even one
// seen before, opens a new episode with its own drain, webhook and Event.
func EpisodeEnded(n *corev1.Node, r Record) string {
	if !r.open() {
		return ""
	}
	if bootedAgain(n, r) {
		return "the instance booted again since (boot ID " + r.BootID + " is now " + n.Status.NodeInfo.BootID + ")"
	}
	if !n.Spec.Unschedulable {
		return "someone else made the node schedulable again"
	}
	return ""
}

// BootedAgain reports whether the node has an open episode and a boot other than the one the
// episode opened on.
func BootedAgain(n *corev1.Node, r Record) bool { return r.Known() && r.open() && bootedAgain(n, r) }

// bootedAgain reports whether the node's boot is another than the one its episode opened on.
func bootedAgain(n *corev1.Node, r Record) bool {
	boot := n.Status.NodeInfo.BootID
	return r.BootID != "" && boot != "" && boot != r.BootID
}

// nextEpisode is what is kept of a record when its episode ends: the notices released for
// good (a scheduled reboot's event stays listed after the reboot). When it ended by a new
// boot, the scheduled events of the episode have happened: they are released too, so one
// still reported afterwards is not acted on again. (Spot stop and hibernate notices are not:
// the next one, even with the same id, is a new interruption.)
func (r Record) nextEpisode(booted bool) Record {
	next := Record{Version: RecordVersion, Released: slices.Clone(r.Released)}
	if booted {
		for _, id := range r.Notices {
			if strings.HasPrefix(id, scheduledPrefix) && !slices.Contains(next.Released, id) {
				next.Released = append(next.Released, id)
			}
		}
	}
	return next
}

// scheduledPrefix starts the ids of scheduled-maintenance notices (notice.ID).
var scheduledPrefix = notice.ID(notice.ScheduledMaintenance, "x", "")[:len("sched-")]

// openEpisode is the first edit of every write that records a notice: it ends an episode that
// is over (see EpisodeEnded), decided on the node being written so that a retry after a
// conflict decides afresh, and notes the boot an opening episode belongs to. It sets *ended
// to why the previous episode ended, if it did.
func openEpisode(ended *string) nodes.Edit {
	return func(n *corev1.Node) {
		r, _ := ReadRecord(n)
		if !r.Known() {
			*ended = ""
			return // a newer binary's record is never rewritten
		}
		*ended = EpisodeEnded(n, r)
		if *ended != "" {
			r = r.nextEpisode(bootedAgain(n, r))
		}
		if !r.open() {
			r.BootID = n.Status.NodeInfo.BootID
		}
		r.Version = RecordVersion
		writeRecord(n, r)
	}
}

// AllReleased reports whether every notice in the record has been released.
func (r Record) AllReleased() bool {
	for _, id := range r.Notices {
		if !slices.Contains(r.Released, id) {
			return false
		}
	}
	return len(r.Notices) > 0
}

// ReadRecord returns the node's record. A missing one is empty; so is one that cannot be read
// or fails validation (see validate), together with the error saying why: the annotation is
// input any credential that may write the Node can forge, so nothing of such a record is
// acted on, and the next notice for the node starts a fresh one. A record of a newer schema
// is returned with only its version, so that it is left alone.
func ReadRecord(n *corev1.Node) (Record, error) {
	raw, ok := n.Annotations[AnnotationRecord]
	if !ok {
		return Record{}, nil
	}
	if len(raw) > maxRecordBytes {
		return Record{}, fmt.Errorf("annotation %s: %d bytes, more than the %d a record may have", AnnotationRecord, len(raw), maxRecordBytes)
	}
	var v struct {
		Version int `json:"version"`
	}
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		return Record{}, fmt.Errorf("annotation %s: %w", AnnotationRecord, err)
	}
	if v.Version > RecordVersion {
		return Record{Version: v.Version}, nil
	}
	var r Record
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		return Record{}, fmt.Errorf("annotation %s: %w", AnnotationRecord, err)
	}
	if err := r.validate(InstanceIDOf(n)); err != nil {
		return Record{}, fmt.Errorf("annotation %s: %w", AnnotationRecord, err)
	}
	for _, i := range r.Intents {
		if i.Lifecycle != nil {
			i.Lifecycle.LegacyToken = "" // never carried further, and never written back
		}
	}
	return r, nil
}

// Done reports whether the notice needs no more work: finished after a drain, or (for a plan
// without one) the node cordoned for it.
func (r Record) Done(id string, drains bool) bool {
	if !r.Has(id) {
		return false
	}
	if drains {
		return r.Phase == PhaseDrained && slices.Contains(r.Finished, id)
	}
	return r.Phase >= PhaseCordoned
}

// matchLegacyID gives n the id an earlier release recorded it under, when the record holds
// that form and not the current one: a message from before a rollout, delivered again, is
// then the notice already recorded rather than a second one.
func (r Record) matchLegacyID(n notice.Notice) notice.Notice {
	if n.LegacyID == "" || n.LegacyID == n.ID || r.Has(n.ID) || slices.Contains(r.Released, n.ID) {
		return n
	}
	if r.Has(n.LegacyID) || slices.Contains(r.Released, n.LegacyID) {
		n.ID = n.LegacyID
	}
	return n
}

// Has reports whether the notice was already taken into account.
func (r Record) Has(id string) bool { return slices.Contains(r.Notices, id) }

// intentEdit records the notice's intent, taken from origin. A copy of a recorded notice
// changes nothing (the first copy's deadline stands: a rebalance's is counted from its
// receipt), except that a copy with a readable start replaces a cordon-only one, whose drain
// it then schedules, and that a restated notice (an AWS Health update) moves its start (see
// moveStart). grace is NODE_TERMINATION_GRACE_PERIOD: a scheduled drain begins that long
// before the start.
func intentEdit(n notice.Notice, origin string, grace time.Duration) nodes.Edit {
	return editRecord(func(r *Record) {
		i := slices.IndexFunc(r.Intents, func(i Intent) bool { return i.ID == n.ID })
		switch {
		case i < 0:
			r.Intents = append(r.Intents, intentOf(n, origin))
		case r.Intents[i].CordonOnly != "" && n.CordonOnly == "":
			r.Intents[i] = intentOf(n, origin)
		case n.Restated() && n.CordonOnly == "" && !n.Deadline.IsZero():
			r.moveStart(i, n, grace, time.Now())
		}
	})
}

// moveStart applies an update of the notice recorded as intent i that states another start.
// While the notice's drain has not begun, the start and deadline move either way (a change
// postponed or brought forward); once it has begun, only an earlier start counts, and
// tightens the deadline: pods already evicted are not brought back, and the instance may
// still go at the earlier time.
func (r *Record) moveStart(i int, n notice.Notice, grace time.Duration, now time.Time) {
	old := r.Intents[i]
	deadline := n.Deadline.UTC().Truncate(time.Second)
	if deadline.Equal(old.Deadline) {
		return
	}
	begun := r.Owner != nil || r.Phase >= PhaseDrained || slices.Contains(r.Finished, old.ID) ||
		!now.Before(old.Deadline.Add(-grace))
	if begun {
		if deadline.Before(old.Deadline) {
			r.Intents[i].Deadline, r.Intents[i].Start = deadline, n.StartTime.UTC()
		}
		return
	}
	moved := intentOf(n, old.Origin)
	moved.Lifecycle = old.Lifecycle
	r.Intents[i] = moved
	// The episode's deadline is the earliest of its notices': recount it without the old one.
	if !r.Deadline.Equal(old.Deadline) && !r.Deadline.After(deadline) {
		return
	}
	earliest := deadline
	for _, o := range r.Intents {
		if o.ID != old.ID && !o.Deadline.IsZero() && !slices.Contains(r.Released, o.ID) && o.Deadline.Before(earliest) {
			earliest = o.Deadline
		}
	}
	r.Deadline = earliest
}

// recordEdit adds the notice to the node's record and moves the phase forward (never back),
// keeping the earliest deadline. Re-applying it changes nothing, so a repeated notice
// writes nothing.
func recordEdit(id string, phase Phase, deadline time.Time) nodes.Edit {
	return editRecord(func(r *Record) {
		if !r.Has(id) {
			r.Notices = append(r.Notices, id)
		}
		if phase == PhaseDrained && !slices.Contains(r.Finished, id) {
			r.Finished = append(r.Finished, id)
		}
		r.Phase = max(r.Phase, phase)
		if !deadline.IsZero() && (r.Deadline.IsZero() || deadline.Before(r.Deadline)) {
			r.Deadline = deadline.UTC().Truncate(time.Second)
		}
	})
}

// editRecord changes the node's record through f.
func editRecord(f func(*Record)) nodes.Edit {
	return func(n *corev1.Node) {
		r, _ := ReadRecord(n)
		if !r.Known() {
			return // a newer binary's record is never rewritten
		}
		f(&r)
		writeRecord(n, r)
	}
}

func writeRecord(n *corev1.Node, r Record) {
	if r.Version == 0 {
		r.Version = RecordVersion
	}
	for _, i := range r.Intents {
		if i.Lifecycle != nil {
			i.Lifecycle.LegacyToken = ""
		}
	}
	b, _ := json.Marshal(r)
	nodes.SetAnnotation(AnnotationRecord, string(b))(n)
}

// CountEpisodes counts, among nodes (*corev1.Node, as an informer's store lists them), those
// in an open episode by phase, and the pods marked not to disrupt their drains left.
func CountEpisodes(nodes []any) metrics.Episodes {
	e := metrics.Episodes{ByPhase: map[string]int{}}
	for _, o := range nodes {
		n, ok := o.(*corev1.Node)
		if !ok || n.Annotations[AnnotationRecord] == "" {
			continue
		}
		r, err := ReadRecord(n)
		if err != nil || !r.Open() {
			continue
		}
		e.ByPhase[r.Phase.String()]++
		e.PodsHeld += len(r.Held)
	}
	return e
}
