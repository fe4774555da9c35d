// SPDX-License-Identifier: Apache-2.0

// Package sqs is the queue's transport: it receives messages from an SQS queue, keeps each
// invisible while it is handled, and deletes it or lets it come back as the handler decides.
// What a message says is package messages'.
package sqs

// The consumer: long-polls the queue with a bounded number of workers, keeps each message
// invisible for as long as its handler runs, and deletes it only when the handler says so.
//
// The handler only takes the notice in (intake): it returns once the notice is recorded on its
// Node, and the drain follows from that record, not from the message. Intake is short when the
// API server answers, but it retries through an API server outage until the notice is
// recorded or given up, which can outlast the visibility timeout: renewal keeps the message
// from coming back meanwhile. A message that comes back anyway (a renewal failed) is not
// handled twice: every receive of a message still being handled only records the newest
// receipt handle, and every later call (renewal, delete, release) uses it, since an older
// handle may be accepted by SQS without deleting anything (flights.go).

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	"k8s.io/apimachinery/pkg/util/wait"

	"lifeboat.dev/lifeboat/internal/panics"
)

// API is the part of *sqs.Client the consumer uses (so tests can fake it).
type API interface {
	ReceiveMessage(ctx context.Context, in *awssqs.ReceiveMessageInput, optFns ...func(*awssqs.Options)) (*awssqs.ReceiveMessageOutput, error)
	DeleteMessage(ctx context.Context, in *awssqs.DeleteMessageInput, optFns ...func(*awssqs.Options)) (*awssqs.DeleteMessageOutput, error)
	ChangeMessageVisibility(ctx context.Context, in *awssqs.ChangeMessageVisibilityInput, optFns ...func(*awssqs.Options)) (*awssqs.ChangeMessageVisibilityOutput, error)
}

var _ API = (*awssqs.Client)(nil)

// Message is one queue message as a handler sees it.
type Message struct {
	ID           string    // SQS MessageId: the same on every delivery of the message
	Body         string    // the message body, unparsed
	ReceiveCount int       // ApproximateReceiveCount: 1 on the first delivery
	SentAt       time.Time // SentTimestamp; zero when the queue did not say
}

// Outcome is what a handler wants done with its message.
type Outcome int

const (
	// Done deletes the message: it has been dealt with (or can never be).
	Done Outcome = iota
	// Retry leaves the message on the queue; it is delivered again after the delay the
	// handler returns.
	Retry
)

func (o Outcome) String() string {
	switch o {
	case Done:
		return "done"
	case Retry:
		return "retry"
	}
	return "outcome(" + strconv.Itoa(int(o)) + ")"
}

// Handler deals with one message. The context ends when the consumer stops; a handler should
// then return promptly (its message is left on the queue whatever it returns). The duration is
// the retry delay and only matters with Retry. Handlers must be idempotent: SQS delivers at
// least once, and a message whose delete failed comes back.
type Handler func(ctx context.Context, m Message) (Outcome, time.Duration)

// ConsumerOptions configure a Consumer.
type ConsumerOptions struct {
	// QueueURL is the queue to read (QUEUE_URL).
	QueueURL string
	// Workers is how many messages are handled at once (WORKERS); default 10.
	Workers int
	// VisibilityTimeout (SQS_MSG_VISIBILITY_TIMEOUT_SEC) is requested on receive and renewed
	// every half of it while a handler runs; default 20 s. SQS counts whole seconds: it is
	// rounded up.
	VisibilityTimeout time.Duration
	// WaitTime is the long-poll wait of one receive; default and maximum 20 s.
	WaitTime time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Observe, when set, is told about every SQS call and its error (nil on success), for
	// metrics. Events: "receive", "delete", "extend" (visibility renewal while a handler
	// runs) and "retry" (visibility set to a handler's retry delay).
	Observe func(event string, err error)
	// Panics, when set, counts the panics recovered in a message's handling (site
	// queue_message): the message is left for redelivery, and the other messages go on.
	Panics panics.Counter
}

// Observe events.
const (
	EventReceive = "receive"
	EventDelete  = "delete"
	EventExtend  = "extend"
	EventRetry   = "retry"
)

// Defaults and limits.
const (
	DefaultWorkers           = 10
	DefaultVisibilityTimeout = 20 * time.Second
	DefaultWaitTime          = 20 * time.Second

	maxBatch       = 10             // SQS returns at most 10 messages per receive
	maxWaitSeconds = 20             // SQS long-poll limit
	maxVisibility  = 12 * time.Hour // SQS visibility limit (43200 s)
)

