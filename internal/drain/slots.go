// SPDX-License-Identifier: Apache-2.0

package drain

import (
	"context"
	"sync"
	"time"

	"lifeboat.dev/lifeboat/internal/waitqueue"
)

// evictionSlots bounds the eviction requests a process has waiting for the request budget or
// at the API server, across all its drains, and hands a freed slot to the waiting drain whose
// deadline is soonest (first come among equals).
//
// Why: the request budget paces what reaches the server, but every eviction waiting for its
// turn used to be a goroutine of its own, parked deep in the HTTP client with the stack that
// takes, one for every pod of an Availability Zone's drains (docs/benchmarks.md). With the
// slots, a drain waits here, in one goroutine, and starts a pod's worker only with a slot.
type evictionSlots struct {
	mu      sync.Mutex
	free    int
	waiters waitqueue.Queue
}

func newEvictionSlots(n int) *evictionSlots { return &evictionSlots{free: n} }

// acquire waits for a slot, or for ctx to end. release gives the slot back; call it once.
func (s *evictionSlots) acquire(ctx context.Context, deadline time.Time) (release func(), err error) {
	s.mu.Lock()
	if s.free > 0 && s.waiters.Len() == 0 {
		s.free--
		s.mu.Unlock()
		return s.releaseFunc(), nil
	}
	w := s.waiters.Add(deadline)
	s.mu.Unlock()
	select {
	case <-w.Ready():
		return s.releaseFunc(), nil
	case <-ctx.Done():
		s.mu.Lock()
		defer s.mu.Unlock()
		if w.Queued() {
			s.waiters.Remove(w)
		} else { // handed a slot just as ctx ended: pass it on
			s.releaseLocked()
		}
		return nil, ctx.Err()
	}
}

func (s *evictionSlots) releaseFunc() func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			s.releaseLocked()
			s.mu.Unlock()
		})
	}
}

// releaseLocked hands the slot to the soonest waiter, or frees it.
func (s *evictionSlots) releaseLocked() {
	if !s.waiters.Serve() {
		s.free++
	}
}
