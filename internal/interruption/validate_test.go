package interruption

import (
	"context"
	"encoding/json"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

const testInstance = "i-0123456789abcdef0"

// goodRecord is a record as Lifeboat writes it for a termination hook being drained.
func goodRecord() Record {
	id := notice.ID(notice.ASGTermination, testInstance, notice.TokenDigest("t"))
	return Record{Version: RecordVersion, BootID: "b1", Notices: []string{id}, Phase: PhaseDraining,
		Deadline: time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC),
		Intents: []Intent{{ID: id, Kind: string(notice.ASGTermination), Source: string(notice.SourceQueue), InstanceID: testInstance,
			Origin: "queue https://sqs.us-east-1.amazonaws.com/000000000000/lifeboat", Lifecycle: &IntentLifecycle{Group: "workers", Hook: "drain"}}},
		Owner:    &Owner{Origin: "queue https://sqs.us-east-1.amazonaws.com/000000000000/lifeboat", Holder: "lifeboat-0/1"},
		Held:     []string{"db/primary"},
		Handback: &HandbackRecord{Claims: []string{"db/data-primary"}, PodIPs: []string{"10.0.0.7"}},
	}
}

func nodeWith(annotation string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{AnnotationRecord: annotation}},
		Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/" + testInstance, Unschedulable: true}}
	n.Status.NodeInfo.BootID = "b1"
	return n
}

func encode(t testing.TB, r Record) string {
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestReadRecordValidates(t *testing.T) {
	if r, err := ReadRecord(nodeWith(encode(t, goodRecord()))); err != nil || !r.Open() {
		t.Fatalf("a record as Lifeboat writes it: %+v, %v", r, err)
	}
	long := strings.Repeat("x", 256)
	for _, tc := range []struct {
		name  string
		edit  func(r *Record)
		field string // named in the error
	}{
		{"another instance", func(r *Record) { r.Intents[0].InstanceID = "i-0fedcba9876543210" }, "not the node's instance"},
		{"no instance", func(r *Record) { r.Intents[0].InstanceID = "" }, "instanceID"},
		{"path in instance", func(r *Record) { r.Intents[0].InstanceID = "i-0123/../x" }, "instanceID"},
		{"unknown kind", func(r *Record) { r.Intents[0].Kind = "reboot-everything" }, "kind"},
		{"launch kind", func(r *Record) { r.Intents[0].Kind = string(notice.ASGLaunch) }, "kind"},
		{"unknown source", func(r *Record) { r.Intents[0].Source = "webhook" }, "source"},
		{"group too long", func(r *Record) { r.Intents[0].Lifecycle.Group = long }, "lifecycle.group"},
		{"no group", func(r *Record) { r.Intents[0].Lifecycle.Group = "" }, "lifecycle.group"},
		{"hook too long", func(r *Record) { r.Intents[0].Lifecycle.Hook = long }, "lifecycle.hook"},
		{"lifecycle on a spot notice", func(r *Record) { r.Intents[0].Kind = string(notice.SpotInterruption) }, "no lifecycle action"},
		{"notice id with spaces", func(r *Record) { r.Notices = append(r.Notices, "spot i-1") }, "notices[1]"},
		{"notice id too long", func(r *Record) { r.Finished = []string{strings.Repeat("a", 64)} }, "finished[0]"},
		{"intent id", func(r *Record) { r.Intents[0].ID = "X" }, "intents[0]: id"},
		{"too many notices", func(r *Record) {
			for range maxNotices {
				r.Notices = append(r.Notices, "spot-i-1")
			}
		}, "notices: 257 entries"},
		{"unknown outcome", func(r *Record) { r.Reported = []string{"terminated"} }, "reported[0]"},
		{"held pod", func(r *Record) { r.Held = []string{"no-slash"} }, "held[0]"},
		{"pod IP", func(r *Record) { r.Handback.PodIPs = []string{"10.0.0.7; rm -rf"} }, "handback.podIPs[0]"},
		{"owner origin", func(r *Record) { r.Owner.Origin = strings.Repeat("q", maxOriginLength+1) }, "owner.origin"},
		{"heartbeat notice", func(r *Record) { r.Heartbeat = &Heartbeat{Notice: "../x", Count: 1} }, "heartbeat.notice"},
		{"negative count", func(r *Record) { r.Heartbeat = &Heartbeat{Notice: r.Notices[0], Count: -1} }, "heartbeat.count"},
		{"description", func(r *Record) { r.Intents[0].Description = strings.Repeat("d", maxDescription+10) }, "description"},
		{"retained without a group", func(r *Record) { r.Retained = &Retention{Notices: r.Notices} }, "retained: group"},
		{"retained in another group", func(r *Record) { r.Retained = &Retention{Group: "other", Notices: r.Notices} }, "not a recorded termination hook"},
		{"retained notice not recorded", func(r *Record) { r.Retained = &Retention{Group: "workers", Notices: []string{"spot-i-1"}} }, "retained: notices[0]"},
		{"retained, no notice", func(r *Record) { r.Retained = &Retention{Group: "workers"} }, "retained: notices: 0 entries"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := goodRecord()
			tc.edit(&r)
			got, err := ReadRecord(nodeWith(encode(t, r)))
			if err == nil {
				t.Fatalf("accepted: %+v", got)
			}
			if !strings.Contains(err.Error(), tc.field) || !strings.Contains(err.Error(), AnnotationRecord) {
				t.Errorf("error %q does not name the annotation and %q", err, tc.field)
			}
			if !reflect.DeepEqual(got, Record{}) {
				t.Errorf("an invalid record read as %+v, want nothing of it", got)
			}
		})
	}
	for name, raw := range map[string]string{
		"unknown phase": strings.Replace(encode(t, goodRecord()), `"phase":"draining"`, `"phase":"finished-elsewhere"`, 1),
		"not JSON":      "{",
		"too large":     `{"version":4,"description":"` + strings.Repeat("x", maxRecordBytes) + `"}`,
	} {
		if got, err := ReadRecord(nodeWith(raw)); err == nil || !reflect.DeepEqual(got, Record{}) {
			t.Errorf("%s: read as %+v, %v; want an error and nothing of it", name, got, err)
		}
	}
	// A newer schema is left alone, whatever it holds.
	if got, err := ReadRecord(nodeWith(`{"version":99,"intents":[{"kind":"new-kind"}]}`)); err != nil || got.Known() {
		t.Errorf("a newer record read as %+v, %v; want it unknown and left alone", got, err)
	}
}

