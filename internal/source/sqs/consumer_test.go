// SPDX-License-Identifier: Apache-2.0

package sqs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"lifeboat.dev/lifeboat/internal/panics/panicstest"
)

// unit is what the fake queue (and the consumers under test) call a second, so that
// visibility timeouts of a few "seconds" take tens of milliseconds.
const unit = 10 * time.Millisecond

// fakeQueue is an in-memory queue with the SQS semantics the consumer depends on: a received
// message is invisible for the visibility timeout, then delivered again; every receive gives a
// new receipt handle; only the newest handle deletes or changes the message (an older handle's
// delete "succeeds" without deleting, as SQS may do); ApproximateReceiveCount counts receives.
type fakeQueue struct {
	mu           sync.Mutex
	msgs         []*fakeMsg
	seq          int
	receiveErr   error // when set, every receive fails with it
	receives     int   // ReceiveMessage calls
	maxRequested int32 // largest MaxNumberOfMessages asked for
	dropDeletes  int   // this many deletes "succeed" without deleting
	deleted      []fakeDelete
	staleDeletes int // deletes with a handle that was no longer the newest
	changes      []fakeChange
	staleChanges int
	delivered    map[string]int      // receives per message id, kept after the delete
	failDeletes  int                 // this many deletes fail with a server error
	beforeDelete func(handle string) // called (unlocked) at the start of every delete
	changed      chan struct{}       // closed and replaced at every call and change
}

type fakeMsg struct {
	id, body  string
	sent      time.Time
	handle    string   // newest receipt handle
	handles   []string // all handles, oldest first
	visibleAt time.Time
	receives  int
}

type fakeDelete struct{ id, handle string }

type fakeChange struct {
	id, handle string
	secs       int32
}

func (q *fakeQueue) send(bodies ...string) []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	var ids []string
	for _, b := range bodies {
		q.seq++
		m := &fakeMsg{id: "m" + strconv.Itoa(q.seq), body: b, sent: time.Now()}
		q.msgs = append(q.msgs, m)
		ids = append(ids, m.id)
	}
	q.bumpLocked()
	return ids
}

func (q *fakeQueue) find(id string) *fakeMsg {
	for _, m := range q.msgs {
		if m.id == id {
			return m
		}
	}
	return nil
}

// redeliver makes a message visible at once, as if its visibility timeout had run out.
func (q *fakeQueue) redeliver(id string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if m := q.find(id); m != nil {
		m.visibleAt = time.Now()
	}
	q.bumpLocked()
}

func (q *fakeQueue) setReceiveErr(err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.receiveErr = err
	q.bumpLocked()
}

// stats returns a copy of the counters under the lock.
func (q *fakeQueue) stats() (left, receives int, deleted []fakeDelete, staleDeletes int, changes []fakeChange) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.msgs), q.receives, append([]fakeDelete(nil), q.deleted...), q.staleDeletes, append([]fakeChange(nil), q.changes...)
}

func (q *fakeQueue) msgReceives(id string) (receives int, handles []string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if m := q.find(id); m != nil {
		return m.receives, append([]string(nil), m.handles...)
	}
	return -1, nil
}

// bumpLocked tells waitUntil's callers that something happened; q.mu is held.
func (q *fakeQueue) bumpLocked() {
	if q.changed != nil {
		close(q.changed)
	}
	q.changed = make(chan struct{})
}

// waitUntil waits until cond holds, checking it again at each call the queue answers and
// each change made to it, and reports whether it held within limit. On a bubble's clock:
// the consumer's timers fire as soon as everything waits for them.
func (q *fakeQueue) waitUntil(limit time.Duration, cond func() bool) bool {
	timeout := time.After(limit)
	for {
		q.mu.Lock()
		if q.changed == nil {
			q.changed = make(chan struct{})
		}
		changed := q.changed
		q.mu.Unlock()
		if cond() {
			return true
		}
		select {
		case <-changed:
		case <-timeout:
			return false
		}
	}
}

// eventually waits until cond holds, and fails the test if an hour of the bubble's clock
// passes first.
func (q *fakeQueue) eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if !q.waitUntil(time.Hour, cond) {
		t.Fatalf("%s: not within an hour of the queue's clock", what)
	}
}

