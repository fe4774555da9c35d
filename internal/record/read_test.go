// SPDX-License-Identifier: Apache-2.0

package record_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/record"
	"lifeboat.dev/lifeboat/internal/record/recordtest"
)

func TestReadRecordValidates(t *testing.T) {
	if r, err := record.Read(recordtest.NodeWith(recordtest.Encode(t, recordtest.Good()))); err != nil || !r.Open() {
		t.Fatalf("a record as Lifeboat writes it: %+v, %v", r, err)
	}
	long := strings.Repeat("x", 256)
	for _, tc := range []struct {
		name  string
		edit  func(r *record.Record)
		field string // named in the error
	}{
		{"another instance", func(r *record.Record) { r.Intents[0].InstanceID = "i-0fedcba9876543210" }, "not the node's instance"},
		{"no instance", func(r *record.Record) { r.Intents[0].InstanceID = "" }, "instanceID"},
		{"path in instance", func(r *record.Record) { r.Intents[0].InstanceID = "i-0123/../x" }, "instanceID"},
		{"not a kind", func(r *record.Record) { r.Intents[0].Kind = "Reboot everything!" }, "kind"},
		{"launch kind", func(r *record.Record) { r.Intents[0].Kind = string(notice.ASGLaunch) }, "kind"},
		{"unknown source", func(r *record.Record) { r.Intents[0].Source = "webhook" }, "source"},
		{"group too long", func(r *record.Record) { r.Intents[0].Lifecycle.Group = long }, "lifecycle.group"},
		{"no group", func(r *record.Record) { r.Intents[0].Lifecycle.Group = "" }, "lifecycle.group"},
		{"hook too long", func(r *record.Record) { r.Intents[0].Lifecycle.Hook = long }, "lifecycle.hook"},
		{"lifecycle on a spot notice", func(r *record.Record) { r.Intents[0].Kind = string(notice.SpotInterruption) }, "no lifecycle action"},
		{"notice id with spaces", func(r *record.Record) { r.Notices = append(r.Notices, "spot i-1") }, "notices[1]"},
		{"notice id too long", func(r *record.Record) { r.Finished = []string{strings.Repeat("a", 64)} }, "finished[0]"},
		{"intent id", func(r *record.Record) { r.Intents[0].ID = "X" }, "intents[0]: id"},
		{"too many notices", func(r *record.Record) {
			for range record.MaxNotices {
				r.Notices = append(r.Notices, "spot-i-1")
			}
		}, "notices: 257 entries"},
		{"unknown outcome", func(r *record.Record) { r.Reported = []string{"terminated"} }, "reported[0]"},
		{"held pod", func(r *record.Record) { r.Held = []string{"no-slash"} }, "held[0]"},
		{"pod IP", func(r *record.Record) { r.Detach.PodIPs = []string{"10.0.0.7; rm -rf"} }, "handback.podIPs[0]"},
		{"owner origin", func(r *record.Record) { r.Owner.Origin = strings.Repeat("q", record.MaxOriginLength+1) }, "owner.origin"},
		{"heartbeat notice", func(r *record.Record) { r.Heartbeat = &record.Heartbeat{Notice: "../x", Count: 1} }, "heartbeat.notice"},
		{"negative count", func(r *record.Record) { r.Heartbeat = &record.Heartbeat{Notice: r.Notices[0], Count: -1} }, "heartbeat.count"},
		{"description", func(r *record.Record) { r.Intents[0].Description = strings.Repeat("d", record.MaxDescription+10) }, "description"},
		{"retained without a group", func(r *record.Record) { r.Retained = &record.Retention{Notices: r.Notices} }, "retained: group"},
		{"retained in another group", func(r *record.Record) { r.Retained = &record.Retention{Group: "other", Notices: r.Notices} }, "not a recorded termination hook"},
		{"retained notice not recorded", func(r *record.Record) {
			r.Retained = &record.Retention{Group: "workers", Notices: []string{"spot-i-1"}}
		}, "retained: notices[0]"},
		{"retained, no notice", func(r *record.Record) { r.Retained = &record.Retention{Group: "workers"} }, "retained: notices: 0 entries"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := recordtest.Good()
			tc.edit(&r)
			got, err := record.Read(recordtest.NodeWith(recordtest.Encode(t, r)))
			if err == nil {
				t.Fatalf("accepted: %+v", got)
			}
			if !strings.Contains(err.Error(), tc.field) || !strings.Contains(err.Error(), record.Annotation) {
				t.Errorf("error %q does not name the annotation and %q", err, tc.field)
			}
			if !reflect.DeepEqual(got, record.Record{}) {
				t.Errorf("an invalid record read as %+v, want nothing of it", got)
			}
		})
	}
	for name, raw := range map[string]string{
		"unknown phase": strings.Replace(recordtest.Encode(t, recordtest.Good()), `"phase":"draining"`, `"phase":"finished-elsewhere"`, 1),
		"not JSON":      "{",
		"too large":     `{"version":4,"description":"` + strings.Repeat("x", record.MaxRecordBytes) + `"}`,
	} {
		if got, err := record.Read(recordtest.NodeWith(raw)); err == nil || !reflect.DeepEqual(got, record.Record{}) {
			t.Errorf("%s: read as %+v, %v; want an error and nothing of it", name, got, err)
		}
	}
	// A newer schema is left alone, whatever it holds.
	if got, err := record.Read(recordtest.NodeWith(`{"version":99,"intents":[{"kind":"new-kind"}]}`)); err != nil || got.Known() {
		t.Errorf("a newer record read as %+v, %v; want it unknown and left alone", got, err)
	}
}