// Records written before version 4 kept the lifecycle token: it is read, never carried on,
// and gone from the annotation at the next write.
func TestLegacyTokenDropped(t *testing.T) {
	r := goodRecord()
	r.Version = 3
	r.Intents[0].Lifecycle.LegacyToken = "6f1d3c2a-9b8e-4d7f-a1c0-5e4b3a2f1d0c"
	node := nodeWith(encode(t, r))
	got, err := ReadRecord(node)
	if err != nil {
		t.Fatal(err)
	}
	if lc := got.Intents[0].Lifecycle; lc.LegacyToken != "" || got.Intents[0].Notice().Lifecycle.Group != "workers" {
		t.Errorf("read %+v", lc)
	}
	editRecord(func(r *Record) { r.Phase = PhaseDrained })(node)
	if strings.Contains(node.Annotations[AnnotationRecord], "6f1d3c2a") {
		t.Errorf("the token is still on the node after a write: %s", node.Annotations[AnnotationRecord])
	}
}

// An invalid record is reported once, never acted on, and the next notice starts afresh.
func TestInvalidRecordReportedOnceAndReplaced(t *testing.T) {
	ctx := context.Background()
	bad := goodRecord()
	bad.Intents[0].InstanceID = "i-0fedcba9876543210" // copied from another node
	node := nodeWith(encode(t, bad))
	client := fake.NewSimpleClientset(node)
	logs := &sandboxtest.LogBuffer{}
	m := metrics.New()
	called := 0
	h := NewHandler(sandboxtest.Config(t, ""), client, slog.New(slog.NewTextHandler(logs, nil)), Options{Metrics: m,
		Complete: func(context.Context, string, notice.Notice) (*Completed, error) { called++; return nil, nil }})
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
	spot := notice.Notice{ID: notice.ID(notice.SpotInterruption, testInstance, "terminate"), Kind: notice.SpotInterruption,
		Source: notice.SourceIMDS, InstanceID: testInstance, Deadline: time.Now().Add(2 * time.Minute)}
	if err := h.Intake(ctx, spot, "n1", nil); err != nil {
		t.Fatal(err)
	}
	got, _ := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	r, err := ReadRecord(got)
	if err != nil || !reflect.DeepEqual(r.Notices, []string{spot.ID}) || len(r.Intents) != 1 {
		t.Errorf("after a new notice: %+v, %v; want a fresh record of that notice alone", r, err)
	}
}

