// SPDX-License-Identifier: Apache-2.0

package events

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
)

// The objects an Event is about, the lifeboat_events_dropped_total label.
const (
	ObjectNode = "node"
	ObjectPod  = "pod"
)

// Why an Event was not written, the lifeboat_events_dropped_total label.
const (
	DropQueueFull   = "queue_full"     // its queue was full: the API server took Events more slowly than they came
	DropRateLimited = "rate_limited"   // client-go's spam filter: too many Events about one object at once
	DropRefused     = "refused"        // the API server answered with an error (not "already exists")
	DropNamespace   = "namespace_gone" // its namespace is being deleted or is gone: nobody is left to read it
	DropUnsent      = "unsent"         // no answer after every attempt
	DropStopped     = "stopped"        // still queued when the process stopped
)

// DropCounter counts Events that were not written (the metrics).
type DropCounter interface {
	EventDropped(object, reason string)
}

// writerSettings size a writer and pace its attempts.
type writerSettings struct {
	queue, workers, attempts int
	// firstRetry is the wait before the second attempt, doubled after each up to lastRetry.
	firstRetry, lastRetry time.Duration
	// stopWait is how long the stop function waits for queued Events to be written.
	stopWait time.Duration
}

// Every Event waits in the background lane behind all other requests, so during a zone's
// reclaim the Events wait until the evictions are done: the nodes' queue holds the Events of
// a few thousand drains (about five each); the pods' queue is bounded lower, their Events
// being one per moved pod.
var (
	nodeWriter = writerSettings{queue: 8192, workers: 4, attempts: 5, firstRetry: time.Second, lastRetry: 10 * time.Second, stopWait: 5 * time.Second}
	podWriter  = writerSettings{queue: 4096, workers: 4, attempts: 5, firstRetry: time.Second, lastRetry: 10 * time.Second, stopWait: 5 * time.Second}
)

// dropLogEvery spaces the log lines about dropped Events (the first is logged at once).
const dropLogEvery = 30 * time.Second

// writer writes one object kind's Events from bounded queues of its own, several at a time.
// client-go's broadcaster builds each Event, and its spam filter and aggregation still apply;
// its own sink writes one Event at a time and, once its queue of 1000 is full, drops the rest
// without a word. Here every Event not written is counted and logged. Each worker has a queue
// of its own, and an object's Events all go to one of them: they are written in order, so a
// repeat never races the Event it repeats.
type writer struct {
	object     string
	settings   writerSettings
	sink       record.EventSink
	correlator *record.EventCorrelator
	counter    DropCounter
	logger     *slog.Logger
	drops      *dropLog

	mu     sync.Mutex
	closed bool
	queues []chan *corev1.Event // one per worker

	ctx     context.Context // ends when the stop function gives up waiting
	cancel  context.CancelFunc
	workers sync.WaitGroup
}

func newWriter(object string, settings writerSettings, sink record.EventSink, counter DropCounter, logger *slog.Logger) *writer {
	ctx, cancel := context.WithCancel(context.Background())
	w := &writer{object: object, settings: settings, sink: sink, correlator: record.NewEventCorrelatorWithOptions(record.CorrelatorOptions{}),
		counter: counter, logger: logger, drops: &dropLog{object: object, logger: logger},
		ctx: ctx, cancel: cancel}
	for range settings.workers {
		q := make(chan *corev1.Event, max(settings.queue/settings.workers, 1))
		w.queues = append(w.queues, q)
		w.workers.Add(1)
		go w.work(q)
	}
	return w
}

// attach has b deliver its Events to the writer, and returns b's recorder and the function
// that stops both (once; later calls do nothing).
func (w *writer) attach(b record.EventBroadcaster, source corev1.EventSource) (record.EventRecorder, func()) {
	marker := types.UID(fmt.Sprintf("lifeboat-stop-%x", rand.Uint64()))
	delivered := make(chan struct{})
	var markerOnce sync.Once
	b.StartEventWatcher(func(e *corev1.Event) {
		if e.InvolvedObject.UID == marker {
			markerOnce.Do(func() { close(delivered) })
			return
		}
		w.enqueue(e)
	})
	rec := b.NewRecorder(scheme.Scheme, source)
	var stopOnce sync.Once
	return rec, func() {
		stopOnce.Do(func() {
			// The broadcaster delivers in order, on a goroutine of its own: once this marker
			// arrives, every Event recorded before the stop is in the writer's queues.
			rec.Event(&corev1.ObjectReference{Kind: "Marker", Name: "stop", UID: marker}, corev1.EventTypeNormal, "Stop", "stop")
			select {
			case <-delivered:
			case <-time.After(w.settings.stopWait):
			}
			b.Shutdown()
			w.stop()
		})
	}
}

// queueOf is the queue of the worker that writes the object's Events.
func (w *writer) queueOf(e *corev1.Event) chan *corev1.Event {
	h := fnv.New32a()
	h.Write([]byte(e.InvolvedObject.Namespace + "/" + e.InvolvedObject.Name))
	return w.queues[h.Sum32()%uint32(len(w.queues))]
}

// enqueue takes an Event from the broadcaster; it never blocks.
func (w *writer) enqueue(e *corev1.Event) {
	w.logger.Debug("kubernetes event", "kind", e.InvolvedObject.Kind, "name", e.InvolvedObject.Name, "type", e.Type, "reason", e.Reason, "message", e.Message)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		w.dropped(e, DropStopped, nil)
		return
	}
	select {
	case w.queueOf(e) <- e:
	default:
		w.dropped(e, DropQueueFull, nil)
	}
}

