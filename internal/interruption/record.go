package interruption

import (
	"encoding/json"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/nodes"
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
	*p = Phase(max(slices.Index(phaseNames, string(b)), 0))
	return nil
}

// Record is what Lifeboat remembers about a node's interruption.
type Record struct {
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
	// Notified is set by the write that claims the interruption's one webhook, so notices
	// coalesced into it, other replicas and restarts do not send another.
	Notified bool `json:"notified,omitempty"`
}

// Heartbeat counts the lifecycle heartbeats sent for one notice.
type Heartbeat struct {
	Notice string    `json:"notice"`
	Count  int       `json:"count"`
	Last   time.Time `json:"last"`
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

// ReadRecord returns the node's record; a missing or unreadable one is empty (and the
// unreadable case is reported, since a person may have edited it).
func ReadRecord(n *corev1.Node) (Record, error) {
	var r Record
	raw, ok := n.Annotations[AnnotationRecord]
	if !ok {
		return r, nil
	}
	err := json.Unmarshal([]byte(raw), &r)
	return r, err
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

// Has reports whether the notice was already taken into account.
func (r Record) Has(id string) bool { return slices.Contains(r.Notices, id) }

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
		f(&r)
		b, _ := json.Marshal(r)
		nodes.SetAnnotation(AnnotationRecord, string(b))(n)
	}
}