// Records written before version 4 kept the lifecycle token: it is read, never carried on,
// and gone from the annotation at the next write.
func TestLegacyTokenDropped(t *testing.T) {
	r := recordtest.Good()
	r.Version = 3
	r.Intents[0].Lifecycle.LegacyToken = "6f1d3c2a-9b8e-4d7f-a1c0-5e4b3a2f1d0c"
	node := recordtest.NodeWith(recordtest.Encode(t, r))
	got, err := record.Read(node)
	if err != nil {
		t.Fatal(err)
	}
	if lc := got.Intents[0].Lifecycle; lc.LegacyToken != "" || got.Intents[0].Notice().Lifecycle.Group != "workers" {
		t.Errorf("read %+v", lc)
	}
	record.Edit(func(r *record.Record) { r.Phase = record.PhaseDrained })(node)
	if strings.Contains(node.Annotations[record.Annotation], "6f1d3c2a") {
		t.Errorf("the token is still on the node after a write: %s", node.Annotations[record.Annotation])
	}
}

// A hook message from before a rollout, delivered again, is the notice its older id names
// in the record, not a second one.
func TestLegacyIDMatched(t *testing.T) {
	old := notice.ID(notice.ASGTermination, recordtest.Instance, "6f1d3c2a-9b8e-4d7f-a1c0-5e4b3a2f1d0c")
	n := notice.Notice{ID: notice.ID(notice.ASGTermination, recordtest.Instance, notice.TokenDigest("6f1d3c2a-9b8e-4d7f-a1c0-5e4b3a2f1d0c")), LegacyIDDigest: notice.Digest(old)}
	if got := (record.Record{Notices: []string{old}}).MatchLegacyID(n); got.ID != old {
		t.Errorf("recorded under the old id: got %q", got.ID)
	}
	if got := (record.Record{Released: []string{old}}).MatchLegacyID(n); got.ID != old {
		t.Errorf("released under the old id: got %q", got.ID)
	}
	if got := (record.Record{Notices: []string{"spot-i-1"}}).MatchLegacyID(n); got.ID != n.ID {
		t.Errorf("not recorded: got %q, want the current id", got.ID)
	}
}