// Consumer receives queue messages and hands them to a Handler. Create it with NewConsumer.
type Consumer struct {
	api  API
	opts ConsumerOptions
	log  *slog.Logger

	// Tunables, fixed by NewConsumer; tests shorten them.
	second         time.Duration // what the API calls a second
	healthWindow   time.Duration // receive failures this long make Healthy fail
	backoffMin     time.Duration // first pause after a failed receive
	backoffMax     time.Duration // longest pause after failed receives
	deleteAttempts int           // calls per delete or release before giving up
	deleteBackoff  time.Duration // pause after the first failed attempt, doubled each time
	now            func() time.Time

	mu           sync.Mutex
	flights      *flights
	failures     int          // consecutive failed receives
	receiveWait  wait.Backoff // the pauses after them; reset by a receive that works
	failingSince time.Time
	lastErr      error
}

// NewConsumer makes a consumer of opts.QueueURL through api (usually an *sqs.Client).
func NewConsumer(api API, opts ConsumerOptions) *Consumer {
	if opts.Workers <= 0 {
		opts.Workers = DefaultWorkers
	}
	if opts.VisibilityTimeout <= 0 {
		opts.VisibilityTimeout = DefaultVisibilityTimeout
	}
	if opts.WaitTime <= 0 {
		opts.WaitTime = DefaultWaitTime
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Consumer{
		api:            api,
		opts:           opts,
		log:            log.With("queue", opts.QueueURL),
		second:         time.Second,
		healthWindow:   30 * time.Second,
		backoffMin:     time.Second,
		backoffMax:     30 * time.Second,
		deleteAttempts: 4,
		deleteBackoff:  250 * time.Millisecond,
		now:            time.Now,
		flights:        newFlights(15*time.Minute, time.Now),
	}
}

// Healthy is nil unless receives have failed for 30 s without a success in between. A queue
// endpoint that never answers counts as failing once a receive passes its deadline (see
// cloud.Deadlines): from the start of that receive.
func (c *Consumer) Healthy() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failures == 0 {
		return nil
	}
	if d := c.now().Sub(c.failingSince); d >= c.healthWindow {
		return fmt.Errorf("sqs: receiving from %s has failed for %s (%d attempts): %w",
			c.opts.QueueURL, d.Round(time.Millisecond), c.failures, c.lastErr)
	}
	return nil
}

// Run receives messages and hands each to h on its own goroutine, at most Workers at once,
// until ctx ends. Then it stops receiving, lets the handlers see their context end, leaves
// their messages on the queue (they come back after their visibility timeout), waits for them
// to return and returns nil. Receive failures never end Run: it backs off and tries again.
// Run must not be called twice at the same time.
func (c *Consumer) Run(ctx context.Context, h Handler) error {
	if h == nil {
		return errors.New("sqs: consumer needs a handler")
	}
	if c.opts.QueueURL == "" {
		return errors.New("sqs: consumer needs a queue URL")
	}
	var wg sync.WaitGroup
	defer wg.Wait()

	w := make(workers, c.opts.Workers)
	for {
		free, ok := w.takeFree(ctx)
		if !ok {
			return nil
		}
		began := c.now()
		msgs, err := c.receive(ctx, free)
		if ctx.Err() != nil {
			w.release(free)
			return nil
		}
		if err != nil {
			w.release(free)
			if !sleep(ctx, c.receiveFailed(err, began)) {
				return nil
			}
			continue
		}
		c.receiveSucceeded()
		started := c.handOut(ctx, h, msgs, free, w, &wg)
		w.release(free - started)
	}
}

// workers are Run's handlers: a token in the channel is a busy worker.
type workers chan struct{}

// takeFree waits for one free worker, then takes every other free one, up to a batch. ok is
// false when ctx ended first.
func (w workers) takeFree(ctx context.Context) (free int, ok bool) {
	select {
	case <-ctx.Done():
		return 0, false
	case w <- struct{}{}:
	}
	free = 1
	for free < maxBatch {
		select {
		case w <- struct{}{}:
			free++
		default:
			return free, true
		}
	}
	return free, true
}

func (w workers) release(n int) {
	for range n {
		<-w
	}
}

