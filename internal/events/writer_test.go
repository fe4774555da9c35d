// SPDX-License-Identifier: Apache-2.0

package events

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/record"

	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// fakeSink answers each write with the next of its errors (nil once they run out), after the
// gate opens when there is one.
type fakeSink struct {
	mu      sync.Mutex
	gate    chan struct{}
	errs    []error
	created []string // the Events' names, as written
	calls   int
	called  chan struct{} // closed at the first call
}

// firstCall is closed once the writer has sent its first Event.
func (s *fakeSink) firstCall() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.called == nil {
		s.called = make(chan struct{})
	}
	return s.called
}

func (s *fakeSink) answer(e *corev1.Event) (*corev1.Event, error) {
	s.mu.Lock()
	if s.called == nil {
		s.called = make(chan struct{})
	}
	select {
	case <-s.called:
	default:
		close(s.called)
	}
	s.mu.Unlock()
	if s.gate != nil {
		<-s.gate
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if len(s.errs) > 0 {
		err := s.errs[0]
		s.errs = s.errs[1:]
		if err != nil {
			return nil, err
		}
	}
	s.created = append(s.created, e.Name)
	return e, nil
}

func (s *fakeSink) Create(e *corev1.Event) (*corev1.Event, error) { return s.answer(e) }
func (s *fakeSink) Update(e *corev1.Event) (*corev1.Event, error) { return s.answer(e) }
func (s *fakeSink) Patch(e *corev1.Event, _ []byte) (*corev1.Event, error) {
	return s.answer(e)
}

func (s *fakeSink) written() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.created...)
}

// dropCounts counts what the writer reports as dropped, by object and reason.
type dropCounts struct {
	mu     sync.Mutex
	counts map[string]int
}

func (d *dropCounts) EventDropped(object, reason string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.counts == nil {
		d.counts = map[string]int{}
	}
	d.counts[object+" "+reason]++
}

func (d *dropCounts) get(key string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.counts[key]
}

// all is every count so far, by object and reason.
func (d *dropCounts) all() map[string]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return maps.Clone(d.counts)
}

func podEventNamed(i int) *corev1.Event {
	return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("app-%d.1", i), Namespace: "shop"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "shop", Name: fmt.Sprintf("app-%d", i), UID: "uid"},
		Reason:         ReasonPodEvicted, Message: fmt.Sprintf("evicted %d", i), Type: corev1.EventTypeNormal, Count: 1,
		Source: corev1.EventSource{Component: Component}}
}

// waitTaken waits until the writer's one worker has taken what was queued: it is sending it.
func waitTaken(t *testing.T, sink *fakeSink) {
	t.Helper()
	select {
	case <-sink.firstCall():
	case <-time.After(5 * time.Second):
		t.Fatal("the worker never took the queued Event")
	}
}

func testSettings() writerSettings {
	return writerSettings{queue: 2, workers: 1, attempts: 3, firstRetry: time.Millisecond, lastRetry: 2 * time.Millisecond, stopWait: 5 * time.Second}
}

func TestWriterCountsAndLogsWhatItsFullQueueDrops(t *testing.T) {
	sink := &fakeSink{gate: make(chan struct{})}
	drops := &dropCounts{}
	logs := &sandboxtest.LogBuffer{}
	w := newWriter(ObjectPod, testSettings(), sink, drops, slog.New(slog.NewTextHandler(logs, nil)))
	w.enqueue(podEventNamed(0))
	waitTaken(t, sink)
	for i := 1; i < 10; i++ {
		w.enqueue(podEventNamed(i))
	}
	if got := drops.get("pod queue_full"); got != 7 {
		t.Errorf("dropped as queue_full: %d, want 7 (one with the worker, two queued)", got)
	}
	if !strings.Contains(logs.String(), "Kubernetes Events dropped") || !strings.Contains(logs.String(), "last_about=shop/app-3") {
		t.Errorf("the first drop was not logged at once: %q", logs.String())
	}
	close(sink.gate)
	w.stop()
	if got := sink.written(); len(got) != 3 {
		t.Errorf("written %v, want the three the writer held", got)
	}
	if !strings.Contains(logs.String(), "dropped=6") {
		t.Errorf("the stop did not log the drops since the first line: %q", logs.String())
	}
	if got := drops.get("pod stopped"); got != 0 {
		t.Errorf("dropped at the stop: %d, want none (all were written in time)", got)
	}
	w.enqueue(podEventNamed(99))
	if got := drops.get("pod stopped"); got != 1 {
		t.Errorf("an Event after the stop: dropped as stopped %d times, want 1", got)
	}
}

