// SPDX-License-Identifier: Apache-2.0

package record

import (
	"slices"
	"time"
)

// Owner is the Lifeboat that drains the node's episode, and when it last said so. Two
// Lifeboats of different origins (an agent and a controller, or controllers reading their
// own queues) can each hold notices for one node; the owner drains, the others wait for the
// drain and then only finish their own notices. An owner that stops renewing (its process
// died) is taken over once its lease runs out. Processes of one origin follow each other
// (a restarted agent, a new leader) and take over from their predecessor at once.
type Owner struct {
	Origin  string    `json:"origin"`
	Holder  string    `json:"holder,omitempty"`
	Renewed time.Time `json:"renewed"`
	// Contested is when a Lifeboat of another origin, with a drain of its own to do, first
	// found the claim. Renewals matter only to such a Lifeboat: an owner that follows the
	// node's updates (the controller) renews only from then on, and the lease runs from the
	// later of the two times. Zero while nobody waits.
	Contested time.Time `json:"contested,omitzero"`
}

// LeaseStart is when the owner's lease last started: its last renewal, or the contest that asked
// it to renew.
func (o Owner) LeaseStart() time.Time {
	if o.Contested.After(o.Renewed) {
		return o.Contested
	}
	return o.Renewed
}

// OpenFrom reports whether a notice taken from origin is open in the episode: recorded,
// neither finished nor released.
func (r Record) OpenFrom(origin string) bool {
	for _, i := range r.Intents {
		if i.Origin == origin && r.Has(i.ID) && !slices.Contains(r.Finished, i.ID) && !slices.Contains(r.Released, i.ID) {
			return true
		}
	}
	return false
}