// handOut starts a handler for each message admitted, on the free workers taken for the
// receive, and returns how many it started; each releases its worker when it returns.
func (c *Consumer) handOut(ctx context.Context, h Handler, msgs []types.Message, free int, w workers, wg *sync.WaitGroup) (started int) {
	for _, m := range msgs {
		f, deleteAgain := c.admit(m)
		if deleteAgain != "" {
			// Handled and deleted before, yet here again: the delete did not take.
			// Delete this copy with its own handle; do not handle it twice.
			wg.Go(func() {
				defer panics.Recover(panics.QueueMessage, c.log, c.opts.Panics, nil, "message", aws.ToString(m.MessageId))
				c.deleteTombstoned(ctx, aws.ToString(m.MessageId), deleteAgain)
			})
			continue
		}
		if f == nil {
			continue
		}
		if started == free {
			// More messages than asked for: no worker is free for this one. It comes
			// back after its visibility timeout.
			c.forget(f)
			c.log.Warn("queue returned more messages than requested; leaving one for redelivery",
				"requested", free, "message", f.msg.ID)
			continue
		}
		started++
		wg.Go(func() {
			defer w.release(1)
			c.handleSafely(ctx, h, f)
		})
	}
	return started
}

// receive asks for up to n messages.
func (c *Consumer) receive(ctx context.Context, n int) ([]types.Message, error) {
	out, err := c.api.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{
		QueueUrl:            aws.String(c.opts.QueueURL),
		MaxNumberOfMessages: int32(min(n, maxBatch)),
		VisibilityTimeout:   c.seconds(c.opts.VisibilityTimeout),
		WaitTimeSeconds:     min(c.seconds(c.opts.WaitTime), maxWaitSeconds),
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{
			types.MessageSystemAttributeNameApproximateReceiveCount,
			types.MessageSystemAttributeNameSentTimestamp,
		},
	}, pacedHere)
	if ctx.Err() != nil {
		return nil, ctx.Err() // stopping: not a failure worth counting
	}
	c.observe(EventReceive, err)
	if err != nil {
		return nil, err
	}
	return out.Messages, nil
}

// receiveFailed records a failed receive that began at began, logs the first and every 20th
// in a row, and returns how long to wait before the next: doubling from backoffMin up to
// backoffMax. The failure counts from when the receive began: one that hung until its
// deadline has been failing all that time.
func (c *Consumer) receiveFailed(err error, began time.Time) time.Duration {
	c.mu.Lock()
	c.failures++
	n := c.failures
	if n == 1 {
		c.failingSince = began
	}
	c.lastErr = err
	if n == 1 {
		c.receiveWait = wait.Backoff{Duration: c.backoffMin, Factor: 2, Steps: math.MaxInt32, Cap: c.backoffMax}
	}
	pause := c.receiveWait.Step()
	c.mu.Unlock()

	if n == 1 || n%20 == 0 {
		c.log.Error("receiving from the queue failed; retrying", "failures", n, "retryIn", pause, "err", err)
	}
	return pause
}

func (c *Consumer) receiveSucceeded() {
	c.mu.Lock()
	n := c.failures
	c.failures, c.lastErr, c.failingSince = 0, nil, time.Time{}
	c.mu.Unlock()
	if n > 0 {
		c.log.Info("receiving from the queue works again", "failedAttempts", n)
	}
}

// admit decides what to do with a received message. It returns the flight to hand to a
// worker for a new message; nil for a message already being handled (whose newest receipt
// handle it records) or an unusable one; and, for a message that was handled and deleted
// already, the receipt handle to delete it with again.
func (c *Consumer) admit(m types.Message) (f *flight, deleteAgain string) {
	id, handle := aws.ToString(m.MessageId), aws.ToString(m.ReceiptHandle)
	if handle == "" {
		c.log.Warn("queue returned a message without a receipt handle; ignoring it", "message", id)
		return nil, ""
	}
	if id == "" {
		id = handle // cannot happen with SQS; still tracked, under a name of its own
	}
	msg := Message{ID: id, Body: aws.ToString(m.Body), ReceiveCount: receiveCount(m), SentAt: sentAt(m)}
	f, again, deleteAgain := c.flights.start(msg, handle)
	if again {
		c.log.Warn("message delivered again while still being handled; keeping one handler and using the newest receipt handle",
			"message", id, "receiveCount", msg.ReceiveCount)
	}
	return f, deleteAgain
}

func receiveCount(m types.Message) int {
	n, _ := strconv.Atoi(m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)])
	return n
}

