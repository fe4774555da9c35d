// SPDX-License-Identifier: Apache-2.0

package events

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"lifeboat.dev/lifeboat/internal/notice"
)

type captured struct {
	ref                        *corev1.ObjectReference
	annotations                map[string]string
	eventType, reason, message string
}

// capture is a record.EventRecorder that keeps what it is given.
type capture struct{ events []captured }

func (c *capture) Event(o runtime.Object, t, r, m string) { c.AnnotatedEventf(o, nil, t, r, "%s", m) }
func (c *capture) Eventf(o runtime.Object, t, r, f string, a ...any) {
	c.AnnotatedEventf(o, nil, t, r, f, a...)
}
func (c *capture) AnnotatedEventf(o runtime.Object, ann map[string]string, t, r, f string, a ...any) {
	c.events = append(c.events, captured{o.(*corev1.ObjectReference), ann, t, r, fmt.Sprintf(f, a...)})
}

var (
	node     = Node{Name: "ip-10-0-0-9.ec2.internal", UID: "3f0c5a4e-uid"}
	deadline = time.Date(2025, 6, 7, 8, 9, 10, 0, time.UTC)
)

func TestActions(t *testing.T) {
	tests := []struct {
		name          string
		call          func(*Recorder)
		eventType     string
		reason        string
		message       string // without DRY_RUN
		dryRunMessage string // with DRY_RUN
	}{
		{"cordoned", func(r *Recorder) { r.Cordoned(node, "spot-i-1") }, "Normal", "Cordon",
			"Cordoned for notice spot-i-1", "Dry run: would cordon for notice spot-i-1"},
		{"cordon failed", func(r *Recorder) { r.CordonFailed(node, "spot-i-1", errors.New("conflict")) }, "Warning", "CordonError",
			"Cordon for notice spot-i-1 failed: conflict", "Cordon for notice spot-i-1 failed: conflict"},
		{"drain started", func(r *Recorder) { r.DrainStarted(node, "spot-i-1", deadline) }, "Normal", "DrainStarted",
			"Draining for notice spot-i-1, deadline 2025-06-07T08:09:10Z", "Dry run: would drain for notice spot-i-1, deadline 2025-06-07T08:09:10Z"},
		{"drain started without deadline", func(r *Recorder) { r.DrainStarted(node, "spot-i-1", time.Time{}) }, "Normal", "DrainStarted",
			"Draining for notice spot-i-1", "Dry run: would drain for notice spot-i-1"},
		{"drained", func(r *Recorder) { r.Drained(node, "spot-i-1", 12, 3456789*time.Microsecond) }, "Normal", "CordonAndDrain",
			"Cordoned and drained for notice spot-i-1: 12 pods evicted in 3.457s", "Dry run: would evict 12 pods for notice spot-i-1"},
		{"drained one pod", func(r *Recorder) { r.Drained(node, "spot-i-1", 1, time.Second) }, "Normal", "CordonAndDrain",
			"Cordoned and drained for notice spot-i-1: 1 pod evicted in 1s", "Dry run: would evict 1 pod for notice spot-i-1"},
		{"drain failed", func(r *Recorder) { r.DrainFailed(node, "spot-i-1", errors.New("2 pods protected by a budget")) }, "Warning", "CordonAndDrainError",
			"Drain for notice spot-i-1 failed: 2 pods protected by a budget", "Drain for notice spot-i-1 failed: 2 pods protected by a budget"},
		{"drain failed, nil error", func(r *Recorder) { r.DrainFailed(node, "n", nil) }, "Warning", "CordonAndDrainError",
			"Drain for notice n failed: unknown error", "Drain for notice n failed: unknown error"},
		{"uncordoned", func(r *Recorder) { r.Uncordoned(node, "the node rebooted after scheduled maintenance") }, "Normal", "Uncordon",
			"Uncordoned: the node rebooted after scheduled maintenance", "Dry run: would uncordon: the node rebooted after scheduled maintenance"},
		{"lifecycle completed", func(r *Recorder) { r.LifecycleCompleted(node, "drain-hook", "i-1", "CONTINUE") }, "Normal", "LifecycleActionCompleted",
			"Completed lifecycle action of hook drain-hook for instance i-1 with CONTINUE",
			"Dry run: would complete lifecycle action of hook drain-hook for instance i-1 with CONTINUE"},
	}
	extra := map[string]string{"team": "infra", "example.com/owner": "sre"}
	for _, dryRun := range []bool{false, true} {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%s/dry-run=%v", tt.name, dryRun), func(t *testing.T) {
				c := &capture{}
				r := newRecorder(c, Options{DryRun: dryRun, ExtraAnnotations: extra})
				tt.call(r)
				if len(c.events) != 1 {
					t.Fatalf("%d events, want 1", len(c.events))
				}
				e := c.events[0]
				want := tt.message
				wantAnnotations := maps.Clone(extra)
				if dryRun {
					want = tt.dryRunMessage
					wantAnnotations[AnnotationDryRun] = "true"
				}
				if e.eventType != tt.eventType || e.reason != tt.reason || e.message != want {
					t.Errorf("got %s %s %q\nwant %s %s %q", e.eventType, e.reason, e.message, tt.eventType, tt.reason, want)
				}
				if !maps.Equal(e.annotations, wantAnnotations) {
					t.Errorf("annotations %v, want %v", e.annotations, wantAnnotations)
				}
				if e.ref.Kind != "Node" || e.ref.APIVersion != "v1" || e.ref.Name != node.Name || e.ref.UID != node.UID || e.ref.Namespace != "" {
					t.Errorf("reference %+v", e.ref)
				}
			})
		}
	}
}