func TestWriterTriesAgainOnlyWithoutAnAnswer(t *testing.T) {
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "events"}, "x", errors.New("no"))
	cases := []struct {
		name      string
		errs      []error
		calls     int
		written   int
		dropped   string
		errLogged string
	}{
		{name: "no answer twice, then written", errs: []error{errors.New("connection refused"), errors.New("connection reset")}, calls: 3, written: 1},
		{name: "no answer at every attempt", errs: []error{errors.New("refused"), errors.New("refused"), errors.New("refused")}, calls: 3, dropped: DropUnsent, errLogged: "refused"},
		{name: "refused by the API server: not sent again", errs: []error{forbidden}, calls: 1, dropped: DropRefused, errLogged: "forbidden"},
		{name: "its namespace gone: not sent again, not counted as refused", errs: []error{apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "shop")}, calls: 1, dropped: DropNamespace, errLogged: "not found"},
		{name: "its namespace terminating", errs: []error{&apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 403, Reason: metav1.StatusReasonForbidden,
			Message: "namespace shop is being terminated", Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause}}}}}},
			calls: 1, dropped: DropNamespace, errLogged: "being terminated"},
		{name: "already there: written", errs: []error{apierrors.NewAlreadyExists(schema.GroupResource{Resource: "events"}, "app-0.1")}, calls: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sink := &fakeSink{errs: c.errs}
			drops := &dropCounts{}
			logs := &sandboxtest.LogBuffer{}
			w := newWriter(ObjectPod, testSettings(), sink, drops, slog.New(slog.NewTextHandler(logs, nil)))
			w.enqueue(podEventNamed(0))
			w.stop()
			if sink.calls != c.calls || len(sink.written()) != c.written {
				t.Errorf("calls %d, written %d; want %d and %d", sink.calls, len(sink.written()), c.calls, c.written)
			}
			for _, reason := range []string{DropUnsent, DropRefused, DropNamespace, DropQueueFull, DropStopped, DropRateLimited} {
				want := 0
				if reason == c.dropped {
					want = 1
				}
				if got := drops.get("pod " + reason); got != want {
					t.Errorf("dropped as %s: %d, want %d", reason, got, want)
				}
			}
			if c.errLogged != "" && !strings.Contains(logs.String(), c.errLogged) {
				t.Errorf("the drop's log line does not give the error %q: %q", c.errLogged, logs.String())
			}
			if c.dropped == "" && logs.String() != "" {
				t.Errorf("logged without a drop: %q", logs.String())
			}
		})
	}
}

func TestWriterCountsWhatTheStopLeaves(t *testing.T) {
	sink := &fakeSink{gate: make(chan struct{})} // the API server never answers
	defer close(sink.gate)
	drops := &dropCounts{}
	settings := testSettings()
	settings.stopWait = 50 * time.Millisecond
	w := newWriter(ObjectNode, settings, sink, drops, slog.New(slog.DiscardHandler))
	w.enqueue(podEventNamed(0))
	waitTaken(t, sink)
	w.enqueue(podEventNamed(1))
	w.enqueue(podEventNamed(2))
	start := time.Now()
	w.stop()
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("stop took %s with the API server silent", took)
	}
	// One Event is with the worker, waiting for its answer; the two queued are dropped.
	if got := drops.get("node stopped"); got != 2 {
		t.Errorf("dropped at the stop: %d, want 2", got)
	}
}

func TestWriterCountsTheSpamFilter(t *testing.T) {
	sink := &fakeSink{}
	drops := &dropCounts{}
	settings := testSettings()
	settings.queue = 100
	w := newWriter(ObjectNode, settings, sink, drops, slog.New(slog.DiscardHandler))
	// client-go's filter lets a burst of 25 Events about one object through.
	for i := range 30 {
		e := podEventNamed(0)
		e.Name, e.Message = fmt.Sprintf("app-0.%d", i), fmt.Sprintf("message %d", i)
		w.enqueue(e)
	}
	w.stop()
	if got := drops.get("node rate_limited"); got != 5 {
		t.Errorf("dropped by the spam filter: %d, want 5 of 30", got)
	}
}

func TestStopWritesWhatWasRecordedBeforeIt(t *testing.T) {
	sink := &fakeSink{}
	drops := &dropCounts{}
	settings := testSettings()
	settings.queue, settings.workers = 200, 4
	rec, stop := newWriter(ObjectPod, settings, sink, drops, slog.New(slog.DiscardHandler)).attach(record.NewBroadcaster(), corev1.EventSource{Component: Component})
	for i := range 50 {
		rec.Event(&corev1.ObjectReference{Kind: "Pod", Namespace: "shop", Name: fmt.Sprintf("app-%d", i), UID: "uid"}, corev1.EventTypeNormal, ReasonPodEvicted, "evicted")
	}
	stop() // at once: the Events may still be on their way through the broadcaster
	stop() // a second stop does nothing
	if got, dropped := len(sink.written()), drops.all(); got != 50 || len(dropped) != 0 {
		t.Errorf("written %d of 50 Events recorded before the stop; dropped %v", got, dropped)
	}
}
