// SPDX-License-Identifier: Apache-2.0

package faults

import (
	"reflect"
	"testing"

	"lifeboat.dev/lifeboat/test/sandbox"
)

func auditEvent(verb, resource, sub, ns, name string) sandbox.AuditEvent {
	var e sandbox.AuditEvent
	e.Verb = verb
	if resource != "" {
		e.ObjectRef = &struct {
			Resource    string `json:"resource"`
			Namespace   string `json:"namespace"`
			Name        string `json:"name"`
			Subresource string `json:"subresource"`
		}{Resource: resource, Namespace: ns, Name: name, Subresource: sub}
	}
	return e
}

// answered gives an audit event its response code.
func answered(e sandbox.AuditEvent, code int) sandbox.AuditEvent {
	e.ResponseStatus = &struct {
		Code int `json:"code"`
	}{Code: code}
	return e
}

// Refused evictions and requests a kill cut off did not evict; accepted ones did.
func TestEvictionsCountOnlyAccepted(t *testing.T) {
	events := []sandbox.AuditEvent{
		answered(auditEvent("create", "pods", "eviction", "work", "a"), 429),
		answered(auditEvent("create", "pods", "eviction", "work", "a"), 504),
		answered(auditEvent("create", "pods", "eviction", "work", "a"), 201),
		answered(auditEvent("create", "pods", "eviction", "work", "b"), 201),
		answered(auditEvent("create", "pods", "eviction", "work", "b"), 201),
	}
	if got, want := EvictionsByPod(events), map[string]int{"work/a": 1, "work/b": 2}; !reflect.DeepEqual(got, want) {
		t.Errorf("EvictionsByPod = %v, want %v", got, want)
	}
}

// An eviction answered 504 that the server carried out all the same, seen by the pod's
// deletion (before or after it in the log), counts once; one without a deletion, or with an
// accepted eviction, does not count itself.
func TestEvictionsCarriedOut(t *testing.T) {
	by := func(e sandbox.AuditEvent, user string) sandbox.AuditEvent { e.User.Username = user; return e }
	evict := func(pod string, code int) sandbox.AuditEvent {
		return by(answered(auditEvent("create", "pods", "eviction", "work", pod), code), "lifeboat")
	}
	deleteBy := func(pod string) sandbox.AuditEvent {
		return by(answered(auditEvent("delete", "pods", "", "work", pod), 200), "kwok")
	}
	events := []sandbox.AuditEvent{
		evict("cut-carried-out", 504), deleteBy("cut-carried-out"),
		evict("cut-left", 504),
		evict("cut-then-accepted", 504), evict("cut-then-accepted", 201), deleteBy("cut-then-accepted"),
		evict("accepted-twice", 201), evict("accepted-twice", 201), deleteBy("accepted-twice"),
		deleteBy("deleted-first"), evict("deleted-first", 504),
		by(answered(auditEvent("create", "pods", "eviction", "work", "someone-elses"), 504), "other"), deleteBy("someone-elses"),
		evict("refused", 429),
	}
	want := map[string]int{"work/cut-carried-out": 1, "work/cut-then-accepted": 1, "work/accepted-twice": 2, "work/deleted-first": 1}
	if got := EvictionsCarriedOut(events, "lifeboat"); !reflect.DeepEqual(got, want) {
		t.Errorf("EvictionsCarriedOut = %v, want %v", got, want)
	}
}

func TestEvidenceFromAuditEvents(t *testing.T) {
	events := []sandbox.AuditEvent{
		auditEvent("create", "pods", "eviction", "work", "a"),
		auditEvent("create", "pods", "eviction", "work", "a"),
		auditEvent("create", "pods", "eviction", "other", "a"),
		auditEvent("get", "pods", "", "work", "b"),
		auditEvent("patch", "nodes", "", "", "n1"),
		auditEvent("get", "", "", "", ""),
	}
	if got, want := EvictionsByPod(events), map[string]int{"work/a": 2, "other/a": 1}; !reflect.DeepEqual(got, want) {
		t.Errorf("EvictionsByPod = %v, want %v", got, want)
	}
	byKind := RequestsByKind(events)
	if want := map[string]int{"create pods/eviction": 3, "get pods": 1, "patch nodes": 1, "get": 1}; !reflect.DeepEqual(byKind, want) {
		t.Errorf("RequestsByKind = %v, want %v", byKind, want)
	}
	if got, want := FormatCounts(byKind), "create pods/eviction=3, get=1, get pods=1, patch nodes=1"; got != want {
		t.Errorf("FormatCounts = %q, want %q", got, want)
	}
}