func TestNotice(t *testing.T) {
	base := notice.Notice{ID: "x-i-1", InstanceID: "i-1", Deadline: deadline}
	tests := []struct {
		name   string
		edit   func(*notice.Notice)
		dryRun bool
		reason string
		msg    string
	}{
		{"spot", func(n *notice.Notice) { n.Kind = notice.SpotInterruption }, false, "SpotInterruption",
			"Spot interruption notice x-i-1 for instance i-1, deadline 2025-06-07T08:09:10Z"},
		{"scheduled, with description", func(n *notice.Notice) {
			n.Kind, n.Description = notice.ScheduledMaintenance, "system-reboot: hardware maintenance"
		}, false, "ScheduledEvent",
			"Scheduled maintenance notice x-i-1 for instance i-1, deadline 2025-06-07T08:09:10Z: system-reboot: hardware maintenance"},
		{"scheduled, released", func(n *notice.Notice) { n.Kind, n.Released = notice.ScheduledMaintenance, true }, false, "ScheduledEvent",
			"Scheduled maintenance notice x-i-1 for instance i-1: the event was canceled or has completed"},
		{"spot, with a description naming the kind again", func(n *notice.Notice) {
			n.Kind, n.Description = notice.SpotInterruption, "Spot interruption: the instance will terminate at 2025-06-07T08:09:10Z"
		}, false, "SpotInterruption",
			"Spot interruption notice x-i-1 for instance i-1, deadline 2025-06-07T08:09:10Z: the instance will terminate at 2025-06-07T08:09:10Z"},
		{"rebalance", func(n *notice.Notice) { n.Kind = notice.Rebalance }, false, "RebalanceRecommendation",
			"Rebalance recommendation notice x-i-1 for instance i-1, deadline 2025-06-07T08:09:10Z"},
		{"ASG termination", func(n *notice.Notice) { n.Kind = notice.ASGTermination }, false, "ASGLifecycle",
			"Auto Scaling termination notice x-i-1 for instance i-1, deadline 2025-06-07T08:09:10Z"},
		{"ASG launch without deadline", func(n *notice.Notice) { n.Kind, n.Deadline = notice.ASGLaunch, time.Time{} }, false, "ASGLaunch",
			"Auto Scaling launch notice x-i-1 for instance i-1"},
		{"state change", func(n *notice.Notice) { n.Kind = notice.StateChange }, false, "StateChange",
			"Instance state change notice x-i-1 for instance i-1, deadline 2025-06-07T08:09:10Z"},
		{"unknown kind", func(n *notice.Notice) { n.Kind = "aws-health" }, false, "Notice",
			`"aws-health" notice x-i-1 for instance i-1, deadline 2025-06-07T08:09:10Z`},
		{"dry run", func(n *notice.Notice) { n.Kind = notice.SpotInterruption }, true, "SpotInterruption",
			"Spot interruption notice x-i-1 for instance i-1, deadline 2025-06-07T08:09:10Z (dry run: nothing will be changed)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &capture{}
			n := base
			tt.edit(&n)
			newRecorder(c, Options{DryRun: tt.dryRun}).Notice(node, n)
			if len(c.events) != 1 {
				t.Fatalf("%d events", len(c.events))
			}
			if e := c.events[0]; e.eventType != "Normal" || e.reason != tt.reason || e.message != tt.msg {
				t.Errorf("got %s %s %q\nwant Normal %s %q", e.eventType, e.reason, e.message, tt.reason, tt.msg)
			}
		})
	}
}

func TestNodeWithoutUIDUsesItsName(t *testing.T) {
	c := &capture{}
	newRecorder(c, Options{}).Cordoned(Node{Name: "n1"}, "id")
	if ref := c.events[0].ref; ref.UID != "n1" || ref.Name != "n1" {
		t.Fatalf("reference %+v: want the node name as UID (kubelet's convention)", ref)
	}
	if got := NodeOf(&corev1.Node{}); got != (Node{}) {
		t.Errorf("NodeOf(empty) = %+v", got)
	}
}

func TestLongDetailsAreClipped(t *testing.T) {
	c := &capture{}
	long := strings.Repeat("é", 1000) // 2 bytes each: the cut must not split one
	newRecorder(c, Options{}).DrainFailed(node, "id", errors.New(long))
	msg := c.events[0].message
	if len(msg) > maxDetail+100 || !utf8.ValidString(msg) || !strings.HasSuffix(msg, "...") {
		t.Fatalf("message of %d bytes, valid UTF-8 %v: %.80q", len(msg), utf8.ValidString(msg), msg)
	}
}