func sentAt(m types.Message) time.Time {
	ms, err := strconv.ParseInt(m.Attributes[string(types.MessageSystemAttributeNameSentTimestamp)], 10, 64)
	if err != nil || ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// forget ends tracking of f without its delete: a copy that comes back is handled again.
func (c *Consumer) forget(f *flight) { c.flights.end(f, false) }

func (c *Consumer) latest(f *flight) string { return c.flights.latest(f) }

// handleSafely is handle with a panic of the consumer's own (deleting, releasing) recovered:
// the message is forgotten, so that its redelivery is handled again, and the other messages go on.
func (c *Consumer) handleSafely(ctx context.Context, h Handler, f *flight) {
	var err error
	defer func() {
		if err != nil {
			c.forget(f)
		}
	}()
	defer panics.Recover(panics.QueueMessage, c.log, c.opts.Panics, &err, "message", f.msg.ID)
	c.handle(ctx, h, f)
}

// handle runs h on one message, keeping the message invisible meanwhile, then deletes or
// releases it.
func (c *Consumer) handle(ctx context.Context, h Handler, f *flight) {
	log := c.log.With("message", f.msg.ID, "receiveCount", f.msg.ReceiveCount)

	stop := make(chan struct{})
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		// Renewals stop; the message may come back before its handler is done.
		defer panics.Recover(panics.QueueMessage, log, c.opts.Panics, nil)
		c.keepInvisible(ctx, f, stop)
	}()
	outcome, delay, ok := call(ctx, h, f.msg, log, c.opts.Panics)
	close(stop)
	<-renewed

	switch {
	case ctx.Err() != nil:
		// Stopping: whatever the handler said, leave the message; it comes back after its
		// visibility timeout and the handler resumes from the progress it recorded.
		log.Debug("consumer stopping; message left on the queue")
		c.forget(f)
	case !ok:
		c.forget(f) // the handler panicked: the message comes back after its visibility timeout
	case outcome == Done:
		c.finish(ctx, f, log)
	case outcome == Retry:
		c.retryLater(ctx, f, delay, log)
	default:
		log.Error("handler returned an unknown outcome; message left for redelivery", "outcome", outcome)
		c.forget(f)
	}
}

// call runs the handler, turning a panic into a log line and a count.
func call(ctx context.Context, h Handler, m Message, log *slog.Logger, count panics.Counter) (o Outcome, d time.Duration, ok bool) {
	var err error
	defer func() { ok = err == nil }()
	defer panics.Recover(panics.QueueMessage, log, count, &err)
	o, d = h(ctx, m)
	return o, d, true
}

// keepInvisible renews the message's visibility every half timeout until stop closes.
func (c *Consumer) keepInvisible(ctx context.Context, f *flight, stop <-chan struct{}) {
	interval := max(c.opts.VisibilityTimeout/2, time.Millisecond)
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := c.changeVisibility(ctx, f, c.seconds(c.opts.VisibilityTimeout), EventExtend)
		next := interval
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			next = interval / 2 // try again sooner: the timeout is running out
			c.log.Warn("could not extend the message's visibility; it may be delivered again",
				"message", f.msg.ID, "err", err)
		}
		t.Reset(next)
	}
}

// changeVisibility sets the message's visibility with its newest receipt handle. When the
// call fails because a newer handle arrived meanwhile, it tries once more with that one.
func (c *Consumer) changeVisibility(ctx context.Context, f *flight, secs int32, event string, optFns ...func(*awssqs.Options)) error {
	handle := c.latest(f)
	for attempt := 0; ; attempt++ {
		_, err := c.api.ChangeMessageVisibility(ctx, &awssqs.ChangeMessageVisibilityInput{
			QueueUrl:          aws.String(c.opts.QueueURL),
			ReceiptHandle:     aws.String(handle),
			VisibilityTimeout: secs,
		}, optFns...)
		c.observe(event, err)
		if err == nil || attempt > 0 {
			return err
		}
		if newer := c.latest(f); newer != handle {
			handle = newer
			continue
		}
		return err
	}
}

// finish deletes a handled message with its newest receipt handle. Every attempt takes the
// newest handle; if a newer one arrives during the last attempt, the old one may not have
// deleted anything, so it deletes again with the new one.
func (c *Consumer) finish(ctx context.Context, f *flight, log *slog.Logger) {
	for range 3 {
		var used string
		err := c.retrying(ctx, EventDelete, func() error {
			used = c.latest(f)
			_, err := c.api.DeleteMessage(ctx, &awssqs.DeleteMessageInput{
				QueueUrl:      aws.String(c.opts.QueueURL),
				ReceiptHandle: aws.String(used),
			}, pacedHere)
			return err
		})
		if ctx.Err() == nil && c.latest(f) != used {
			continue
		}
		if err != nil && ctx.Err() == nil {
			log.Error("could not delete the handled message; it will be delivered again and deleted then",
				"err", err)
		}
		break
	}
	c.flights.end(f, true)
}

