// SPDX-License-Identifier: Apache-2.0

package record

import (
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/nodes"
)

// AnnotationRepair holds what node repair remembers of a node beyond its episodes (a reboot
// ends the episode it ran in; an operator's uncordon ends another), so that a restart or a
// new leader goes on from it: see Repair.
const AnnotationRepair = nodes.AnnotationPrefix + "node-repair-state"

// maxRepairBytes bounds the annotation read back: it is input, as the record is.
const maxRepairBytes = 16 << 10

// Repair is node repair's memory of one node.
type Repair struct {
	// Started is when the node's last repair started: NODE_REPAIR_MAX_PER_HOUR counts it
	// after its episode ended.
	Started time.Time `json:"started,omitzero"`
}

// Empty reports whether r remembers nothing.
func (r Repair) Empty() bool { return r.Started.IsZero() }

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
	return r, nil
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