func (q *fakeQueue) ReceiveMessage(ctx context.Context, in *awssqs.ReceiveMessageInput, _ ...func(*awssqs.Options)) (*awssqs.ReceiveMessageOutput, error) {
	deadline := time.Now().Add(time.Duration(in.WaitTimeSeconds) * unit)
	q.mu.Lock()
	q.receives++
	q.maxRequested = max(q.maxRequested, in.MaxNumberOfMessages)
	err := q.receiveErr
	q.bumpLocked()
	q.mu.Unlock()
	if err != nil {
		return nil, err
	}
	for {
		if out := q.take(in); len(out.Messages) > 0 || !time.Now().Before(deadline) {
			return out, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
}

func (q *fakeQueue) take(in *awssqs.ReceiveMessageInput) *awssqs.ReceiveMessageOutput {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := &awssqs.ReceiveMessageOutput{}
	now := time.Now()
	vis := time.Duration(in.VisibilityTimeout) * unit
	if in.VisibilityTimeout == 0 {
		vis = 30 * unit
	}
	for _, m := range q.msgs {
		if int32(len(out.Messages)) >= max(in.MaxNumberOfMessages, 1) {
			break
		}
		if now.Before(m.visibleAt) {
			continue
		}
		m.receives++
		if q.delivered == nil {
			q.delivered = map[string]int{}
		}
		q.delivered[m.id]++
		q.seq++
		m.handle = fmt.Sprintf("%s-h%d", m.id, q.seq)
		m.handles = append(m.handles, m.handle)
		m.visibleAt = now.Add(vis)
		out.Messages = append(out.Messages, types.Message{
			MessageId:     aws.String(m.id),
			Body:          aws.String(m.body),
			ReceiptHandle: aws.String(m.handle),
			Attributes: map[string]string{
				"ApproximateReceiveCount": strconv.Itoa(m.receives),
				"SentTimestamp":           strconv.FormatInt(m.sent.UnixMilli(), 10),
			},
		})
	}
	if len(out.Messages) > 0 {
		q.bumpLocked()
	}
	return out
}

// byHandle finds the message a handle was issued for; latest says whether it is the newest.
func (q *fakeQueue) byHandle(h string) (m *fakeMsg, latest bool) {
	for _, m := range q.msgs {
		for _, old := range m.handles {
			if old == h {
				return m, m.handle == h
			}
		}
	}
	return nil, false
}

func (q *fakeQueue) DeleteMessage(_ context.Context, in *awssqs.DeleteMessageInput, _ ...func(*awssqs.Options)) (*awssqs.DeleteMessageOutput, error) {
	q.mu.Lock()
	hook := q.beforeDelete
	q.mu.Unlock()
	if hook != nil {
		hook(aws.ToString(in.ReceiptHandle))
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	defer q.bumpLocked()
	if q.failDeletes > 0 {
		q.failDeletes--
		return nil, &smithy.GenericAPIError{Code: "InternalError", Message: "try again", Fault: smithy.FaultServer}
	}
	h := aws.ToString(in.ReceiptHandle)
	m, latest := q.byHandle(h)
	switch {
	case m == nil:
		return nil, &smithy.GenericAPIError{Code: "ReceiptHandleIsInvalid", Message: "unknown handle " + h}
	case !latest:
		q.staleDeletes++
		return &awssqs.DeleteMessageOutput{}, nil // "succeeds", deletes nothing
	case q.dropDeletes > 0:
		q.dropDeletes--
		return &awssqs.DeleteMessageOutput{}, nil
	}
	for i, x := range q.msgs {
		if x == m {
			q.msgs = append(q.msgs[:i], q.msgs[i+1:]...)
			break
		}
	}
	q.deleted = append(q.deleted, fakeDelete{id: m.id, handle: h})
	return &awssqs.DeleteMessageOutput{}, nil
}

func (q *fakeQueue) ChangeMessageVisibility(_ context.Context, in *awssqs.ChangeMessageVisibilityInput, _ ...func(*awssqs.Options)) (*awssqs.ChangeMessageVisibilityOutput, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	defer q.bumpLocked()
	h := aws.ToString(in.ReceiptHandle)
	m, latest := q.byHandle(h)
	if m == nil || !latest {
		q.staleChanges++
		return nil, &smithy.GenericAPIError{Code: "ReceiptHandleIsInvalid", Message: "not the newest handle " + h}
	}
	q.changes = append(q.changes, fakeChange{id: m.id, handle: h, secs: in.VisibilityTimeout})
	m.visibleAt = time.Now().Add(time.Duration(in.VisibilityTimeout) * unit)
	return &awssqs.ChangeMessageVisibilityOutput{}, nil
}

// testConsumer is a consumer on the fake's time scale.
func testConsumer(api API, opts ConsumerOptions) *Consumer {
	opts.QueueURL = "http://queue.test/000000000000/q"
	if opts.VisibilityTimeout == 0 {
		opts.VisibilityTimeout = 8 * unit
	}
	if opts.WaitTime == 0 {
		opts.WaitTime = 5 * unit
	}
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	c := NewConsumer(api, opts)
	c.second = unit
	c.backoffMin = 5 * time.Millisecond
	c.backoffMax = 20 * time.Millisecond
	c.deleteBackoff = time.Millisecond
	return c
}

// start runs c with h; the returned function stops it and checks that Run returned nil in time.
func start(t *testing.T, c *Consumer, h Handler) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, h) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			t.Helper()
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run returned %v, want nil", err)
				}
			case <-time.After(2 * time.Second):
				t.Fatal("Run did not return within 2s of its context ending")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// calls counts handler calls per message id.
type calls struct {
	mu sync.Mutex
	n  map[string]int
	ms []Message
}

func (c *calls) add(m Message) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[m.ID]++
	c.ms = append(c.ms, m)
	return c.n[m.ID]
}

