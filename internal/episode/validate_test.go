package episode

import (
	"context"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

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
