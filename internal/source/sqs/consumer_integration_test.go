// SPDX-License-Identifier: Apache-2.0

package sqs

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"lifeboat.dev/lifeboat/test/sandbox"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// countingAPI passes calls to a real client and counts how often the server handed out each
// message, so a test can tell "handled once because deduplicated" from "delivered once".
type countingAPI struct {
	API
	mu        sync.Mutex
	delivered map[string]int
}

func (a *countingAPI) ReceiveMessage(ctx context.Context, in *awssqs.ReceiveMessageInput, opts ...func(*awssqs.Options)) (*awssqs.ReceiveMessageOutput, error) {
	out, err := a.API.ReceiveMessage(ctx, in, opts...)
	if err == nil {
		a.mu.Lock()
		for _, m := range out.Messages {
			a.delivered[aws.ToString(m.MessageId)]++
		}
		a.mu.Unlock()
	}
	return out, err
}

func (a *countingAPI) deliveries(id string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.delivered[id]
}

// goawsQueue starts goaws with one queue "q" whose visibility timeout is 1 s.
func goawsQueue(t *testing.T) (client *awssqs.Client, url string) {
	t.Helper()
	q := sandboxtest.SQS(t, sandbox.SQSOptions{Queues: []string{"q"}, VisibilityTimeout: 1})
	return awssqs.NewFromConfig(sandboxtest.AWSConfig(q.Endpoint)), q.QueueURLs["q"]
}

func sendAll(t *testing.T, client *awssqs.Client, url string, n int) map[string]bool {
	t.Helper()
	ids := map[string]bool{}
	for i := range n {
		out, err := client.SendMessage(t.Context(), &awssqs.SendMessageInput{
			QueueUrl:    aws.String(url),
			MessageBody: aws.String(`{"n":` + strconv.Itoa(i) + `}`),
		})
		if err != nil {
			t.Fatalf("send: %v", err)
		}
		ids[aws.ToString(out.MessageId)] = true
	}
	return ids
}

// queueLength is every message goaws still holds, visible or not.
func queueLength(t *testing.T, client *awssqs.Client, url string) int {
	t.Helper()
	out, err := client.GetQueueAttributes(t.Context(), &awssqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(url),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages},
	})
	if err != nil {
		t.Fatalf("queue attributes: %v", err)
	}
	n, err := strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)])
	if err != nil {
		t.Fatalf("queue attributes %v: %v", out.Attributes, err)
	}
	return n
}

// observed counts Observe events by name and outcome.
type observed struct {
	mu      sync.Mutex
	n       map[string]int
	changed chan struct{} // closed and replaced at each event
}

func (o *observed) observe(ev string, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.n == nil {
		o.n = map[string]int{}
	}
	if err != nil {
		ev += " error"
	}
	o.n[ev]++
	if o.changed != nil {
		close(o.changed)
	}
	o.changed = make(chan struct{})
}

// waitCount waits, event by event, until the consumer has observed ev at least n times,
// failing the test after limit.
func (o *observed) waitCount(t *testing.T, ev string, n int, limit time.Duration) {
	t.Helper()
	timeout := time.After(limit)
	for {
		o.mu.Lock()
		if o.changed == nil {
			o.changed = make(chan struct{})
		}
		got, changed := o.n[ev], o.changed
		o.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("timed out after %v waiting for %d events %q, saw %d", limit, n, ev, got)
		}
	}
}

func (o *observed) get(ev string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n[ev]
}

func runGoaws(t *testing.T, api API, url string, workers int, obs *observed, h Handler) (stop func()) {
	t.Helper()
	c := NewConsumer(api, ConsumerOptions{
		QueueURL:          url,
		Workers:           workers,
		VisibilityTimeout: time.Second,
		WaitTime:          time.Second,
		Logger:            slog.New(slog.NewTextHandler(io.Discard, nil)),
		Observe:           obs.observe,
	})
	return start(t, c, h)
}