func (c *calls) get(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[id]
}

func (c *calls) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.ms)
}

func TestConsumerProcessesAndDeletes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := &fakeQueue{}
		ids := q.send("a", "b", "c", "d", "e")
		var got calls
		var events sync.Map
		c := testConsumer(q, ConsumerOptions{Workers: 4, Observe: func(ev string, err error) {
			if err == nil {
				n, _ := events.LoadOrStore(ev, new(atomic.Int32))
				n.(*atomic.Int32).Add(1)
			}
		}})
		stop := start(t, c, func(_ context.Context, m Message) (Outcome, time.Duration) {
			got.add(m)
			return Done, 0
		})
		q.eventually(t, "all messages deleted", func() bool { left, _, _, _, _ := q.stats(); return left == 0 })
		stop()

		_, _, deleted, stale, _ := q.stats()
		if len(deleted) != len(ids) || stale != 0 {
			t.Errorf("deleted %d messages (%d with stale handles), want %d with the newest handles", len(deleted), stale, len(ids))
		}
		for _, id := range ids {
			if n := got.get(id); n != 1 {
				t.Errorf("message %s handled %d times, want 1", id, n)
			}
		}
		for _, m := range got.ms {
			if m.ReceiveCount != 1 || m.SentAt.IsZero() || m.Body == "" {
				t.Errorf("message %+v: want ReceiveCount 1, a SentAt and a body", m)
			}
		}
		if n, ok := events.Load(EventDelete); !ok || n.(*atomic.Int32).Load() != int32(len(ids)) {
			t.Errorf("observed successful deletes: %v, want %d", n, len(ids))
		}
		if _, ok := events.Load(EventReceive); !ok {
			t.Error("no successful receive observed")
		}
	})
}

func TestConsumerWorkersBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const workers, messages = 3, 20
		q := &fakeQueue{}
		bodies := make([]string, messages)
		for i := range bodies {
			bodies[i] = "body" + strconv.Itoa(i)
		}
		ids := q.send(bodies...)
		var cur atomic.Int32
		var got calls
		finish := make(chan struct{}) // each send lets one handler return
		c := testConsumer(q, ConsumerOptions{Workers: workers})
		stop := start(t, c, func(_ context.Context, m Message) (Outcome, time.Duration) {
			cur.Add(1)
			<-finish
			cur.Add(-1)
			got.add(m)
			return Done, 0
		})
		// Once everything waits, as many handlers run as there are workers, or messages left.
		for done := range messages {
			synctest.Wait()
			if n, want := cur.Load(), int32(min(workers, messages-done)); n != want {
				t.Fatalf("%d handlers running with %d of %d messages handled, want %d", n, done, messages, want)
			}
			finish <- struct{}{}
		}
		q.eventually(t, "all messages deleted", func() bool { left, _, _, _, _ := q.stats(); return left == 0 })
		stop()

		q.mu.Lock()
		maxReq := q.maxRequested
		q.mu.Unlock()
		if maxReq > workers {
			t.Errorf("asked for up to %d messages per receive with %d workers", maxReq, workers)
		}
		for _, id := range ids {
			if n := got.get(id); n != 1 {
				t.Errorf("message %s handled %d times, want 1", id, n)
			}
		}
	})
}

func TestConsumerSlowHandlerExtended(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := &fakeQueue{}
		id := q.send("slow")[0]
		var got calls
		vis := 10 * unit
		c := testConsumer(q, ConsumerOptions{Workers: 2, VisibilityTimeout: vis})
		extends := func() int {
			_, _, _, _, changes := q.stats()
			n := 0
			for _, ch := range changes {
				if ch.secs == 10 {
					n++
				}
			}
			return n
		}
		var ran time.Duration
		stop := start(t, c, func(_ context.Context, m Message) (Outcome, time.Duration) {
			got.add(m)
			// The handler runs on past its message's visibility timeout, until the consumer
			// has extended it five times.
			began := time.Now()
			if !q.waitUntil(time.Hour, func() bool { return extends() >= 5 }) {
				t.Error("the visibility was not extended five times within an hour")
			}
			ran = time.Since(began)
			return Done, 0
		})
		q.eventually(t, "message deleted", func() bool { left, _, _, _, _ := q.stats(); return left == 0 })
		stop()

		_, _, deleted, stale, _ := q.stats()
		if n := got.get(id); n != 1 {
			t.Errorf("handled %d times, want 1", n)
		}
		if len(deleted) != 1 || stale != 0 {
			t.Errorf("deletes %v (stale %d), want one with the newest handle", deleted, stale)
		}
		if ran < 2*vis {
			t.Errorf("five extensions within %v, want them spaced through at least two visibility timeouts (%v)", ran, 2*vis)
		}
		q.mu.Lock()
		delivered := q.delivered[id]
		q.mu.Unlock()
		if delivered != 1 {
			t.Errorf("queue delivered the message %d times, want 1 (visibility kept extended)", delivered)
		}
	})
}

func TestConsumerRedeliveredWhileInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := &fakeQueue{}
		id := q.send("drain")[0]
		var got calls
		started := make(chan struct{})
		release := make(chan struct{})
		c := testConsumer(q, ConsumerOptions{Workers: 2})
		stop := start(t, c, func(_ context.Context, m Message) (Outcome, time.Duration) {
			if got.add(m) == 1 {
				close(started)
			}
			<-release
			return Done, 0
		})
		<-started
		// SQS hands the message out again although the handler is still running.
		q.redeliver(id)
		q.eventually(t, "the redelivery", func() bool { n, _ := q.msgReceives(id); return n == 2 })
		q.redeliver(id)
		q.eventually(t, "a second redelivery", func() bool { n, _ := q.msgReceives(id); return n == 3 })
		_, handles := q.msgReceives(id)
		synctest.Wait() // the consumer has taken the second copy in
		close(release)
		q.eventually(t, "message deleted", func() bool { left, _, _, _, _ := q.stats(); return left == 0 })
		stop()

		if n := got.get(id); n != 1 {
			t.Errorf("handled %d times, want 1 (the redelivered copies belong to the running handler)", n)
		}
		_, _, deleted, stale, _ := q.stats()
		if stale != 0 || len(deleted) != 1 || deleted[0].handle != handles[len(handles)-1] {
			t.Errorf("deletes %v (stale %d), want one with the newest handle %s", deleted, stale, handles[len(handles)-1])
		}
	})
}

func TestConsumerRetryComesBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := &fakeQueue{}
		id := q.send("later")[0]
		var got calls
		var firstReturn atomic.Int64
		var secondStart atomic.Int64
		const delay = 10 * unit
		c := testConsumer(q, ConsumerOptions{Workers: 2})
		stop := start(t, c, func(_ context.Context, m Message) (Outcome, time.Duration) {
			if got.add(m) == 1 {
				firstReturn.Store(time.Now().UnixNano())
				return Retry, delay
			}
			secondStart.Store(time.Now().UnixNano())
			return Done, 0
		})
		q.eventually(t, "message deleted", func() bool { left, _, _, _, _ := q.stats(); return left == 0 })
		stop()

		if n := got.get(id); n != 2 {
			t.Fatalf("handled %d times, want 2", n)
		}
		if rc := [2]int{got.ms[0].ReceiveCount, got.ms[1].ReceiveCount}; rc != [2]int{1, 2} {
			t.Errorf("receive counts %v, want [1 2]", rc)
		}
		if gap := time.Duration(secondStart.Load() - firstReturn.Load()); gap < delay {
			t.Errorf("message came back %v after Retry, want at least the retry delay %v", gap, delay)
		}
		_, _, _, _, changes := q.stats()
		found := false
		for _, ch := range changes {
			found = found || ch.secs == 10
		}
		if !found {
			t.Errorf("no visibility change to the retry delay (10 units): %v", changes)
		}
	})
}

func TestConsumerRetryDelayBounds(t *testing.T) {
	c := NewConsumer(&fakeQueue{}, ConsumerOptions{QueueURL: "q"})
	for _, tc := range []struct {
		delay time.Duration
		want  int32
	}{
		{-time.Second, 0},
		{0, 0},
		{time.Millisecond, 1},
		{1500 * time.Millisecond, 2},
		{time.Minute, 60},
		{12 * time.Hour, 43200},
		{30 * time.Hour, 43200},
		{time.Duration(1<<63 - 1), 43200},
	} {
		if got := c.retrySeconds(tc.delay); got != tc.want {
			t.Errorf("retrySeconds(%v) = %d, want %d", tc.delay, got, tc.want)
		}
	}
}

func TestConsumerReceiveErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := &fakeQueue{}
		q.setReceiveErr(&smithy.GenericAPIError{Code: "ServiceUnavailable", Message: "down", Fault: smithy.FaultServer})
		var failed atomic.Int32
		c := testConsumer(q, ConsumerOptions{Workers: 2, Observe: func(ev string, err error) {
			if ev == EventReceive && err != nil {
				failed.Add(1)
			}
		}})
		c.healthWindow = 300 * time.Millisecond
		var got calls
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() {
			done <- c.Run(ctx, func(_ context.Context, m Message) (Outcome, time.Duration) {
				got.add(m)
				return Done, 0
			})
		}()

		q.eventually(t, "a failed receive", func() bool { return failed.Load() >= 1 })
		if err := c.Healthy(); err != nil {
			t.Errorf("Healthy right after the first failure = %v, want nil", err)
		}
		began := time.Now()
		q.eventually(t, "Healthy to report the failures", func() bool { return c.Healthy() != nil })
		if waited := time.Since(began); waited < 200*time.Millisecond {
			t.Errorf("Healthy failed %v after the first failure, want the window (300ms)", waited)
		}
		t.Logf("unhealthy: %v", c.Healthy())
		_, receives, _, _, _ := q.stats()
		// Backing off 5, 10, 20, 20, ... ms: about 16 attempts in 300 ms; without backoff thousands.
		if receives > 40 || receives < 3 {
			t.Errorf("%d receive attempts in the health window, want a backed-off handful", receives)
		}
		select {
		case err := <-done:
			t.Fatalf("Run returned %v while receives failed", err)
		default:
		}

		q.setReceiveErr(nil)
		id := q.send("after the outage")[0]
		q.eventually(t, "the message after recovery", func() bool { return got.get(id) == 1 })
		if err := c.Healthy(); err != nil {
			t.Errorf("Healthy after recovery = %v, want nil", err)
		}
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run = %v, want nil", err)
			}
		case <-time.After(2 * time.Second):
			t.Fatal("Run did not return")
		}
	})
}

