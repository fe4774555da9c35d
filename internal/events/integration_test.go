// SPDX-License-Identifier: Apache-2.0

package events_test

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"

	"lifeboat.dev/lifeboat/internal/events"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/wiring"
	"lifeboat.dev/lifeboat/test/sandbox"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// nodeEvents lists the Events about a node, keyed by reason.
func nodeEvents(ctx context.Context, t *testing.T, c kubernetes.Interface, name string) map[string]corev1.Event {
	t.Helper()
	list, err := c.CoreV1().Events("").List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.name", name).String(),
	})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]corev1.Event{}
	for _, e := range list.Items {
		out[e.Reason] = e
	}
	return out
}

// waitForReasons polls until every reason has an Event on the node (the broadcaster writes
// asynchronously) or the context ends.
func waitForReasons(ctx context.Context, t *testing.T, c kubernetes.Interface, name string, reasons ...string) map[string]corev1.Event {
	t.Helper()
	for {
		got := nodeEvents(ctx, t, c, name)
		missing := []string{}
		for _, r := range reasons {
			if _, ok := got[r]; !ok {
				missing = append(missing, r)
			}
		}
		if len(missing) == 0 {
			return got
		}
		select {
		case <-ctx.Done():
			t.Fatalf("Events %v never appeared on node %s; have %v", missing, name, keys(got))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestEventsAgainstAPIServer(t *testing.T) {
	c, _ := sandboxtest.Shared(t, sandbox.ClusterOptions{NoKwok: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	next := 0
	newNode := func(t *testing.T) *corev1.Node {
		t.Helper()
		next++
		n, err := c.Client.CoreV1().Nodes().Create(ctx, sandbox.NodeSpec{Index: next}.Node(), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	newCountingRecorder := func(t *testing.T, dropped events.DropCounter, pairs ...string) (*events.Recorder, *sandboxtest.LogBuffer) {
		t.Helper()
		cfg := sandboxtest.Config(t, "", append([]string{"NODE_NAME", "lifeboat-host"}, pairs...)...)
		logs := &sandboxtest.LogBuffer{}
		r, stop, err := events.New(c.Client, wiring.Events(cfg, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})), dropped))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(stop)
		return r, logs
	}
	newRecorder := func(t *testing.T, pairs ...string) (*events.Recorder, *sandboxtest.LogBuffer) {
		t.Helper()
		return newCountingRecorder(t, nil, pairs...)
	}
	deadline := time.Now().Add(2 * time.Minute).UTC().Truncate(time.Second)

	t.Run("every reason reaches the API with type, message, source and annotations", func(t *testing.T) {
		n := newNode(t)
		r, logs := newRecorder(t, "EMIT_KUBERNETES_EVENTS", "true", "KUBERNETES_EVENTS_EXTRA_ANNOTATIONS", "team=infra,example.com/owner=sre")
		node := events.NodeOf(n)
		r.Notice(node, notice.Notice{ID: "spot-i-1", Kind: notice.SpotInterruption, InstanceID: "i-1", Deadline: deadline})
		r.Cordoned(node, "spot-i-1")
		r.DrainStarted(node, "spot-i-1", deadline)
		r.Drained(node, "spot-i-1", 3, 2*time.Second)
		r.DrainFailed(node, "spot-i-1", errors.New("budget says no"))
		r.Uncordoned(node, "event canceled")
		r.LifecycleCompleted(node, "hook", "i-1", "CONTINUE")

		want := map[string]struct{ eventType, message string }{
			"SpotInterruption":         {"Normal", "Spot interruption notice spot-i-1 for instance i-1, deadline " + deadline.Format(time.RFC3339)},
			"Cordon":                   {"Normal", "Cordoned for notice spot-i-1"},
			"DrainStarted":             {"Normal", "Draining for notice spot-i-1, deadline " + deadline.Format(time.RFC3339)},
			"CordonAndDrain":           {"Normal", "Cordoned and drained for notice spot-i-1: 3 pods evicted in 2s"},
			"CordonAndDrainError":      {"Warning", "Drain for notice spot-i-1 failed: budget says no"},
			"Uncordon":                 {"Normal", "Uncordoned: event canceled"},
			"LifecycleActionCompleted": {"Normal", "Completed lifecycle action of hook hook for instance i-1 with CONTINUE"},
		}
		reasons := keys(want)
		got := waitForReasons(ctx, t, c.Client, n.Name, reasons...)
		if len(got) != len(want) {
			t.Errorf("%d reasons on the node, want %d: %v", len(got), len(want), keys(got))
		}
		for reason, w := range want {
			e := got[reason]
			if e.Type != w.eventType || e.Message != w.message {
				t.Errorf("%s: got %s %q, want %s %q", reason, e.Type, e.Message, w.eventType, w.message)
			}
			if e.Namespace != metav1.NamespaceDefault || e.Source.Component != "lifeboat" || e.Source.Host != "lifeboat-host" || e.ReportingController != "lifeboat" {
				t.Errorf("%s: namespace %q source %+v reportingController %q", reason, e.Namespace, e.Source, e.ReportingController)
			}
			if o := e.InvolvedObject; o.Kind != "Node" || o.Name != n.Name || o.UID != n.UID || o.Namespace != "" {
				t.Errorf("%s: involved object %+v, want Node %s uid %s", reason, o, n.Name, n.UID)
			}
			if !maps.Equal(e.Annotations, map[string]string{"team": "infra", "example.com/owner": "sre"}) {
				t.Errorf("%s: annotations %v", reason, e.Annotations)
			}
			if !strings.Contains(logs.String(), "reason="+reason+" ") {
				t.Errorf("%s: not in the debug log:\n%s", reason, logs)
			}
		}
	})

	t.Run("dry run says what would happen and is marked", func(t *testing.T) {
		n := newNode(t)
		r, _ := newRecorder(t, "EMIT_KUBERNETES_EVENTS", "true", "DRY_RUN", "true")
		r.Cordoned(events.Node{Name: n.Name}, "sched-i-2-e1")
		r.Drained(events.Node{Name: n.Name}, "sched-i-2-e1", 4, time.Second)
		got := waitForReasons(ctx, t, c.Client, n.Name, "Cordon", "CordonAndDrain")
		for reason, wantMsg := range map[string]string{
			"Cordon":         "Dry run: would cordon for notice sched-i-2-e1",
			"CordonAndDrain": "Dry run: would evict 4 pods for notice sched-i-2-e1",
		} {
			e := got[reason]
			if e.Message != wantMsg || e.Annotations[events.AnnotationDryRun] != "true" {
				t.Errorf("%s: message %q annotations %v", reason, e.Message, e.Annotations)
			}
			// Without a UID the node name stands in, as for the kubelet's node Events.
			if string(e.InvolvedObject.UID) != n.Name {
				t.Errorf("%s: involved object UID %q", reason, e.InvolvedObject.UID)
			}
		}
	})

	t.Run("disabled records nothing", func(t *testing.T) {
		quiet, control := newNode(t), newNode(t)
		off, _ := newRecorder(t, "EMIT_KUBERNETES_EVENTS", "false", "KUBERNETES_EVENTS_EXTRA_ANNOTATIONS", "team=infra")
		if off.Enabled() {
			t.Fatal("enabled with EMIT_KUBERNETES_EVENTS=false")
		}
		off.Notice(events.NodeOf(quiet), notice.Notice{ID: "spot-i-3", Kind: notice.SpotInterruption, InstanceID: "i-3"})
		off.Cordoned(events.NodeOf(quiet), "spot-i-3")
		off.DrainFailed(events.NodeOf(quiet), "spot-i-3", errors.New("x"))
		// An enabled recorder, used after the disabled one, shows the API is taking Events.
		on, _ := newRecorder(t, "EMIT_KUBERNETES_EVENTS", "true")
		on.Cordoned(events.NodeOf(control), "spot-i-4")
		waitForReasons(ctx, t, c.Client, control.Name, "Cordon")
		if got := nodeEvents(ctx, t, c.Client, quiet.Name); len(got) != 0 {
			t.Errorf("disabled recorder wrote %v", keys(got))
		}
	})

	t.Run("a burst on one node is bounded by the spam filter", func(t *testing.T) {
		n := newNode(t)
		filtered := &filterCount{want: 61 - 25, all: make(chan struct{})}
		r, _ := newCountingRecorder(t, filtered, "EMIT_KUBERNETES_EVENTS", "true")
		for i := range 60 {
			r.Cordoned(events.NodeOf(n), "burst-"+strings.Repeat("x", i%3)+string(rune('a'+i%26)))
		}
		r.Uncordoned(events.NodeOf(n), "the last one")
		// The 25-Event burst passes; the rest, the last one included, are filtered (and
		// counted). An object's Events are written in order by one worker, so once the last
		// one is filtered, no more will come.
		count := func() int32 {
			list, err := c.Client.CoreV1().Events("").List(ctx, metav1.ListOptions{
				FieldSelector: fields.OneTermEqualSelector("involvedObject.name", n.Name).String(),
			})
			if err != nil {
				t.Fatal(err)
			}
			total := int32(0)
			for _, e := range list.Items {
				total += max(e.Count, 1) // similar Events are folded into one with a count
			}
			return total
		}
		select {
		case <-filtered.all:
		case <-ctx.Done():
			t.Fatalf("%d Events filtered, want %d", filtered.count(), filtered.want)
		}
		if got := count(); got != 25 {
			t.Errorf("%d Events recorded for a 61-Event burst on one node, want the burst of 25", got)
		}
	})

	t.Run("an Event the API server refuses is counted and logged", func(t *testing.T) {
		n := newNode(t)
		// A client whose user may not create Events, as with a ClusterRole that lacks them.
		rc, err := c.UserConfig("no-events")
		if err != nil {
			t.Fatal(err)
		}
		client, err := kubernetes.NewForConfig(rc)
		if err != nil {
			t.Fatal(err)
		}
		cfg := sandboxtest.Config(t, "", "NODE_NAME", "lifeboat-host", "EMIT_KUBERNETES_EVENTS", "true")
		logs := &sandboxtest.LogBuffer{}
		counted := &events.DropCounts{}
		r, stop, err := events.New(client, wiring.Events(cfg, slog.New(slog.NewTextHandler(logs, nil)), counted))
		if err != nil {
			t.Fatal(err)
		}
		r.Cordoned(events.NodeOf(n), "spot-i-5")
		r.PodEvicted(events.Pod{Namespace: "shop", Name: "app-0", UID: "uid-0"}, n.Name, 30)
		stop() // waits for the writes
		if got := counted.All(); got["node refused"] != 1 || got["pod refused"] != 1 || len(got) != 2 {
			t.Errorf("counted %v, want one refused Event on the node and one on the pod", got)
		}
		if !strings.Contains(logs.String(), "Kubernetes Events dropped") || !strings.Contains(logs.String(), "forbidden") {
			t.Errorf("the refusals were not logged with the API server's answer:\n%s", logs)
		}
		if got := nodeEvents(ctx, t, c.Client, n.Name); len(got) != 0 {
			t.Errorf("Events written without the right to: %v", keys(got))
		}
	})
}

// filterCount counts the Events client-go's spam filter stops, and closes all once want have
// been.
type filterCount struct {
	mu   sync.Mutex
	n    int
	want int
	all  chan struct{}
}

func (f *filterCount) EventDropped(_, reason string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if reason != events.DropRateLimited {
		return
	}
	if f.n++; f.n == f.want {
		close(f.all)
	}
}

func (f *filterCount) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}