// FuzzReadRecord: whatever a node credential writes into the annotation, reading it never
// panics, an error leaves nothing of it, and a record that is accepted survives being
// written back and read again unchanged.
func FuzzReadRecord(f *testing.F) {
	f.Add(recordtest.Encode(f, recordtest.Good()))
	f.Add(`{"version":1,"bootID":"b1","notices":["spot-i-1"],"phase":"drained","finished":["spot-i-1"],"notified":true}`)
	f.Add(`{"version":3,"intents":[{"id":"a","kind":"asg-termination","source":"queue","instanceID":"i-1","lifecycle":{"group":"g","hook":"h","token":"t"}}]}`)
	f.Add(`{"version":99}`)
	f.Add(`{"version":99,"readableFrom":6,"bootID":"b1","notices":["spot-i-1"],"phase":"draining","intents":[{"id":"spot-i-1","kind":"spot-interruption","source":"imds","instanceID":"i-0123456789abcdef0"}],"later":[1]}`)
	f.Add(`{"version":99,"bootID":"b1","notices":["spot-i-1"],"phase":"later-phase","deadline":"2026-11-28T09:00:00Z","released":["x"]}`)
	f.Add(`{"phase":"nope"}`)
	f.Add(`{"version":5,"notices":["asg-term-a"],"phase":"draining","intents":[{"id":"asg-term-a","kind":"asg-termination","source":"queue","instanceID":"i-0123456789abcdef0","lifecycle":{"group":"g","hook":"h"}}],"retained":{"group":"g","notices":["asg-term-a"],"since":"2026-11-28T09:00:00Z","until":"2026-11-29T09:00:00Z"}}`)
	f.Fuzz(func(t *testing.T, raw string) {
		node := recordtest.NodeWith(raw)
		r, err := record.Read(node)
		if err != nil {
			if !reflect.DeepEqual(r, record.Record{}) {
				t.Fatalf("error %v with a record %+v", err, r)
			}
			return
		}
		if !r.Known() {
			return
		}
		record.Write(node, r)
		again, err := record.Read(node)
		if err != nil {
			t.Fatalf("a record Lifeboat accepted and wrote back is refused: %v\n%s", err, node.Annotations[record.Annotation])
		}
		if r.Version == 0 {
			r.Version = record.Version
		}
		if recordtest.Encode(t, again) != recordtest.Encode(t, r) {
			t.Fatalf("written back and read again:\n%s\nwant\n%s", recordtest.Encode(t, again), recordtest.Encode(t, r))
		}
	})
}

// A version-5 record is still read, and the notice kinds and source of version 6 are read in
// a version-6
func TestRecordVersion6Kinds(t *testing.T) {
	old := recordtest.Good()
	old.Version = 5
	if r, err := record.Read(recordtest.NodeWith(recordtest.Encode(t, old))); err != nil || !r.Open() {
		t.Fatalf("version 5: %+v, %v", r, err)
	}
	cur := recordtest.Good()
	inst := cur.Intents[0].InstanceID
	for _, n := range []notice.Notice{
		{ID: notice.ID(notice.InstanceImpaired, inst, "impaired"), Kind: notice.InstanceImpaired, Source: notice.SourceEC2Status, InstanceID: inst},
		{ID: notice.ID(notice.CapacityBlockExpiration, inst, "cr-0123456789abcdef0"), Kind: notice.CapacityBlockExpiration, Source: notice.SourceQueue, InstanceID: inst},
	} {
		rec := cur
		rec.Notices = []string{n.ID}
		rec.Intents = []record.Intent{{ID: n.ID, Kind: string(n.Kind), Source: string(n.Source), InstanceID: inst, Origin: cur.Intents[0].Origin}}
		if r, err := record.Read(recordtest.NodeWith(recordtest.Encode(t, rec))); err != nil || r.Version != 6 || r.Intents[0].Kind != string(n.Kind) {
			t.Errorf("%s: %+v, %v", n.Kind, r, err)
		}
	}
}

// A version-4 record (before Retained) is still read, and a version-5 one keeps its retention
// across a write.
func TestRetainedRecordVersions(t *testing.T) {
	old := recordtest.Good()
	old.Version = 4
	r, err := record.Read(recordtest.NodeWith(recordtest.Encode(t, old)))
	if err != nil || !r.Open() || r.Retained != nil {
		t.Fatalf("version 4: %+v, %v", r, err)
	}
	cur := recordtest.Good()
	cur.Retained = &record.Retention{Group: "workers", Notices: cur.Notices, Since: time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC), Until: time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)}
	node := recordtest.NodeWith(recordtest.Encode(t, cur))
	r, err = record.Read(node)
	if err != nil || r.Retained == nil || r.Retained.Group != "workers" {
		t.Fatalf("version %d with a retention: %+v, %v", record.Version, r, err)
	}
	record.Write(node, r)
	if !strings.Contains(node.Annotations[record.Annotation], `"retained":{"group":"workers"`) {
		t.Errorf("written back without its retention: %s", node.Annotations[record.Annotation])
	}
}