func TestConsumerCancelLeavesUnfinished(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := &fakeQueue{}
		id := q.send("unfinished")[0]
		started := make(chan struct{})
		var handlerCtxErr atomic.Value
		c := testConsumer(q, ConsumerOptions{Workers: 2, WaitTime: 20 * unit})
		stop := start(t, c, func(ctx context.Context, m Message) (Outcome, time.Duration) {
			close(started)
			<-ctx.Done()
			handlerCtxErr.Store(ctx.Err())
			return Done, 0 // a careless handler: the consumer must still not delete
		})
		<-started
		_, _, _, _, before := q.stats()
		t0 := time.Now()
		stop()
		if d := time.Since(t0); d > time.Second {
			t.Errorf("Run took %v to return", d)
		}
		if err, _ := handlerCtxErr.Load().(error); !errors.Is(err, context.Canceled) {
			t.Errorf("handler context error = %v, want canceled", err)
		}
		left, _, deleted, _, after := q.stats()
		if left != 1 || len(deleted) != 0 {
			t.Errorf("message %s deleted on shutdown (left %d, deletes %v)", id, left, deleted)
		}
		if len(after) != len(before) {
			t.Errorf("visibility changed on shutdown: %v", after[len(before):])
		}
	})
}

func TestConsumerLostDeleteNotHandledAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := &fakeQueue{dropDeletes: 1}
		id := q.send("once")[0]
		var got calls
		c := testConsumer(q, ConsumerOptions{Workers: 2, VisibilityTimeout: 4 * unit})
		stop := start(t, c, func(_ context.Context, m Message) (Outcome, time.Duration) {
			got.add(m)
			return Done, 0
		})
		q.eventually(t, "message deleted on its redelivery", func() bool { left, _, _, _, _ := q.stats(); return left == 0 })
		stop()
		if n, _ := q.msgReceives(id); n != -1 {
			t.Fatalf("message still queued")
		}
		if n := got.get(id); n != 1 {
			t.Errorf("handled %d times, want 1: a copy of a handled message is deleted, not handled", n)
		}
	})
}

// A panic while a message is handled, in the handler or in the consumer's own delete, stays
// with that message: it is counted under site queue_message, the message comes back and is
// handled again, and the message received with it is handled and deleted.
func TestConsumerPanicStaysWithItsMessage(t *testing.T) {
	tests := []struct {
		name          string
		handlerPanics bool
		deletePanics  bool
	}{
		{name: "in the handler", handlerPanics: true},
		{name: "in the delete", deletePanics: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				q := &fakeQueue{}
				ids := q.send("boom", "fine")
				var deletes atomic.Int32
				if tt.deletePanics {
					q.beforeDelete = func(handle string) {
						if strings.HasPrefix(handle, ids[0]+"-") && deletes.Add(1) == 1 {
							panic("delete bug")
						}
					}
				}
				var got calls
				count := &panicstest.Counter{}
				c := testConsumer(q, ConsumerOptions{Workers: 2, VisibilityTimeout: 4 * unit, Panics: count})
				stop := start(t, c, func(_ context.Context, m Message) (Outcome, time.Duration) {
					if got.add(m) == 1 && m.Body == "boom" && tt.handlerPanics {
						panic("handler bug")
					}
					return Done, 0
				})
				q.eventually(t, "both messages deleted", func() bool { left, _, _, _, _ := q.stats(); return left == 0 })
				stop()
				if n := got.get(ids[1]); n != 1 {
					t.Errorf("the other message was handled %d times, want once", n)
				}
				if n := got.get(ids[0]) + got.get(ids[1]); n != 3 {
					t.Errorf("%d handlings in all, want 3: the message that met the panic again on its redelivery", n)
				}
				if n := count.Get("queue_message"); n != 1 {
					t.Errorf("%d panics counted under queue_message, want 1", n)
				}
			})
		})
	}
}