// retryLater makes the message visible again after delay (clamped to 0..12 h).
func (c *Consumer) retryLater(ctx context.Context, f *flight, delay time.Duration, log *slog.Logger) {
	secs := c.retrySeconds(delay)
	err := c.retrying(ctx, EventRetry, func() error {
		return c.changeVisibility(ctx, f, secs, "", pacedHere)
	})
	if err != nil && ctx.Err() == nil {
		log.Warn("could not set the retry delay; the message comes back after its visibility timeout instead",
			"delay", delay, "err", err)
	} else {
		log.Debug("message left for a retry", "delay", delay)
	}
	c.forget(f)
}

// pacedHere is for the calls whose retries the consumer paces itself (the receive's backoff,
// retrying): one attempt each at the SDK, since its own retries, 50 ms apart from
// aws-sdk-go-v2 v1.48 on, would multiply the consumer's against a failing queue.
func pacedHere(o *awssqs.Options) { o.RetryMaxAttempts = 1 }

// retrying calls fn up to deleteAttempts times, pausing with a doubling backoff, unless the
// error cannot be cured by trying again or ctx ends. Each call is observed as event.
func (c *Consumer) retrying(ctx context.Context, event string, fn func() error) error {
	backoff := wait.Backoff{Duration: c.deleteBackoff, Factor: 2, Steps: math.MaxInt32}
	var err error
	for attempt := 1; ; attempt++ {
		err = fn()
		if event != "" {
			c.observe(event, err)
		}
		if err == nil || attempt >= c.deleteAttempts || permanent(err) || !sleep(ctx, backoff.Step()) {
			return err
		}
	}
}

// permanent reports errors that another attempt with the same input cannot fix: a receipt
// handle SQS no longer accepts, a missing queue, a bad request. A call that passed its own
// deadline is worth another attempt; the consumer's context ending is caught by the pause.
func permanent(err error) bool {
	if errors.Is(err, context.Canceled) {
		return true
	}
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return false
	}
	code := ae.ErrorCode()
	for _, p := range permanentCodes {
		if strings.EqualFold(code, p) {
			return true
		}
	}
	return false
}

// permanentCodes are SQS error codes (goaws spells some differently, hence the case-blind
// comparison) that retrying the same call cannot cure.
var permanentCodes = []string{
	"ReceiptHandleIsInvalid", "InvalidParameterValue", "MessageNotInflight",
	"AWS.SimpleQueueService.MessageNotInflight", "QueueDoesNotExist",
	"AWS.SimpleQueueService.NonExistentQueue", "MessageDoesNotExist", "AccessDenied",
	"InvalidAddress", "InvalidSecurity",
}

// deleteTombstoned deletes a copy of a message that was already handled and deleted.
func (c *Consumer) deleteTombstoned(ctx context.Context, id, handle string) {
	err := c.retrying(ctx, EventDelete, func() error {
		_, err := c.api.DeleteMessage(ctx, &awssqs.DeleteMessageInput{
			QueueUrl:      aws.String(c.opts.QueueURL),
			ReceiptHandle: aws.String(handle),
		}, pacedHere)
		return err
	})
	switch {
	case err == nil:
		c.log.Info("deleted a copy of a message handled before, without handling it again", "message", id)
	case ctx.Err() == nil:
		c.log.Error("could not delete a copy of a message handled before", "message", id, "err", err)
	}
}

func (c *Consumer) observe(event string, err error) {
	if c.opts.Observe != nil && event != "" {
		c.opts.Observe(event, err)
	}
}

// seconds converts d to the API's whole seconds, rounding up so that a timeout is never
// shorter than asked; at most 12 h.
func (c *Consumer) seconds(d time.Duration) int32 {
	const most = int64(maxVisibility / time.Second)
	if d <= 0 {
		return 0
	}
	if d/c.second >= time.Duration(most) {
		return int32(most)
	}
	return int32((d + c.second - 1) / c.second)
}

// retrySeconds is a handler's retry delay in the API's seconds, bounded to 0..12 h.
func (c *Consumer) retrySeconds(d time.Duration) int32 {
	return c.seconds(min(max(d, 0), maxVisibility))
}

// sleep waits d or until ctx ends; false means ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