// Spot notices (the next one is a new interruption).
func TestNextEpisode(t *testing.T) {
	sched := notice.ID(notice.ScheduledMaintenance, "i-0123456789abcdef0", "instance-event-1")
	spot := notice.ID(notice.SpotInterruption, "i-0123456789abcdef0", "stop")
	old := notice.ID(notice.ScheduledMaintenance, "i-0123456789abcdef0", "instance-event-0")
	r := record.Record{Version: 1, BootID: "b1", Notices: []string{sched, spot}, Phase: record.PhaseDrained, Released: []string{old}, Reported: []string{record.OutcomeDrained}}
	booted := r.NextEpisode(true)
	if !slices.Equal(booted.Released, []string{old, sched}) || len(booted.Notices) != 0 || booted.Phase != record.PhaseNone || booted.Reported != nil {
		t.Errorf("after a new boot: %+v", booted)
	}
	taken := r.NextEpisode(false)
	if !slices.Equal(taken.Released, []string{old}) || len(taken.Notices) != 0 {
		t.Errorf("after an operator's uncordon: %+v", taken)
	}
	if &r.Released[0] == &booted.Released[0] {
		t.Error("the next episode shares the old record's released list")
	}
}

// A kind this binary does not know is a newer release's: the record is read, the notice kept,
// and no other notice of the node is lost.
func TestRecordKeepsAnUnknownKind(t *testing.T) {
	rec := recordtest.Good()
	future := record.Intent{ID: "later-" + recordtest.Instance, Kind: "a-later-kind", Source: string(notice.SourceQueue), InstanceID: recordtest.Instance,
		Origin: rec.Intents[0].Origin, Lifecycle: &record.Lifecycle{Group: "workers", Hook: "drain"}}
	rec.Notices = append(rec.Notices, future.ID)
	rec.Intents = append(rec.Intents, future)
	got, err := record.Read(recordtest.NodeWith(recordtest.Encode(t, rec)))
	if err != nil {
		t.Fatalf("a record with a kind this binary does not know was refused: %v", err)
	}
	if len(got.Intents) != 2 || got.Intents[1].Kind != "a-later-kind" || !got.Has(future.ID) || got.Version != record.Version {
		t.Errorf("read %+v, want both notices kept at version %d", got, record.Version)
	}
}

// A long description of multi-byte characters (a node agent's condition message) is cut on a
// character boundary: the record written with it is read back whole. Cut inside a character,
// the JSON round trip made the description longer than its bound, and the record was refused.
func TestLongMultiByteDescriptionReadsBack(t *testing.T) {
	for _, prefix := range []string{"", "a", "ab"} { // each puts the cut at another byte of a character
		rec := recordtest.Good()
		n := notice.Notice{ID: rec.Intents[0].ID, Kind: notice.Kind(rec.Intents[0].Kind), Source: notice.SourceQueue,
			InstanceID: recordtest.Instance, Description: prefix + strings.Repeat("内核", record.MaxDescription)}
		i := record.IntentOf(n, rec.Intents[0].Origin)
		i.Lifecycle = rec.Intents[0].Lifecycle
		rec.Intents[0] = i
		got, err := record.Read(recordtest.NodeWith(recordtest.Encode(t, rec)))
		if err != nil {
			t.Fatalf("prefix %q: the record with a long multi-byte description was refused: %v", prefix, err)
		}
		if d := got.Intents[0].Description; d != i.Description || !strings.HasPrefix(n.Description, strings.TrimSuffix(d, "…")) {
			t.Errorf("prefix %q: description read back %q, want the recorded %q", prefix, d, i.Description)
		}
	}
}

// This binary's records say from which older version they may be carried on, when one may;
// the field is no part of the record read back.
func TestRecordSaysReadableFrom(t *testing.T) {
	node := recordtest.NodeWith("")
	record.Write(node, recordtest.Good())
	said := strings.Contains(node.Annotations[record.Annotation], fmt.Sprintf(`"readableFrom":%d`, record.ReadableFrom))
	if said != (record.ReadableFrom < record.Version) || strings.Contains(node.Annotations[record.Annotation], "readableFrom") != said {
		t.Errorf("ReadableFrom %d, Version %d, written %s", record.ReadableFrom, record.Version, node.Annotations[record.Annotation])
	}
	if r, err := record.Read(node); err != nil || r.ReadableFrom != 0 || r.Version != record.Version {
		t.Errorf("read back: %+v, %v", r, err)
	}
	if record.ReadableFrom > record.Version || record.ReadableFrom < 1 {
		t.Errorf("ReadableFrom %d is no version up to %d", record.ReadableFrom, record.Version)
	}
}

