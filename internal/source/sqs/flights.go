// SPDX-License-Identifier: Apache-2.0

package sqs

import (
	"sync"
	"time"
)

// flight is one message being handled. handle is guarded by flights.mu.
type flight struct {
	msg    Message
	handle string // the newest receipt handle: older ones may no longer delete the message
}

// flights is the consumer's bookkeeping of the messages it holds: those whose handler (or
// delete) is running, by message id, and the ids of those it deleted lately. SQS delivers at
// least once, so a copy of a message may arrive while its first is still handled, or after it
// was deleted; flights tells the consumer which.
type flights struct {
	ttl time.Duration // how long a deleted message's id is remembered
	now func() time.Time

	mu         sync.Mutex
	running    map[string]*flight   // by message id
	tombstones map[string]time.Time // ids of messages deleted after Done, until when to remember them
	nextPrune  time.Time
}

func newFlights(ttl time.Duration, now func() time.Time) *flights {
	return &flights{ttl: ttl, now: now, running: map[string]*flight{}, tombstones: map[string]time.Time{}}
}

// start tracks a received message. It returns the flight to hand to a worker for a new
// message; nil for a message already being handled, whose newest receipt handle it records
// (again is then true); and, for a message deleted lately, the handle to delete this copy with.
func (fs *flights) start(msg Message, handle string) (f *flight, again bool, deleteAgain string) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if cur, ok := fs.running[msg.ID]; ok {
		cur.handle = handle
		return nil, true, ""
	}
	if until, ok := fs.tombstones[msg.ID]; ok && fs.now().Before(until) {
		return nil, false, handle
	}
	f = &flight{msg: msg, handle: handle}
	fs.running[msg.ID] = f
	return f, false, ""
}

// latest is the newest receipt handle of f: every call on its message uses it.
func (fs *flights) latest(f *flight) string {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return f.handle
}

// end stops tracking f. After its delete (deleted), its id is remembered for the ttl, so that
// a copy whose delete did not take is deleted rather than handled again.
func (fs *flights) end(f *flight, deleted bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	delete(fs.running, f.msg.ID)
	if !deleted {
		return
	}
	now := fs.now()
	fs.tombstones[f.msg.ID] = now.Add(fs.ttl)
	if now.After(fs.nextPrune) {
		for id, until := range fs.tombstones {
			if !now.Before(until) {
				delete(fs.tombstones, id)
			}
		}
		fs.nextPrune = now.Add(fs.ttl / 4)
	}
}
