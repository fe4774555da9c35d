package drain

import (
	"container/heap"
	"context"
	"sync"
	"time"
)

// evictionSlots bounds the eviction requests a process has waiting for the request budget or
// at the API server, across all its drains, and hands a freed slot to the waiting drain whose
// deadline is soonest (first come among equals).
//
// Why: the request budget paces what reaches the server, but every eviction waiting for its
// turn used to be a goroutine of its own, parked deep in the HTTP client with the stack that
// takes: an Availability Zone's drains made tens of thousands of goroutines
// (docs/design/pacing.md). With the slots, a drain waits here, in one goroutine, and starts a pod's worker only with a slot.
type evictionSlots struct {
	mu      sync.Mutex
	free    int
	waiters slotQueue
	seq     uint64
}

func newEvictionSlots(n int) *evictionSlots { return &evictionSlots{free: n} }

// acquire waits for a slot, or for ctx to end. release gives the slot back; call it once.
func (s *evictionSlots) acquire(ctx context.Context, deadline time.Time) (release func(), err error) {
	s.mu.Lock()
	if s.free > 0 && len(s.waiters) == 0 {
		s.free--
		s.mu.Unlock()
		return s.releaseFunc(), nil
	}
	w := &slotWaiter{deadline: deadline, seq: s.seq, ready: make(chan struct{})}
	s.seq++
	heap.Push(&s.waiters, w)
	s.mu.Unlock()
	select {
	case <-w.ready:
		return s.releaseFunc(), nil
	case <-ctx.Done():
		s.mu.Lock()
		defer s.mu.Unlock()
		if w.index < 0 { // handed a slot just as ctx ended: pass it on
			s.releaseLocked()
		} else {
			heap.Remove(&s.waiters, w.index)
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
	if len(s.waiters) == 0 {
		s.free++
		return
	}
	w := heap.Pop(&s.waiters).(*slotWaiter)
	close(w.ready)
}

type slotWaiter struct {
	deadline time.Time
	seq      uint64
	index    int // in the heap; -1 once handed a slot
	ready    chan struct{}
}

// slotQueue is a heap of waiters, soonest deadline first, then first come.
type slotQueue []*slotWaiter

func (q slotQueue) Len() int { return len(q) }
func (q slotQueue) Less(i, j int) bool {
	if !q[i].deadline.Equal(q[j].deadline) {
		return q[i].deadline.Before(q[j].deadline)
	}
	return q[i].seq < q[j].seq
}
func (q slotQueue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index, q[j].index = i, j
}
func (q *slotQueue) Push(x any) {
	w := x.(*slotWaiter)
	w.index = len(*q)
	*q = append(*q, w)
}
func (q *slotQueue) Pop() any {
	old := *q
	w := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	w.index = -1
	return w
}
