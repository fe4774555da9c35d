// SPDX-License-Identifier: Apache-2.0

// Package waitqueue is a queue of waiters served soonest due first, then first come. The
// request budget's lanes (kube/pacing) and the drain's eviction slots both hand out turns
// this way. A Queue is not safe for concurrent use: its owner guards it with its own lock.
package waitqueue

import (
	"container/heap"
	"time"
)

// Waiter is one waiter in a Queue.
type Waiter struct {
	due   time.Time
	order uint64
	index int // in the heap; -1 once served or removed
	ready chan struct{}
}

// Ready is closed when the waiter is served.
func (w *Waiter) Ready() <-chan struct{} { return w.ready }

// Queued is true while the waiter waits: false once it is served or removed.
func (w *Waiter) Queued() bool { return w.index >= 0 }

// Queue holds waiters in the order they are served.
type Queue struct {
	heap    byDue
	arrived uint64
}

// Len is how many wait.
func (q *Queue) Len() int { return len(q.heap) }

// Add queues a waiter due at due; among waiters due at the same time, the first added is served first.
func (q *Queue) Add(due time.Time) *Waiter {
	q.arrived++
	w := &Waiter{due: due, order: q.arrived, ready: make(chan struct{})}
	heap.Push(&q.heap, w)
	return w
}

// Remove takes a waiter out of the queue unserved; it does nothing to one no longer queued.
func (q *Queue) Remove(w *Waiter) {
	if w.Queued() {
		heap.Remove(&q.heap, w.index)
	}
}

// Serve takes the soonest due waiter out of the queue and closes its Ready channel. It
// returns false, serving nothing, when the queue is empty.
func (q *Queue) Serve() bool {
	if len(q.heap) == 0 {
		return false
	}
	close(heap.Pop(&q.heap).(*Waiter).ready)
	return true
}

// byDue is the heap: soonest due first, then first added.
type byDue []*Waiter

func (h byDue) Len() int { return len(h) }

func (h byDue) Less(i, j int) bool {
	if !h[i].due.Equal(h[j].due) {
		return h[i].due.Before(h[j].due)
	}
	return h[i].order < h[j].order
}

func (h byDue) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}

func (h *byDue) Push(x any) {
	w := x.(*Waiter)
	w.index = len(*h)
	*h = append(*h, w)
}

func (h *byDue) Pop() any {
	old := *h
	w := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	w.index = -1
	return w
}
