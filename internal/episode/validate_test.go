// SPDX-License-Identifier: Apache-2.0

package episode

import (
	"context"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"

	"lifeboat.dev/lifeboat/internal/events"
	"lifeboat.dev/lifeboat/internal/lifecycle"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/record"
	"lifeboat.dev/lifeboat/internal/record/recordtest"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// An invalid record is reported once, never acted on, and the next notice starts afresh.
func TestInvalidRecordReportedOnceAndReplaced(t *testing.T) {
	ctx := context.Background()
	bad := recordtest.Good()
	bad.Intents[0].InstanceID = "i-0fedcba9876543210" // copied from another node
	node := recordtest.NodeWith(recordtest.Encode(t, bad))
	client := fake.NewSimpleClientset(node)
	logs := &sandboxtest.LogBuffer{}
	m := metrics.New()
	called := 0
	h := NewHandler(sandboxtest.Config(t, ""), client, slog.New(slog.NewTextHandler(logs, nil)), Options{Metrics: m,
		Completer: CompleteFunc(func(context.Context, string, notice.Notice) (*lifecycle.Completed, error) { called++; return nil, nil })})
	for range 3 {
		if wait, err := h.Reconcile(ctx, node); err != nil || wait != 0 {
			t.Fatalf("reconcile: %v, %v", wait, err)
		}
	}
	if called != 0 || podLists(client) != 0 {
		t.Errorf("an invalid record was acted on: %d completions, %d pod lists", called, podLists(client))
	}
	if got := m.Value("lifeboat_invalid_records_total"); got != 1 {
		t.Errorf("lifeboat_invalid_records_total = %v after three reads, want 1", got)
	}
	if n := strings.Count(logs.String(), "interruption record is unreadable or invalid"); n != 1 {
		t.Errorf("%d log lines about the record, want 1:\n%s", n, logs.String())
	}
	spot := notice.Notice{ID: notice.ID(notice.SpotInterruption, recordtest.Instance, "terminate"), Kind: notice.SpotInterruption,
		Source: notice.SourceIMDS, InstanceID: recordtest.Instance, Deadline: time.Now().Add(2 * time.Minute)}
	if err := h.Intake(ctx, spot, "n1", nil); err != nil {
		t.Fatal(err)
	}
	got, _ := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	r, err := record.Read(got)
	if err != nil || !reflect.DeepEqual(r.Notices, []string{spot.ID}) || len(r.Intents) != 1 {
		t.Errorf("after a new notice: %+v, %v; want a fresh record of that notice alone", r, err)
	}
}

// What a newer Lifeboat wrote is left to it while it may be at work, and said once: a record
// of a newer schema version (left whole) and a notice of an unknown kind (left alone beside
// the others).
func TestLeftToNewerSaidOnce(t *testing.T) {
	ctx := context.Background()
	newer := recordtest.Good()
	newer.Version = record.Version + 1
	newer.Deadline = time.Now().Add(time.Hour) // its hold (record.NewerHold) runs after it
	future := recordtest.Good()
	future.Released = []string{future.Intents[0].ID}
	unknown := record.Intent{ID: "from-the-future-1", Kind: "from-the-future", Source: string(notice.SourceQueue), InstanceID: recordtest.Instance}
	future.Notices = append(future.Notices, unknown.ID)
	future.Intents = append(future.Intents, unknown)
	for _, c := range []struct {
		name   string
		rec    record.Record
		what   string
		reason string
	}{
		{"newer schema", newer, metrics.LeftRecord, "schema version"},
		{"unknown kind", future, metrics.LeftNotice, `kind "from-the-future"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			node := recordtest.NodeWith(recordtest.Encode(t, c.rec))
			client := fake.NewSimpleClientset(node)
			logs := &sandboxtest.LogBuffer{}
			m := metrics.New()
			recorder, stop, err := events.New(client, events.Options{Enabled: true, Host: "test"})
			if err != nil {
				t.Fatal(err)
			}
			defer stop()
			h := NewHandler(sandboxtest.Config(t, ""), client, slog.New(slog.NewTextHandler(logs, nil)), Options{Metrics: m, Events: recorder})
			for range 3 {
				if _, err := h.Reconcile(ctx, node); err != nil {
					t.Fatalf("reconcile: %v", err)
				}
			}
			if podLists(client) != 0 {
				t.Errorf("what a newer Lifeboat wrote was acted on: %d pod lists", podLists(client))
			}
			if got := m.Value("lifeboat_left_to_newer_total", "what", c.what); got != 1 {
				t.Errorf("lifeboat_left_to_newer_total{what=%q} = %v after three reconciles, want 1", c.what, got)
			}
			if n := strings.Count(logs.String(), "left"); n != 1 {
				t.Errorf("%d log lines, want 1:\n%s", n, logs.String())
			}
			var said []string
			if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 5*time.Second, true, func(ctx context.Context) (bool, error) {
				list, err := client.CoreV1().Events("").List(ctx, metav1.ListOptions{})
				said = said[:0]
				for _, e := range list.Items {
					if e.Reason == events.ReasonLeftToNewer {
						said = append(said, e.Message)
					}
				}
				return len(said) > 0, err
			}); err != nil || len(said) != 1 || !strings.Contains(said[0], c.reason) {
				t.Errorf("Events %s: %q (%v); want one naming %s", events.ReasonLeftToNewer, said, err, c.reason)
			}
		})
	}
}
