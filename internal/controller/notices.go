// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"container/heap"
	"context"
	"log/slog"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/panics"
)

// noticePool is how runNotices works: at most workers notices at once, the backoff of a notice
// retried in place, and where a notice's panic is logged and counted.
type noticePool struct {
	workers int
	backoff wait.Backoff
	log     *slog.Logger
	panics  panics.Counter
}

// runNotices handles the notices of one message with at most p.workers of them at once (an
// AWS Health event may name thousands of instances), and returns each notice's fate. A notice
// whose handling panics is retried as one that failed: its siblings go on, and no worker is
// lost.
//
// A notice that fails transiently (noticeRetry) is tried again in place, after backoff, while
// some notice of the message has not had its first try yet: the message's own retry comes
// only once all are over, which for a message naming thousands of instances takes a while.
// While it waits it holds no worker. Once every notice has had its first try, a notice still
// waiting gets one more try when it is due, and a failure then leaves the retry to the
// message: notices that keep failing never hold the message between them. A notice never
// handled because ctx ended is noticeCancelled.
func runNotices(ctx context.Context, notices []notice.Notice, p noticePool, handle func(context.Context, notice.Notice) noticeFate) []noticeFate {
	r := &noticeRun{
		notices: notices, handle: handle, backoff: p.backoff, log: p.log, panics: p.panics,
		fates:   make([]noticeFate, len(notices)),
		tried:   make([]bool, len(notices)),
		untried: len(notices),
		ready:   make([]int, len(notices)),
		changed: make(chan struct{}),
	}
	for i := range notices {
		r.fates[i] = noticeCancelled
		r.ready[i] = i
	}
	workers := min(max(p.workers, 1), len(notices))
	var wg sync.WaitGroup
	for range workers - 1 {
		wg.Go(func() { r.work(ctx) })
	}
	if workers > 0 {
		r.work(ctx) // the caller is one of the workers
	}
	wg.Wait()
	return r.fates
}

// noticeRun is the state of one runNotices.
type noticeRun struct {
	notices []notice.Notice
	handle  func(context.Context, notice.Notice) noticeFate
	backoff wait.Backoff
	log     *slog.Logger
	panics  panics.Counter

	mu      sync.Mutex
	fates   []noticeFate
	tried   []bool    // the notice's first try is over
	untried int       // notices whose first try is not over
	ready   []int     // notices to handle now, in turn
	waiting retryHeap // notices waiting for their retry, the soonest first
	waits   map[int]*wait.Backoff
	busy    int           // notices being handled
	changed chan struct{} // closed (and replaced) when there is something new to look at
}

// work handles ready notices until the run is over or ctx ends.
func (r *noticeRun) work(ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for ctx.Err() == nil {
		now := time.Now()
		for len(r.waiting) > 0 && !r.waiting[0].due.After(now) {
			r.ready = append(r.ready, heap.Pop(&r.waiting).(retryAt).notice)
		}
		if len(r.ready) > 0 {
			i := r.ready[0]
			r.ready = r.ready[1:]
			r.busy++
			r.mu.Unlock()
			fate := r.handleSafely(ctx, i)
			r.mu.Lock()
			r.busy--
			if !r.tried[i] {
				r.tried[i] = true
				r.untried--
			}
			if fate == noticeRetry && ctx.Err() == nil && r.untried > 0 {
				heap.Push(&r.waiting, retryAt{notice: i, due: time.Now().Add(r.pause(i))})
			} else {
				r.fates[i] = fate
			}
			r.wake()
			continue
		}
		if r.busy == 0 && len(r.waiting) == 0 {
			return // every notice has its fate
		}
		// Wait for another worker's notice to end, the next retry, or the end.
		changed := r.changed
		var timer *time.Timer
		var due <-chan time.Time
		if len(r.waiting) > 0 {
			timer = time.NewTimer(time.Until(r.waiting[0].due))
			due = timer.C
		}
		r.mu.Unlock()
		select {
		case <-changed:
		case <-due:
		case <-ctx.Done():
		}
		if timer != nil {
			timer.Stop()
		}
		r.mu.Lock()
	}
}

// handleSafely handles notice i; a panic is the notice's failure, retried as an error is.
// Recovered here, it cannot take the worker (or the message's caller) with it, nor leave
// the run's lock and count of busy notices wrong.
func (r *noticeRun) handleSafely(ctx context.Context, i int) (fate noticeFate) {
	fate = noticeRetry // what a panic leaves
	defer panics.Recover(panics.Notice, r.log, r.panics, nil, "notice", r.notices[i].ID, "instance", r.notices[i].InstanceID)
	return r.handle(ctx, r.notices[i])
}

// pause is how long notice i waits before its next try.
func (r *noticeRun) pause(i int) time.Duration {
	if r.waits == nil {
		r.waits = map[int]*wait.Backoff{}
	}
	b, ok := r.waits[i]
	if !ok {
		copied := r.backoff
		b = &copied
		r.waits[i] = b
	}
	return b.Step()
}

// wake tells the idle workers to look again. Called with mu held.
func (r *noticeRun) wake() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// retryAt is a notice waiting for its retry.
type retryAt struct {
	notice int
	due    time.Time
}

// retryHeap orders waiting notices by when their retry is due.
type retryHeap []retryAt

func (h retryHeap) Len() int           { return len(h) }
func (h retryHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h retryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *retryHeap) Push(x any)        { *h = append(*h, x.(retryAt)) }
func (h *retryHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
