// SPDX-License-Identifier: Apache-2.0

package controller_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/daemon"
	"lifeboat.dev/lifeboat/internal/episode"
	"lifeboat.dev/lifeboat/internal/events"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/wiring"
)

// azVisible says whether the burst shows itself as the binary does by default: Events on nodes
// and pods, and the nodes' lifeboat.dev/Interruption condition (LIFEBOAT_SCALE_EVENTS, default
// true; false measures the burst without either, for the difference).
func azVisible(b *testing.B) bool {
	switch v := os.Getenv("LIFEBOAT_SCALE_EVENTS"); v {
	case "", "true":
		return true
	case "false":
		return false
	default:
		b.Fatalf("LIFEBOAT_SCALE_EVENTS=%q: want true or false", v)
		return false
	}
}

// azBackgroundSettled waits (at most azBackgroundWait) until the background lane's requests,
// the Events and the node conditions that go out after the burst's own work, have stopped for
// a few seconds, and reports how long that took.
func azBackgroundSettled(ctx context.Context, m *metrics.Metrics) time.Duration {
	const quiet, azBackgroundWait = 3 * time.Second, 3 * time.Minute
	start := time.Now()
	last, since := m.Value("lifeboat_kube_requests_total", "client", "events"), time.Now()
	for ctx.Err() == nil && time.Since(start) < azBackgroundWait && time.Since(since) < quiet {
		time.Sleep(250 * time.Millisecond)
		if now := m.Value("lifeboat_kube_requests_total", "client", "events"); now != last {
			last, since = now, time.Now()
		}
	}
	return time.Since(start)
}

// azBackgroundReport says what the Events and the node conditions cost over the burst: their
// requests (all in the background lane), Events per pod moved, condition writes per node, and
// all of Lifeboat's requests with them, for the run without them (LIFEBOAT_SCALE_EVENTS=false)
// to compare.
func azBackgroundReport(ctx context.Context, say func(string, ...any), client kubernetes.Interface, before, final azCounts, visible bool, nodes int, settled time.Duration) {
	var all, eventReqs, statusReqs, statusConflicts, moved float64
	for k, v := range final.kube {
		v -= before.kube[k]
		all += v
		switch {
		case k.resource == "events":
			eventReqs += v
		case strings.HasPrefix(k.resource, "nodes/status"):
			statusReqs += v
			if k.code == "409" {
				statusConflicts += v
			}
		case k.resource == "pods/eviction" && k.code == "201":
			moved += v
		}
	}
	podEvents, nodeEvents := 0, 0
	if visible {
		podEvents = azCountEvents(ctx, client, fields.OneTermEqualSelector("reason", events.ReasonPodEvicted))
		nodeEvents = azCountEvents(ctx, client, fields.AndSelectors(fields.OneTermEqualSelector("source", events.Component),
			fields.OneTermEqualSelector("involvedObject.kind", "Node")))
	}
	say("Events and node conditions (LIFEBOAT_SCALE_EVENTS=%v; background lane; settled %s after the burst):", visible, settled.Round(100*time.Millisecond))
	say("  pods moved (evictions accepted) %.0f; %s Events on pods %d; Lifeboat's Events on nodes %d; Events dropped (object and reason) %s",
		moved, events.ReasonPodEvicted, podEvents, nodeEvents, azFormat(azDiff(final.eventsDropped, before.eventsDropped)))
	say("  Event requests %.0f: %.2f per moved pod (with the nodes' own Events); node condition patches %.0f (%.0f of them refused on a conflict, then "+
		"read again): %.1f written per node", eventReqs, eventReqs/max(moved, 1), statusReqs, statusConflicts, (statusReqs-statusConflicts)/float64(max(nodes, 1)))
	say("  Lifeboat's Kubernetes requests, the late Events included: %.0f (%.2f per moved pod)", all, all/max(moved, 1))
}

// azHandler is the handler's options as the binary builds them: cordons in the urgent lane,
// Events and node conditions in the background lane.
func azHandler(b *testing.B, clients *daemon.Clients, cfg *config.Config, m *metrics.Metrics) episode.Options {
	recorder, stop, err := events.New(clients.Events, wiring.Events(cfg, nil, m))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(stop)
	return episode.Options{CordonClient: clients.Cordon, StatusClient: clients.Events, Events: recorder}
}

// azCountEvents counts the Events the selector matches (from the API server's cache).
func azCountEvents(ctx context.Context, client kubernetes.Interface, selector fields.Selector) int {
	list, err := client.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: selector.String(), ResourceVersion: "0"})
	if err != nil {
		return 0
	}
	return len(list.Items)
}