// newerRecord is a record of the next schema version, mid-drain, with a field this binary
// does not know, saying it may be carried on from readableFrom (0: not said).
func newerRecord(t *testing.T, readableFrom int) string {
	var m map[string]any
	if err := json.Unmarshal([]byte(recordtest.Encode(t, recordtest.Good())), &m); err != nil {
		t.Fatal(err)
	}
	m["version"] = record.Version + 1
	m["aLaterField"] = map[string]any{"x": 1}
	if readableFrom > 0 {
		m["readableFrom"] = readableFrom
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A newer record that says this version may carry it on is read as one of this version's; a
// write keeps its episode and drops what this version does not know.
func TestNewerRecordCarriedOn(t *testing.T) {
	node := recordtest.NodeWith(newerRecord(t, record.Version))
	r, err := record.Read(node)
	want := recordtest.Good()
	if err != nil || r.Version != record.Version || !r.Open() || !reflect.DeepEqual(r.Intents, want.Intents) || !reflect.DeepEqual(r.Owner, want.Owner) {
		t.Fatalf("read %+v, %v; want the drain's record at version %d", r, err, record.Version)
	}
	record.Write(node, r)
	if raw := node.Annotations[record.Annotation]; strings.Contains(raw, "aLaterField") || !strings.Contains(raw, fmt.Sprintf(`"version":%d`, record.Version)) {
		t.Errorf("written back: %s", raw)
	}
}

// A newer record this version may not carry on is read for the fields every version keeps,
// and left to the newer Lifeboat until its episode is over by them.
func TestNewerRecordLeftUntilOver(t *testing.T) {
	for _, from := range []int{0, record.Version + 1} {
		node := recordtest.NodeWith(newerRecord(t, from))
		r, err := record.Read(node)
		good := recordtest.Good()
		if err != nil || r.Known() || r.Open() || r.Intents != nil || r.Owner != nil || r.Phase != record.PhaseDraining ||
			!slices.Equal(r.Notices, good.Notices) || !r.Deadline.Equal(good.Deadline) || r.BootID != good.BootID {
			t.Fatalf("readableFrom %d: %+v, %v; want the kept fields alone", from, r, err)
		}
		for _, tc := range []struct {
			name string
			node func(n *corev1.Node)
			now  time.Time
			want string
		}{
			{"before the deadline", nil, good.Deadline.Add(-time.Minute), ""},
			{"within the hold after it", nil, good.Deadline.Add(record.NewerHold - time.Minute), ""},
			{"past the hold", nil, good.Deadline.Add(record.NewerHold + time.Minute), "more than 1h0m0s past"},
			{"booted again", func(n *corev1.Node) { n.Status.NodeInfo.BootID = "b2" }, good.Deadline, "booted again"},
			{"uncordoned: a newer release's episode may leave a node schedulable", func(n *corev1.Node) { n.Spec.Unschedulable = false }, good.Deadline, ""},
		} {
			n := node.DeepCopy()
			if tc.node != nil {
				tc.node(n)
			}
			if got := r.LeftByNewer(n, tc.now); (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("readableFrom %d, %s: %q, want %q", from, tc.name, got, tc.want)
			}
		}
	}
	// No episode open in it: taken back at once, keeping what was released for good.
	closed := `{"version":99,"phase":"","notices":[],"released":["sched-i-0123456789abcdef0-a"],"somethingNew":true}`
	r, err := record.Read(recordtest.NodeWith(closed))
	if err != nil || r.LeftByNewer(recordtest.NodeWith(closed), time.Now()) == "" || !slices.Equal(r.NextEpisode(false).Released, r.Released) || r.NextEpisode(false).Version != record.Version {
		t.Errorf("a newer record with no episode: %+v, %v", r, err)
	}
	// What is read of it is input too.
	if _, err := record.Read(recordtest.NodeWith(`{"version":99,"phase":"draining","notices":["../x"]}`)); err == nil || !strings.Contains(err.Error(), "notices[0]") {
		t.Errorf("a newer record with a forged notice id: %v", err)
	}
}
