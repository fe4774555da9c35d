// SPDX-License-Identifier: Apache-2.0

package record

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/nodes"
)

// AnnotationRepair holds what node repair remembers of a node beyond its episodes (a reboot
// ends the episode it ran in; an operator's uncordon ends another), so that a restart or a
// new leader goes on from it: see Repair.
const AnnotationRepair = nodes.AnnotationPrefix + "node-repair-state"

// Bounds on the annotation read back: it is input, as the record is.
const (
	maxRepairBytes  = 16 << 10
	maxRepairClocks = 32  // a node has a few dozen conditions at most
	maxConditionTyp = 316 // a qualified name
	maxRepairTaken  = 512 // a notice id and a time
)

// Repair is node repair's memory of one node.
type Repair struct {
	// Started is when the node's last repair started: NODE_REPAIR_MAX_PER_HOUR counts it
	// after its episode ended.
	Started time.Time `json:"started,omitzero"`
	// Clocks keep the time a condition took its status when its agent restated the
	// transition time under the same status (a new reason, a restart of the agent): the
	// repair's wait still counts from the first.
	Clocks []ConditionClock `json:"clocks,omitempty"`
	// Reboot is the reboot step of a repair whose policy reboots: the reboot ends the episode
	// it ran in, and what comes next (released, or replaced) is decided from it.
	Reboot *RepairReboot `json:"reboot,omitempty"`
	// Taken is the node's last repair taken, as its notice id and the time its condition took
	// its status (id@RFC 3339): a restart or a new leader does not take it again during the
	// same spell, when its episode was ended by someone else (an operator's uncordon).
	Taken string `json:"taken,omitempty"`
}

// RepairReboot is the reboot step of a node's repair for one condition.
type RepairReboot struct {
	Condition string `json:"condition"`
	// Taken is when the reboot's repair was recorded (before the drain).
	Taken time.Time `json:"taken"`
	// Rebooted is when RebootInstances was asked for, once the node was drained.
	Rebooted time.Time `json:"rebooted,omitzero"`
	// Failed says why the reboot could not be asked for: the next step follows at once.
	Failed string `json:"failed,omitempty"`
}

// ConditionClock is since when a condition has had Status, kept when the condition's own
// lastTransitionTime moved to Restated without a change of status.
type ConditionClock struct {
	Type     string    `json:"type"`
	Status   string    `json:"status"`
	Since    time.Time `json:"since"`
	Restated time.Time `json:"restated"`
}

// Clock is the kept clock of the condition type, if any.
func (r Repair) Clock(typ string) (ConditionClock, bool) {
	for _, c := range r.Clocks {
		if c.Type == typ {
			return c, true
		}
	}
	return ConditionClock{}, false
}

// SetClock keeps c, in place of the type's clock kept before.
func (r *Repair) SetClock(c ConditionClock) {
	r.DropClock(c.Type)
	r.Clocks = append(r.Clocks, c)
}

// DropClock forgets the type's clock.
func (r *Repair) DropClock(typ string) {
	r.Clocks = slices.DeleteFunc(r.Clocks, func(c ConditionClock) bool { return c.Type == typ })
}

// Empty reports whether r remembers nothing.
func (r Repair) Empty() bool {
	return r.Started.IsZero() && len(r.Clocks) == 0 && r.Reboot == nil && r.Taken == ""
}

// ReadRepair returns the node's repair memory; a missing one is empty, and so is one that
// cannot be read (with the error saying why).
func ReadRepair(n *corev1.Node) (Repair, error) {
	raw, ok := n.Annotations[AnnotationRepair]
	if !ok {
		return Repair{}, nil
	}
	if len(raw) > maxRepairBytes {
		return Repair{}, fmt.Errorf("annotation %s: %d bytes, more than the %d it may have", AnnotationRepair, len(raw), maxRepairBytes)
	}
	var r Repair
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		return Repair{}, fmt.Errorf("annotation %s: %w", AnnotationRepair, err)
	}
	if err := validateRepair(r); err != nil {
		return Repair{}, fmt.Errorf("annotation %s: %w", AnnotationRepair, err)
	}
	return r, nil
}

// validateRepair bounds what a repair memory read from a Node may hold.
func validateRepair(r Repair) error {
	if len(r.Clocks) > maxRepairClocks {
		return fmt.Errorf("%d clocks, more than %d", len(r.Clocks), maxRepairClocks)
	}
	if len(r.Taken) > maxRepairTaken {
		return fmt.Errorf("taken: %d bytes, more than %d", len(r.Taken), maxRepairTaken)
	}
	if b := r.Reboot; b != nil && (b.Condition == "" || len(b.Condition) > maxConditionTyp || len(b.Failed) > maxDescription) {
		return fmt.Errorf("reboot: the condition type is empty or longer than %d, or its failure longer than %d", maxConditionTyp, maxDescription)
	}
	for i, c := range r.Clocks {
		switch {
		case c.Type == "" || len(c.Type) > maxConditionTyp:
			return fmt.Errorf("clocks[%d]: the condition type is empty or longer than %d", i, maxConditionTyp)
		case !slices.Contains([]string{"True", "False", "Unknown"}, c.Status):
			return fmt.Errorf("clocks[%d]: status %q is not True, False or Unknown", i, clipValue(c.Status))
		case c.Since.IsZero() || c.Restated.Before(c.Since):
			return fmt.Errorf("clocks[%d]: since %s is not before the restated %s", i, c.Since, c.Restated)
		}
	}
	return nil
}

// RepairEdit changes the node's repair memory as read from the node being written (one that
// cannot be read starts empty), and removes the annotation once it remembers nothing.
func RepairEdit(change func(*Repair)) nodes.Edit {
	return func(n *corev1.Node) {
		r, _ := ReadRepair(n)
		change(&r)
		if r.Empty() {
			delete(n.Annotations, AnnotationRepair)
			return
		}
		b, _ := json.Marshal(r)
		nodes.SetAnnotation(AnnotationRepair, string(b))(n)
	}
}