func TestConsumerGoawsHandlesEachOnce(t *testing.T) {
	client, url := goawsQueue(t)
	ids := sendAll(t, client, url, 20)
	api := &countingAPI{API: client, delivered: map[string]int{}}
	var obs observed
	var got calls
	stop := runGoaws(t, api, url, 5, &obs, func(_ context.Context, m Message) (Outcome, time.Duration) {
		got.add(m)
		// Real time, as a handler takes: messages stay in flight at the real server together.
		time.Sleep(50 * time.Millisecond)
		return Done, 0
	})
	obs.waitCount(t, EventDelete, len(ids), 30*time.Second)
	stop()

	if n := queueLength(t, client, url); n != 0 {
		t.Errorf("queue holds %d messages after all were handled, want 0", n)
	}
	if got.total() != len(ids) {
		t.Errorf("%d handler calls for %d messages", got.total(), len(ids))
	}
	for id := range ids {
		if n := got.get(id); n != 1 {
			t.Errorf("message %s handled %d times, want 1", id, n)
		}
		if n := api.deliveries(id); n != 1 {
			t.Errorf("message %s delivered %d times, want 1", id, n)
		}
	}
	if n := obs.get(EventDelete + " error"); n != 0 {
		t.Errorf("%d failed deletes", n)
	}
}

func TestConsumerGoawsSlowHandlerExtended(t *testing.T) {
	client, url := goawsQueue(t)
	ids := sendAll(t, client, url, 1)
	api := &countingAPI{API: client, delivered: map[string]int{}}
	var obs observed
	var got calls
	stop := runGoaws(t, api, url, 2, &obs, func(_ context.Context, m Message) (Outcome, time.Duration) {
		got.add(m)
		time.Sleep(3 * time.Second) // three visibility timeouts
		return Done, 0
	})
	obs.waitCount(t, EventDelete, 1, 20*time.Second)
	// Keep receiving for longer than a visibility timeout (goaws reveals expired messages
	// on a 1 s tick): a message that was not deleted would come back now.
	time.Sleep(2500 * time.Millisecond)
	stop()

	for id := range ids {
		if n := got.get(id); n != 1 {
			t.Errorf("handled %d times, want 1", n)
		}
		if n := api.deliveries(id); n != 1 {
			t.Errorf("delivered %d times, want 1 (visibility extended while the handler ran)", n)
		}
	}
	if n := obs.get(EventExtend); n < 4 {
		t.Errorf("%d successful visibility extensions during 3 s with a 1 s timeout, want >= 4", n)
	}
	if n := obs.get(EventExtend + " error"); n != 0 {
		t.Errorf("%d failed extensions", n)
	}
	if n := queueLength(t, client, url); n != 0 {
		t.Errorf("queue holds %d messages, want 0", n)
	}
}

func TestConsumerGoawsRetry(t *testing.T) {
	client, url := goawsQueue(t)
	ids := sendAll(t, client, url, 1)
	var obs observed
	var got calls
	var firstReturn, secondStart atomic.Int64
	stop := runGoaws(t, client, url, 2, &obs, func(_ context.Context, m Message) (Outcome, time.Duration) {
		if got.add(m) == 1 {
			firstReturn.Store(time.Now().UnixNano())
			return Retry, 2 * time.Second
		}
		secondStart.Store(time.Now().UnixNano())
		return Done, 0
	})
	obs.waitCount(t, EventDelete, 1, 20*time.Second)
	stop()

	for id := range ids {
		if n := got.get(id); n != 2 {
			t.Errorf("handled %d times, want 2", n)
		}
	}
	if gap := time.Duration(secondStart.Load() - firstReturn.Load()); gap < 2*time.Second {
		t.Errorf("message came back %v after Retry, want at least the 2 s delay", gap)
	}
	if n := obs.get(EventRetry); n != 1 {
		t.Errorf("%d successful retry visibility changes, want 1", n)
	}
	if n := queueLength(t, client, url); n != 0 {
		t.Errorf("queue holds %d messages, want 0", n)
	}
}