func TestReceiptHandles(t *testing.T) {
	tests := []struct {
		name, body string
		want       []string
		wantErr    bool
	}{
		{"delete", `{"QueueUrl":"q","ReceiptHandle":"m1#r1"}`, []string{"m1#r1"}, false},
		{"batch", `{"QueueUrl":"q","Entries":[{"Id":"1","ReceiptHandle":"m1#r"},{"Id":"2","ReceiptHandle":"m2#r"}]}`, []string{"m1#r", "m2#r"}, false},
		{"no handle", `{"QueueUrl":"q"}`, nil, true},
		{"not json", `Action=DeleteMessage`, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReceiptHandles(tt.body)
			if (err != nil) != tt.wantErr || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ReceiptHandles(%s) = %v, %v; want %v (error %v)", tt.body, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestMessageIDOfReceipt(t *testing.T) {
	tests := []struct {
		handle, want string
		wantErr      bool
	}{
		{"6f1c8a52-0d3e-4c1b-9a4e-2b7f0c9d8e7a#a1b2c3", "6f1c8a52-0d3e-4c1b-9a4e-2b7f0c9d8e7a", false},
		{"id#with#hashes", "id", false},
		{"no-separator", "", true},
		{"#suffix-only", "", true},
	}
	for _, tt := range tests {
		got, err := MessageIDOfReceipt(tt.handle)
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("MessageIDOfReceipt(%q) = %q, %v; want %q (error %v)", tt.handle, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestMetric(t *testing.T) {
	const text = `# HELP lifeboat_sqs_calls_total SQS calls.
# TYPE lifeboat_sqs_calls_total counter
lifeboat_sqs_calls_total{event="receive",result="error"} 7
lifeboat_sqs_calls_total{event="delete",result="error"} 2
lifeboat_sqs_calls_total{event="receive",result="ok"} 40
lifeboat_source_healthy{source="queue"} 0
lifeboat_leader 1
`
	tests := []struct {
		name   string
		metric string
		labels []string
		want   float64
		found  bool
	}{
		{"sum over matching series", "lifeboat_sqs_calls_total", []string{"result", "error"}, 9, true},
		{"two labels", "lifeboat_sqs_calls_total", []string{"event", "receive", "result", "ok"}, 40, true},
		{"zero value is found", "lifeboat_source_healthy", []string{"source", "queue"}, 0, true},
		{"no labels", "lifeboat_leader", nil, 1, true},
		{"no such label value", "lifeboat_sqs_calls_total", []string{"event", "extend"}, 0, false},
		{"no such metric", "lifeboat_aws_calls_total", nil, 0, false},
		{"prefix is not a match", "lifeboat_sqs_calls", nil, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, found, err := Metric(text, tt.metric, tt.labels...)
			if err != nil || got != tt.want || found != tt.found {
				t.Errorf("Metric(%s %v) = %v, %v, %v; want %v, %v", tt.metric, tt.labels, got, found, err, tt.want, tt.found)
			}
		})
	}
	if _, _, err := Metric("lifeboat_leader one\n", "lifeboat_leader"); err == nil {
		t.Error("a value that is not a number was accepted")
	}
	if _, _, err := Metric(text, "lifeboat_leader", "odd"); err == nil {
		t.Error("an odd label list was accepted")
	}
}

func TestRunPattern(t *testing.T) {
	tests := []struct{ name, want string }{
		{"TestFaults/storm", "^TestFaults$/^storm$"},
		{"TestFaults/regressions/hook_copies_joining_another_notice's_drain", "^TestFaults$/^regressions$/^hook_copies_joining_another_notice.s_drain$"},
		{"TestAPIServerRestart/agent", "^TestAPIServerRestart$/^agent$"},
	}
	for _, tt := range tests {
		if got := runPattern(tt.name); got != tt.want {
			t.Errorf("runPattern(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
}