func TestDisabledRecorderRecordsNothing(t *testing.T) {
	r, stop, err := New(nil, Options{Enabled: false, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	var nilRecorder *Recorder
	for _, r := range []*Recorder{r, nilRecorder} {
		if r.Enabled() {
			t.Fatal("enabled")
		}
		// None of these may panic without a client.
		r.Notice(node, notice.Notice{Kind: notice.SpotInterruption})
		r.Cordoned(node, "id")
		r.CordonFailed(node, "id", errors.New("x"))
		r.DrainStarted(node, "id", deadline)
		r.Drained(node, "id", 1, time.Second)
		r.DrainFailed(node, "id", errors.New("x"))
		r.Uncordoned(node, "why")
		r.LifecycleCompleted(node, "h", "i", "CONTINUE")
	}
}

func TestNewRejectsBadAnnotations(t *testing.T) {
	tests := []struct {
		annotations map[string]string
		want        string
	}{
		{map[string]string{"bad key": "v"}, `KUBERNETES_EVENTS_EXTRA_ANNOTATIONS: Invalid value: "bad key"`},
		{map[string]string{"a/b/c": "v"}, `KUBERNETES_EVENTS_EXTRA_ANNOTATIONS: Invalid value: "a/b/c"`},
		{map[string]string{"big": strings.Repeat("x", 300_000)}, "KUBERNETES_EVENTS_EXTRA_ANNOTATIONS: Too long"},
	}
	for _, tt := range tests {
		_, _, err := New(nil, Options{Enabled: true, ExtraAnnotations: tt.annotations})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New(%.40v): error %v, want %q", tt.annotations, err, tt.want)
		}
	}
}

// The recorder's annotation map is its own: changing the configuration's map afterwards, or
// a consumer changing an Event's map, does not leak into later Events.
func TestAnnotationsAreCopied(t *testing.T) {
	extra := map[string]string{"team": "infra"}
	c := &capture{}
	r := newRecorder(c, Options{ExtraAnnotations: extra})
	extra["team"] = "changed"
	r.Cordoned(node, "a")
	c.events[0].annotations["team"] = "mutated"
	r.Cordoned(node, "b")
	if got := c.events[1].annotations["team"]; got != "infra" {
		t.Fatalf("annotation team=%q, want infra", got)
	}
}

// An unreadable do-not-disrupt annotation is told on the pod, to its owners, with the value
// and how to write it.
func TestUnreadableMarkOnThePod(t *testing.T) {
	c := &capture{}
	r := newRecorder(c, Options{})
	pod := Pod{Namespace: "shop", Name: "web-1", UID: "pod-uid"}
	r.UnreadableMark(pod, `annotation karpenter.sh/do-not-disrupt="forever" is neither "true" nor a duration such as "30m"; taken as "true"`)
	if len(c.events) != 1 {
		t.Fatalf("%d events, want 1", len(c.events))
	}
	e := c.events[0]
	if e.eventType != "Warning" || e.reason != ReasonUnreadableMark || !strings.Contains(e.message, `"forever"`) || !strings.Contains(e.message, `"30m"`) {
		t.Errorf("got %s %s %q", e.eventType, e.reason, e.message)
	}
	if e.ref.Kind != "Pod" || e.ref.Namespace != "shop" || e.ref.Name != "web-1" || e.ref.UID != "pod-uid" {
		t.Errorf("reference %+v", e.ref)
	}
}

// A pod the drain moves hears why, on the pod: evicted (Normal) or deleted past its budget
// near the deadline (Warning), with the node and the grace period; pod Events go through the
// pods' own queue, never the nodes'.
func TestMovedPodEvents(t *testing.T) {
	nodes, pods := &capture{}, &capture{}
	r := newRecorder(nodes, Options{})
	r.pods = pods
	pod := Pod{Namespace: "shop", Name: "web-1", UID: "pod-uid"}
	r.PodEvicted(pod, "n1", 30)
	r.PodDeleted(pod, "n1", 4)
	if len(nodes.events) != 0 || len(pods.events) != 2 {
		t.Fatalf("%d node events, %d pod events; want 0 and 2", len(nodes.events), len(pods.events))
	}
	for i, want := range []struct{ eventType, reason, grace string }{{"Normal", ReasonPodEvicted, "30s"}, {"Warning", ReasonPodDeleted, "4s"}} {
		e := pods.events[i]
		if e.eventType != want.eventType || e.reason != want.reason || !strings.Contains(e.message, "node n1") || !strings.Contains(e.message, "grace period "+want.grace) {
			t.Errorf("got %s %s %q", e.eventType, e.reason, e.message)
		}
		if e.ref.Kind != "Pod" || e.ref.Name != "web-1" {
			t.Errorf("reference %+v", e.ref)
		}
	}
}
