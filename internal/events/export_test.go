// SPDX-License-Identifier: Apache-2.0

package events

// DropCounts counts what a recorder reports as dropped, by object and reason (a DropCounter
// for the tests against the API server).
type DropCounts = dropCounts

// All is every count so far, keyed "object reason".
func (d *DropCounts) All() map[string]int { return d.all() }