// stop lets the workers write what is queued, for stopWait at most; the rest is dropped and
// counted. A write still waiting for the API server then is left to end by itself.
func (w *writer) stop() {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		for _, q := range w.queues {
			close(q)
		}
	}
	w.mu.Unlock()
	done := make(chan struct{})
	go func() { w.workers.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(w.settings.stopWait):
		w.cancel()
		for _, q := range w.queues { // the workers may be waiting for answers
			for e := range q {
				w.dropped(e, DropStopped, nil)
			}
		}
	}
	w.cancel()
	w.drops.flush()
}

func (w *writer) work(queue chan *corev1.Event) {
	defer w.workers.Done()
	for e := range queue {
		if w.ctx.Err() != nil {
			w.dropped(e, DropStopped, nil)
			continue
		}
		w.write(e)
	}
}

// write correlates the Event with the ones before it (client-go's aggregation and spam
// filter), then creates it, or patches the Event it repeats; it tries again when no answer came.
func (w *writer) write(e *corev1.Event) {
	copied := *e // the correlator changes what it is given
	result, err := w.correlator.EventCorrelate(&copied)
	if result == nil {
		w.dropped(e, DropRefused, err)
		return
	}
	if err != nil {
		w.logger.Debug("kubernetes event correlation failed", "error", err)
	}
	if result.Skip {
		w.dropped(e, DropRateLimited, nil)
		return
	}
	wait := w.settings.firstRetry
	for attempt := 1; ; attempt++ {
		err := w.send(result.Event, result.Patch)
		if err == nil {
			return
		}
		if namespaceGone(err) {
			w.dropped(e, DropNamespace, err)
			return
		}
		if !retryable(err) {
			w.dropped(e, DropRefused, err)
			return
		}
		if attempt >= w.settings.attempts {
			w.dropped(e, DropUnsent, err)
			return
		}
		// Jittered: agents on every node retry after one API server outage.
		select {
		case <-w.ctx.Done():
			w.dropped(e, DropStopped, err)
			return
		case <-time.After(wait/2 + rand.N(wait/2+1)):
		}
		wait = min(2*wait, w.settings.lastRetry)
	}
}

// send writes the Event once: a repeat patches the Event it repeats (created anew if that
// one is gone), the others are created. An Event that already exists counts as written.
func (w *writer) send(e *corev1.Event, patch []byte) error {
	var written *corev1.Event
	var err error
	repeat := e.Count > 1
	if repeat {
		written, err = w.sink.Patch(e, patch)
	}
	if !repeat || apierrors.IsNotFound(err) {
		fresh := e.DeepCopy()
		fresh.ResourceVersion = ""
		written, err = w.sink.Create(fresh)
	}
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if err == nil {
		w.correlator.UpdateState(written)
	}
	return err
}

// namespaceGone: the Event's namespace is being deleted or no longer exists (a pod's, as its
// namespace goes). Apart from the refusals, which say Lifeboat may not write Events at all.
func namespaceGone(err error) bool {
	if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
		return true
	}
	var status apierrors.APIStatus
	return apierrors.IsNotFound(err) && errors.As(err, &status) && status.Status().Details != nil && status.Status().Details.Kind == "namespaces"
}

// retryable: no answer came (the connection failed), so the Event may be sent again; an
// answer from the API server is final, as in client-go's own sink.
func retryable(err error) bool {
	var status apierrors.APIStatus
	var construction *rest.RequestConstructionError
	return !errors.As(err, &status) && !errors.As(err, &construction)
}

// dropped counts and logs an Event that was not written.
func (w *writer) dropped(e *corev1.Event, reason string, err error) {
	if w.counter != nil {
		w.counter.EventDropped(w.object, reason)
	}
	w.drops.add(e, reason, err)
}

// dropLog logs dropped Events: the first at once, then one line per dropLogEvery with how
// many were dropped since, by reason, and the last one's object and reason.
type dropLog struct {
	object string
	logger *slog.Logger

	mu       sync.Mutex
	last     time.Time
	counts   map[string]int
	example  *corev1.Event
	lastErr  error
	lastWhy  string
	unlogged int
}

func (d *dropLog) add(e *corev1.Event, reason string, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.counts == nil {
		d.counts = map[string]int{}
	}
	d.counts[reason]++
	d.unlogged++
	d.example, d.lastWhy, d.lastErr = e, reason, err
	if time.Since(d.last) >= dropLogEvery {
		d.logLocked()
	}
}

// flush logs what was dropped since the last line.
func (d *dropLog) flush() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.unlogged > 0 {
		d.logLocked()
	}
}

func (d *dropLog) logLocked() {
	about := d.example.InvolvedObject.Name
	if ns := d.example.InvolvedObject.Namespace; ns != "" {
		about = ns + "/" + about
	}
	attrs := []any{"object", d.object, "dropped", d.unlogged, "last_reason", d.lastWhy, "last_event", d.example.Reason, "last_about", about}
	for reason, n := range d.counts {
		attrs = append(attrs, reason, n)
	}
	if d.lastErr != nil {
		attrs = append(attrs, "error", d.lastErr.Error())
	}
	d.logger.Warn("Kubernetes Events dropped (lifeboat_events_dropped_total)", attrs...)
	d.last, d.unlogged, d.counts = time.Now(), 0, map[string]int{}
}