// A hook message from before a rollout, delivered again, is the notice its older id names
// in the record, not a second one.
func TestLegacyIDMatched(t *testing.T) {
	old := notice.ID(notice.ASGTermination, testInstance, "6f1d3c2a-9b8e-4d7f-a1c0-5e4b3a2f1d0c")
	n := notice.Notice{ID: notice.ID(notice.ASGTermination, testInstance, notice.TokenDigest("6f1d3c2a-9b8e-4d7f-a1c0-5e4b3a2f1d0c")), LegacyID: old}
	if got := (Record{Notices: []string{old}}).matchLegacyID(n); got.ID != old {
		t.Errorf("recorded under the old id: got %q", got.ID)
	}
	if got := (Record{Released: []string{old}}).matchLegacyID(n); got.ID != old {
		t.Errorf("released under the old id: got %q", got.ID)
	}
	if got := (Record{Notices: []string{"spot-i-1"}}).matchLegacyID(n); got.ID != n.ID {
		t.Errorf("not recorded: got %q, want the current id", got.ID)
	}
}

// FuzzReadRecord: whatever a node credential writes into the annotation, reading it never
// panics, an error leaves nothing of it, and a record that is accepted survives being
// written back and read again unchanged.
func FuzzReadRecord(f *testing.F) {
	f.Add(encode(f, goodRecord()))
	f.Add(`{"version":1,"bootID":"b1","notices":["spot-i-1"],"phase":"drained","finished":["spot-i-1"],"notified":true}`)
	f.Add(`{"version":3,"intents":[{"id":"a","kind":"asg-termination","source":"queue","instanceID":"i-1","lifecycle":{"group":"g","hook":"h","token":"t"}}]}`)
	f.Add(`{"version":99}`)
	f.Add(`{"phase":"nope"}`)
	f.Add(`{"version":5,"notices":["asg-term-a"],"phase":"draining","intents":[{"id":"asg-term-a","kind":"asg-termination","source":"queue","instanceID":"i-0123456789abcdef0","lifecycle":{"group":"g","hook":"h"}}],"retained":{"group":"g","notices":["asg-term-a"],"since":"2026-11-28T09:00:00Z","until":"2026-11-29T09:00:00Z"}}`)
	f.Fuzz(func(t *testing.T, raw string) {
		node := nodeWith(raw)
		r, err := ReadRecord(node)
		if err != nil {
			if !reflect.DeepEqual(r, Record{}) {
				t.Fatalf("error %v with a record %+v", err, r)
			}
			return
		}
		if !r.Known() {
			return
		}
		writeRecord(node, r)
		again, err := ReadRecord(node)
		if err != nil {
			t.Fatalf("a record Lifeboat accepted and wrote back is refused: %v\n%s", err, node.Annotations[AnnotationRecord])
		}
		if r.Version == 0 {
			r.Version = RecordVersion
		}
		if encode(t, again) != encode(t, r) {
			t.Fatalf("written back and read again:\n%s\nwant\n%s", encode(t, again), encode(t, r))
		}
	})
}