func TestNewConsumerDefaults(t *testing.T) {
	c := NewConsumer(&fakeQueue{}, ConsumerOptions{QueueURL: "q"})
	if c.opts.Workers != 10 || c.opts.VisibilityTimeout != 20*time.Second || c.opts.WaitTime != 20*time.Second {
		t.Errorf("defaults: %+v", c.opts)
	}
	if err := c.Healthy(); err != nil {
		t.Errorf("Healthy before any receive = %v", err)
	}
	if err := NewConsumer(&fakeQueue{}, ConsumerOptions{}).Run(context.Background(), func(context.Context, Message) (Outcome, time.Duration) { return Done, 0 }); err == nil {
		t.Error("Run without a queue URL succeeded")
	}
}

func TestConsumerDeleteRetriesTransientErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := &fakeQueue{failDeletes: 2}
		id := q.send("flaky")[0]
		var got calls
		var deleteErrs atomic.Int32
		c := testConsumer(q, ConsumerOptions{Workers: 1, Observe: func(ev string, err error) {
			if ev == EventDelete && err != nil {
				deleteErrs.Add(1)
			}
		}})
		stop := start(t, c, func(_ context.Context, m Message) (Outcome, time.Duration) {
			got.add(m)
			return Done, 0
		})
		q.eventually(t, "message deleted", func() bool { left, _, _, _, _ := q.stats(); return left == 0 })
		stop()
		if n := got.get(id); n != 1 {
			t.Errorf("handled %d times, want 1", n)
		}
		if n := deleteErrs.Load(); n != 2 {
			t.Errorf("observed %d failed deletes, want 2", n)
		}
		q.mu.Lock()
		delivered := q.delivered[id]
		q.mu.Unlock()
		if n := delivered; n != 1 {
			t.Errorf("delivered %d times, want 1 (retried at once, not after redelivery)", n)
		}
	})
}

func TestConsumerRedeliveredDuringDelete(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := &fakeQueue{}
		id := q.send("race")[0]
		var got calls
		var once sync.Once
		// The first delete is held until SQS has handed the message out again; the handle it
		// carries is then stale and deletes nothing.
		q.beforeDelete = func(string) {
			once.Do(func() {
				q.redeliver(id)
				// Not eventually: this runs on the consumer's goroutine, where t.Fatal is not allowed.
				if !q.waitUntil(time.Hour, func() bool { n, _ := q.msgReceives(id); return n == 2 }) {
					t.Error("no redelivery during the delete")
				}
			})
		}
		c := testConsumer(q, ConsumerOptions{Workers: 2})
		stop := start(t, c, func(_ context.Context, m Message) (Outcome, time.Duration) {
			got.add(m)
			return Done, 0
		})
		q.eventually(t, "message deleted", func() bool { left, _, _, _, _ := q.stats(); return left == 0 })
		stop()
		_, _, deleted, stale, _ := q.stats()
		if n := got.get(id); n != 1 {
			t.Errorf("handled %d times, want 1", n)
		}
		if stale != 1 || len(deleted) != 1 {
			t.Errorf("deletes %v, stale %d: want the stale delete followed by one with the newest handle", deleted, stale)
		}
	})
}

func TestPermanentErrors(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{errors.New("connection reset"), false},
		{&smithy.GenericAPIError{Code: "InternalError", Fault: smithy.FaultServer}, false},
		{&smithy.GenericAPIError{Code: "ReceiptHandleIsInvalid"}, true},
		{&smithy.GenericAPIError{Code: "AWS.SimpleQueueService.MessageNotInFlight"}, true}, // goaws's spelling
		{fmt.Errorf("wrapped: %w", &smithy.GenericAPIError{Code: "QueueDoesNotExist"}), true},
		{context.Canceled, true},
		{fmt.Errorf("DeleteMessage: no answer within the call's deadline: %w", context.DeadlineExceeded), false},
	} {
		if got := permanent(tc.err); got != tc.want {
			t.Errorf("permanent(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
