// SPDX-License-Identifier: Apache-2.0

package messages

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"lifeboat.dev/lifeboat/internal/notice"
)

var received = time.Date(2026, 11, 21, 23, 59, 0, 0, time.UTC)

func fixture(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

type wantNotice struct {
	kind       notice.Kind
	instance   string
	id         string
	deadline   time.Time
	start      time.Time
	end        time.Time
	action     string
	cordonOnly string // a part of the notice's CordonOnly; "" wants none
}

func TestParseFixtures(t *testing.T) {
	tests := []struct {
		file      string
		notices   []wantNotice
		lifecycle *notice.Lifecycle // of every notice
		reason    string            // non-empty: the message is ignored, with a reason containing this
		wantErr   []string
		warnings  []string // the problems of the result's warnings, in order
	}{
		{file: "capacity-reservation.json", notices: []wantNotice{{
			kind: notice.CapacityReservationInterruption, instance: "i-0c4a7e1d9b3f52806", id: "capres-i-0c4a7e1d9b3f52806-terminate",
			deadline: at("2026-11-21T10:32:00Z"), start: at("2026-11-21T10:32:00Z"), action: "terminate",
		}}},
		// The termination time the event states is the deadline, not the event time + 2 min.
		{file: "capacity-reservation-termination-time.json", notices: []wantNotice{{
			kind: notice.CapacityReservationInterruption, instance: "i-0c4a7e1d9b3f52806", id: "capres-i-0c4a7e1d9b3f52806-terminate",
			deadline: at("2026-11-21T10:33:30Z"), start: at("2026-11-21T10:33:30Z"), action: "terminate",
		}}},
		{file: "capacity-reservation-reclaimed.json", reason: "reclamation completed"},
		// A host among the entities is skipped; RFC 1123 times with an offset and with UT.
		{file: "health-mixed-entities.json", notices: []wantNotice{{
			kind: notice.ScheduledMaintenance, instance: "i-0123456789abcdef0", id: notice.ID(notice.ScheduledMaintenance, "i-0123456789abcdef0", notice.Digest("arn:aws:health:eu-west-1::event/EC2/AWS_EC2_MAINTENANCE_SCHEDULED/AWS_EC2_MAINTENANCE_SCHEDULED_8d2f4b6a1c")),
			deadline: at("2026-12-01T03:00:00Z"), start: at("2026-12-01T03:00:00Z"), end: at("2026-12-01T06:00:00Z"), action: "AWS_EC2_MAINTENANCE_SCHEDULED",
		}}, warnings: []string{problemEntityNotInstance}},
		// A zone name that is not GMT, UT or UTC: cordon only, never dropped.
		{file: "health-bad-start.json", notices: []wantNotice{{
			kind: notice.ScheduledMaintenance, instance: "i-0123456789abcdef0", id: notice.ID(notice.ScheduledMaintenance, "i-0123456789abcdef0", notice.Digest("arn:aws:health:eu-west-1::event/EC2/AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED/AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED_5c7e9a1b3d")),
			action: "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED", cordonOnly: `detail.startTime "Tue, 1 Dec 2026 04:00:00 CET"`,
		}}, warnings: []string{problemStartUnreadable}},
		{file: "spot.json", notices: []wantNotice{{
			kind: notice.SpotInterruption, instance: "i-0123456789abcdef0", id: "spot-i-0123456789abcdef0-terminate",
			deadline: at("2026-11-21T10:02:00Z"), start: at("2026-11-21T10:02:00Z"), action: "terminate",
		}}},
		{file: "rebalance.json", notices: []wantNotice{{
			kind: notice.Rebalance, instance: "i-0123456789abcdef0", id: "rebalance-i-0123456789abcdef0",
			start: at("2026-11-21T09:41:12Z"),
		}}},
		{file: "state-stopping.json", notices: []wantNotice{{
			kind: notice.StateChange, instance: "i-0a1b2c3d4e5f60718", id: "state-i-0a1b2c3d4e5f60718-stopping",
			start: at("2026-11-21T11:15:30Z"), action: "stopping",
		}}},
		{file: "state-running.json", reason: "i-0a1b2c3d4e5f60718 is running"},
		{file: "asg-terminate.json", notices: []wantNotice{{
			kind: notice.ASGTermination, instance: "i-0fedcba9876543210",
			id:    notice.ID(notice.ASGTermination, "i-0fedcba9876543210", notice.TokenDigest("b4c1e2d3-6f7a-4b8c-9d0e-1f2a3b4c5d6e")),
			start: at("2026-11-21T12:00:05Z"), action: TransitionTerminating,
		}}, lifecycle: &notice.Lifecycle{Group: "workers-a", Hook: "lifeboat-drain"}},
		{file: "asg-launch.json", notices: []wantNotice{{
			kind: notice.ASGLaunch, instance: "i-0123abcd4567ef890",
			id:    notice.ID(notice.ASGLaunch, "i-0123abcd4567ef890", notice.TokenDigest("71e8d4c2-0b3f-4a9e-86d5-c2f1e0a9b7d4")),
			start: at("2026-11-21T12:03:44Z"), action: TransitionLaunching,
		}}, lifecycle: &notice.Lifecycle{Group: "workers-a", Hook: "lifeboat-launch"}},
		{file: "asg-hook-direct.json", notices: []wantNotice{{
			kind: notice.ASGTermination, instance: "i-0badc0ffee1234567",
			id:    notice.ID(notice.ASGTermination, "i-0badc0ffee1234567", notice.TokenDigest("c9d8e7f6-a5b4-4c3d-9e2f-1a0b9c8d7e6f")),
			start: at("2026-11-21T12:10:27.914Z"), action: TransitionTerminating,
		}}, lifecycle: &notice.Lifecycle{Group: "workers-b", Hook: "lifeboat-drain"}},
		{file: "test-notification.json", reason: "test notification"},
		{file: "sns-spot.json", notices: []wantNotice{{
			kind: notice.SpotInterruption, instance: "i-0c0ffee0ddba11123", id: "spot-i-0c0ffee0ddba11123-stop",
			deadline: at("2026-11-21T14:32:00Z"), start: at("2026-11-21T14:32:00Z"), action: "stop",
		}}},
		{file: "sns-asg-hook.json", notices: []wantNotice{{
			kind: notice.ASGTermination, instance: "i-0badc0ffee1234567",
			id:    notice.ID(notice.ASGTermination, "i-0badc0ffee1234567", notice.TokenDigest("c9d8e7f6-a5b4-4c3d-9e2f-1a0b9c8d7e6f")),
			start: at("2026-11-21T12:10:27.914Z"), action: TransitionTerminating,
		}}, lifecycle: &notice.Lifecycle{Group: "workers-b", Hook: "lifeboat-drain"}},
		{file: "health-ec2.json", notices: func() []wantNotice {
			var out []wantNotice
			for _, inst := range []string{"i-0123456789abcdef0", "i-0a1b2c3d4e5f60718", "i-0fedcba9876543210"} {
				out = append(out, wantNotice{
					kind: notice.ScheduledMaintenance, instance: inst, id: notice.ID(notice.ScheduledMaintenance, inst, notice.Digest("arn:aws:health:eu-west-1::event/EC2/AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED/AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED_3f1e5d7c9b")),
					deadline: at("2026-11-28T09:00:00Z"), start: at("2026-11-28T09:00:00Z"), end: at("2026-11-28T11:00:00Z"),
					action: "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED",
				})
			}
			return out
		}()},
		{file: "health-other.json", reason: `service "RDS"`},
		{file: "unknown-detail-type.json", reason: `the rule {"detail-type":["EBS Volume Notification"],"source":["aws.ec2"]} sent it`},
		{file: "malformed.json", wantErr: []string{"not a JSON object", "unexpected end of JSON input", `body "{\"version\"`}},
		{file: "missing-instance.json", wantErr: []string{"spot interruption", "missing detail.instance-id", "body"}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			r, err := Parse(fixture(t, tt.file), received)
			if tt.wantErr != nil {
				if err == nil {
					t.Fatalf("no error; result %+v", r)
				}
				for _, s := range tt.wantErr {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not contain %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.reason != "" {
				if !r.Ignore || !strings.Contains(r.Reason, tt.reason) || len(r.Notices) != 0 {
					t.Errorf("got %+v, want ignored with reason containing %q", r, tt.reason)
				}
				return
			}
			if r.Ignore {
				t.Fatalf("ignored: %s", r.Reason)
			}
			if len(r.Notices) != len(tt.notices) {
				t.Fatalf("%d notices, want %d: %+v", len(r.Notices), len(tt.notices), r.Notices)
			}
			for i, w := range tt.notices {
				n := r.Notices[i]
				if n.Kind != w.kind || n.InstanceID != w.instance || n.ID != w.id || n.Action != w.action ||
					!n.Deadline.Equal(w.deadline) || !n.StartTime.Equal(w.start) || !n.EndTime.Equal(w.end) ||
					(w.cordonOnly == "") != (n.CordonOnly == "") || !strings.Contains(n.CordonOnly, w.cordonOnly) {
					t.Errorf("notice %d:\n got %+v\nwant %+v", i, n, w)
				}
				if n.Source != notice.SourceQueue || n.Description == "" {
					t.Errorf("notice %d: source %q, description %q", i, n.Source, n.Description)
				}
			}
			var problems []string
			for _, w := range r.Warnings {
				problems = append(problems, w.Problem)
				if w.Detail == "" {
					t.Errorf("warning %s without detail", w.Problem)
				}
			}
			if strings.Join(problems, ",") != strings.Join(tt.warnings, ",") {
				t.Errorf("warnings %v, want %v", r.Warnings, tt.warnings)
			}
			for _, n := range r.Notices {
				switch {
				case tt.lifecycle == nil && n.Lifecycle != nil:
					t.Errorf("unexpected lifecycle %+v", *n.Lifecycle)
				case tt.lifecycle != nil && (n.Lifecycle == nil || *n.Lifecycle != *tt.lifecycle):
					t.Errorf("lifecycle %+v, want %+v", n.Lifecycle, *tt.lifecycle)
				}
			}
		})
	}
}

// The queue and instance metadata must name one spot interruption the same way, whatever
// the clock says when the message is read.
func TestSpotIDStable(t *testing.T) {
	body := fixture(t, "spot.json")
	a, err := Parse(body, received)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Parse(body, received.Add(37*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	want := notice.ID(notice.SpotInterruption, "i-0123456789abcdef0", "terminate")
	if a.Notices[0].ID != want || b.Notices[0].ID != want {
		t.Errorf("ids %q and %q, want %q", a.Notices[0].ID, b.Notices[0].ID, want)
	}
	// A redelivered copy with a restated time (EventBridge retry) names the same notice.
	restated := strings.Replace(body, "2026-11-21T10:00:00Z", "2026-11-21T10:00:09Z", 1)
	c, err := Parse(restated, received)
	if err != nil || c.Notices[0].ID != want {
		t.Errorf("restated time: %+v %v", c, err)
	}
}

func TestIDsIgnoreReceivedAt(t *testing.T) {
	entries, err := os.ReadDir("testdata")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() { // the fuzz corpus
			continue
		}
		body := fixture(t, e.Name())
		a, errA := Parse(body, received)
		b, errB := Parse(body, time.Time{})
		if (errA == nil) != (errB == nil) || len(a.Notices) != len(b.Notices) {
			t.Errorf("%s: results differ: %v / %v", e.Name(), errA, errB)
			continue
		}
		for i := range a.Notices {
			if a.Notices[i].ID != b.Notices[i].ID {
				t.Errorf("%s: id %q vs %q", e.Name(), a.Notices[i].ID, b.Notices[i].ID)
			}
		}
	}
}

// receivedAt stands in only when the message states no time.
func TestMissingTimeUsesReceivedAt(t *testing.T) {
	var m map[string]any
	if err := json.Unmarshal([]byte(fixture(t, "spot.json")), &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "time")
	b, _ := json.Marshal(m)
	r, err := Parse(string(b), received)
	if err != nil || !r.Notices[0].Deadline.Equal(received.Add(2*time.Minute)) {
		t.Errorf("%+v %v", r, err)
	}
}

func TestParseErrors(t *testing.T) {
	spot := func(detail string) string {
		return `{"version":"0","id":"x","detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","time":"2026-11-21T10:00:00Z","detail":` + detail + `}`
	}
	hook := func(fields string) string {
		return `{"Service":"AWS Auto Scaling","Time":"2026-11-21T12:10:27Z",` + fields + `}`
	}
	health := func(id, detail string) string {
		return `{"version":"0","id":"` + id + `","detail-type":"AWS Health Event","source":"aws.health","time":"2026-11-21T10:00:00Z","detail":` + detail + `}`
	}
	tests := []struct {
		body string
		want []string
	}{
		{``, []string{"not a JSON object"}},
		{`null`, []string{"not a JSON object"}},
		{`[1,2]`, []string{"not a JSON object"}},
		{`{"hello":"world"}`, []string{"neither an EventBridge event"}},
		{spot(`{"instance-id":"i-xyz","instance-action":"terminate"}`), []string{"spot interruption", `detail.instance-id "i-xyz" is not an EC2 instance id`}},
		{spot(`{"instance-id":"i-0123456789ABCDEF0","instance-action":"terminate"}`), []string{"not an EC2 instance id"}},
		{spot(`{"instance-id":"i-0123456789abcdef0","instance-action":"explode"}`), []string{`detail.instance-action "explode"`}},
		{spot(`{"instance-id":"i-0123456789abcdef0","instance-action":7}`), []string{"spot interruption: detail.instance-action is a JSON number, not a string"}},
		{spot(`null`), []string{"spot interruption: missing detail"}},
		{strings.Replace(spot(`{"instance-id":"i-0123456789abcdef0","instance-action":"stop"}`), "2026-11-21T10:00:00Z", "yesterday", 1), []string{`time "yesterday" is not RFC 3339`}},
		{`{"detail-type":"EC2 Instance State-change Notification","source":"aws.ec2","detail":{"instance-id":"i-0123456789abcdef0","state":"melting"}}`, []string{"state change", `detail.state "melting"`}},
		{`{"detail-type":"EC2 Instance-launch Lifecycle Action","source":"aws.autoscaling","detail":{"LifecycleActionToken":"t","AutoScalingGroupName":"g","LifecycleHookName":"h","EC2InstanceId":"i-0123456789abcdef0","LifecycleTransition":"autoscaling:EC2_INSTANCE_TERMINATING"}}`, []string{"lifecycle action", "does not match detail-type"}},
		{`{"detail-type":"EC2 Instance-terminate Lifecycle Action","source":"aws.autoscaling","detail":{"AutoScalingGroupName":"g","LifecycleHookName":"h","EC2InstanceId":"i-0123456789abcdef0"}}`, []string{"lifecycle action", "missing detail.LifecycleActionToken"}},
		{hook(`"LifecycleTransition":"autoscaling:EC2_INSTANCE_TERMINATING","LifecycleActionToken":"t","AutoScalingGroupName":"g","LifecycleHookName":"h"`), []string{"Auto Scaling hook", "missing EC2InstanceId"}},
		{hook(`"LifecycleTransition":"autoscaling:EC2_INSTANCE_TERMINATING","LifecycleActionToken":"t","LifecycleHookName":"h","EC2InstanceId":"i-01234567"`), []string{"Auto Scaling hook", "missing AutoScalingGroupName"}},
		{hook(`"LifecycleTransition":"autoscaling:EC2_INSTANCE_WARMING"`), []string{"Auto Scaling hook", `unknown LifecycleTransition "autoscaling:EC2_INSTANCE_WARMING"`}},
		{hook(`"Event":"autoscaling:EC2_INSTANCE_TERMINATE"`), []string{"Auto Scaling hook", `unknown Event`}},
		{health("e1", `{"service":"EC2","eventTypeCategory":"scheduledChange","affectedEntities":[]}`), []string{"health event", "no detail.affectedEntities"}},
		{`{"detail-type":"EC2 Capacity Reservation Instance Interruption Warning","source":"aws.ec2","detail":{"instance-id":"i-0123456789abcdef0","instance-action":"reboot"}}`, []string{"capacity reservation interruption", `detail.instance-action "reboot"`}},
		{`{"detail-type":"EC2 Capacity Reservation Instance Interruption Warning","source":"aws.ec2","detail":{"instance-action":"terminate"}}`, []string{"capacity reservation interruption", "missing detail.instance-id"}},
		{health("", `{"service":"EC2","eventTypeCategory":"scheduledChange","affectedEntities":[{"entityValue":"i-0123456789abcdef0"}]}`), []string{"health event", "missing id"}},
		{`{"Type":"Notification","MessageId":"m1","Message":"not json"}`, []string{"SNS notification m1", "not a JSON object"}},
		{`{"Type":"Notification","MessageId":"m1","Message":""}`, []string{"SNS notification m1", "empty Message"}},
		{`{"Type":"Notification","MessageId":"m1","Message":"{\"Type\":\"Notification\",\"MessageId\":\"m2\",\"Message\":\"{}\"}"}`, []string{"SNS notification m1", "nested"}},
		{`{"Type":"Telegram","MessageId":"m1","Message":"{}"}`, []string{`unknown Type "Telegram"`}},
		{`{"detail-type":7,"source":"aws.ec2"}`, []string{"EventBridge event: detail-type is a number, not a string"}},
		{`{"detail_type":"Capacity Block Expiration Warning","source":["aws.ec2"]}`, []string{"EventBridge event: source is an array, not a string"}},
	}
	for _, tt := range tests {
		r, err := Parse(tt.body, received)
		if err == nil {
			t.Errorf("%s: no error; result %+v", clip(tt.body), r)
			continue
		}
		for _, s := range tt.want {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: error %q does not contain %q", clip(tt.body), err, s)
			}
		}
		if len(err.Error()) > 1500 {
			t.Errorf("error too long (%d bytes): %.200s", len(err.Error()), err)
		}
	}
}

func TestParseMore(t *testing.T) {
	// The Health API's time format with a one-digit day, duplicate entities, no end time.
	body := `{"version":"0","id":"e-42","detail-type":"AWS Health Event","source":"aws.health","time":"2026-11-21T10:00:00Z","detail":{"eventArn":"arn:aws:health:us-east-1::event/EC2/AWS_EC2_SYSTEM_REBOOT_MAINTENANCE_SCHEDULED/E42","service":"EC2","eventTypeCategory":"scheduledChange","eventTypeCode":"AWS_EC2_SYSTEM_REBOOT_MAINTENANCE_SCHEDULED","startTime":"Wed, 2 Dec 2026 03:00:00 GMT","affectedEntities":[{"entityValue":"i-01234567"},{"entityValue":"i-01234567"}]}}`
	e42 := notice.ID(notice.ScheduledMaintenance, "i-01234567", notice.Digest("arn:aws:health:us-east-1::event/EC2/AWS_EC2_SYSTEM_REBOOT_MAINTENANCE_SCHEDULED/E42"))
	r, err := Parse(body, received)
	if err != nil || len(r.Notices) != 1 || r.Notices[0].ID != e42 ||
		!r.Notices[0].Deadline.Equal(time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)) || !r.Notices[0].EndTime.IsZero() {
		t.Errorf("%+v %v", r, err)
	}
	// No start time: cordon only, no deadline, and a warning.
	noStart := strings.Replace(body, `"startTime":"Wed, 2 Dec 2026 03:00:00 GMT",`, "", 1)
	if r, err := Parse(noStart, received); err != nil || !r.Notices[0].Deadline.IsZero() ||
		!strings.Contains(r.Notices[0].CordonOnly, "no detail.startTime") || len(r.Warnings) != 1 {
		t.Errorf("no startTime: %+v %v", r, err)
	}
	// An unreadable start time: the same, naming the time; an unreadable end time is only a warning.
	for _, start := range []string{"next week", "Wed, 2 Dec 2026 03:00:00 EST", "2026-12-02 03:00:00"} {
		odd := strings.Replace(body, "Wed, 2 Dec 2026 03:00:00 GMT", start, 1)
		r, err := Parse(odd, received)
		if err != nil || len(r.Notices) != 1 || !r.Notices[0].Deadline.IsZero() || !strings.Contains(r.Notices[0].CordonOnly, start) {
			t.Errorf("startTime %q: %+v %v", start, r, err)
		}
	}
	badEnd := strings.Replace(body, `"startTime"`, `"endTime":"soon","startTime"`, 1)
	if r, err := Parse(badEnd, received); err != nil || r.Notices[0].CordonOnly != "" || !r.Notices[0].EndTime.IsZero() ||
		len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0].Detail, `"soon"`) {
		t.Errorf("bad endTime: %+v %v", r, err)
	}
	// A closed event releases its notices (same ids), whatever its times say.
	closed := strings.Replace(body, `"eventTypeCategory":"scheduledChange"`, `"eventTypeCategory":"scheduledChange","statusCode":"closed"`, 1)
	closed = strings.Replace(closed, "Wed, 2 Dec 2026 03:00:00 GMT", "over", 1)
	if r, err := Parse(closed, received); err != nil || len(r.Notices) != 1 || !r.Notices[0].Released ||
		r.Notices[0].ID != e42 || r.Notices[0].CordonOnly != "" || len(r.Warnings) != 0 {
		t.Errorf("closed: %+v %v", r, err)
	}
	// Entities that are no instances are skipped; with none left the message is ignored.
	hosts := strings.ReplaceAll(body, `"i-01234567"`, `"h-01234567"`)
	if r, err := Parse(hosts, received); err != nil || !r.Ignore || !strings.Contains(r.Reason, "names no EC2 instance") || len(r.Warnings) != 2 {
		t.Errorf("hosts only: %+v %v", r, err)
	}
	// A Health event of another category is ignored.
	body = `{"version":"0","id":"e-43","detail-type":"AWS Health Event","source":"aws.health","detail":{"service":"EC2","eventTypeCategory":"issue","eventTypeCode":"AWS_EC2_OPERATIONAL_ISSUE"}}`
	if r, err := Parse(body, received); err != nil || !r.Ignore || !strings.Contains(r.Reason, "issue") {
		t.Errorf("issue: %+v %v", r, err)
	}
	// Every state that means the instance is going away makes a notice.
	for _, state := range []string{"stopping", "stopped", "shutting-down", "terminated"} {
		body := `{"detail-type":"EC2 Instance State-change Notification","source":"aws.ec2","time":"2026-11-21T10:00:00Z","detail":{"instance-id":"i-0123456789abcdef0","state":"` + state + `"}}`
		r, err := Parse(body, received)
		if err != nil || len(r.Notices) != 1 || r.Notices[0].ID != "state-i-0123456789abcdef0-"+state {
			t.Errorf("%s: %+v %v", state, r, err)
		}
	}
	if r, err := Parse(`{"detail-type":"EC2 Instance State-change Notification","source":"aws.ec2","detail":{"instance-id":"i-0123456789abcdef0","state":"pending"}}`, received); err != nil || !r.Ignore {
		t.Errorf("pending: %+v %v", r, err)
	}
	// An SNS-wrapped test notification is ignored too, as is SNS's subscription handshake.
	wrapped, _ := json.Marshal(map[string]string{"Type": "Notification", "MessageId": "m", "Message": fixture(t, "test-notification.json")})
	if r, err := Parse(string(wrapped), received); err != nil || !r.Ignore || !strings.Contains(r.Reason, "test notification") {
		t.Errorf("wrapped test notification: %+v %v", r, err)
	}
	if r, err := Parse(`{"Type":"SubscriptionConfirmation","MessageId":"m","Message":"You have chosen to subscribe"}`, received); err != nil || !r.Ignore {
		t.Errorf("subscription confirmation: %+v %v", r, err)
	}
	// A lifecycle detail without a transition takes it from the detail-type.
	body = `{"detail-type":"EC2 Instance-launch Lifecycle Action","source":"aws.autoscaling","time":"2026-11-21T10:00:00Z","detail":{"LifecycleActionToken":"tok","AutoScalingGroupName":"g","LifecycleHookName":"h","EC2InstanceId":"i-0123456789abcdef0"}}`
	if r, err := Parse(body, received); err != nil || r.Notices[0].Kind != notice.ASGLaunch || r.Notices[0].Lifecycle == nil || r.Notices[0].Action != TransitionLaunching {
		t.Errorf("launch without transition: %+v %v", r, err)
	}
}

func TestClip(t *testing.T) {
	s := strings.Repeat("é", 100) // 200 bytes
	c := clip(s)
	if !strings.HasSuffix(c, "…") || len(c) > 120+len("…") || strings.ContainsRune(strings.TrimSuffix(c, "…"), '\uFFFD') {
		t.Errorf("clip: %q", c)
	}
	if clip("short") != "short" {
		t.Error("clip changed a short string")
	}
}

func FuzzParse(f *testing.F) {
	entries, err := os.ReadDir("testdata")
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() || filepath.Ext(e.Name()) != ".json" {
			continue
		}
		f.Add(fixture(f, e.Name()))
	}
	for _, body := range corpusBodies(f) {
		f.Add(body)
	}
	f.Add(`{"Type":"Notification","Message":"{\"Type\":\"Notification\",\"Message\":\"{}\"}"}`)
	f.Add(`null`)
	f.Add(strings.Replace(fixture(f, "spot.json"), "111122223333", "444455556666", 1))
	f.Add(strings.Replace(fixture(f, "asg-hook-direct.json"), "111122223333", "", 1))
	f.Fuzz(func(t *testing.T, body string) {
		r, err := Parse(body, received)
		// The account check only ever refuses: what it accepts reads as without it, and
		// any other failure is the same.
		checked := Parser{QueueAccount: "111122223333", AllowedAccounts: []string{"444455556666"}}
		rc, errc := checked.Parse(body, received)
		switch {
		case errors.Is(errc, ErrForeignAccount):
			if rc.Notices != nil || rc.Ignore {
				t.Errorf("refused with a result %+v", rc)
			}
		case (errc == nil) != (err == nil) || errc != nil && errc.Error() != err.Error() || len(rc.Notices) != len(r.Notices) || rc.Ignore != r.Ignore:
			t.Errorf("with the account check: %+v %v; without: %+v %v", rc, errc, r, err)
		}
		for _, n := range r.Notices {
			if n.Lifecycle == nil {
				continue
			}
			for _, v := range []string{n.Lifecycle.Group, n.Lifecycle.Hook} {
				if utf8.RuneCountInString(v) > 255 {
					t.Errorf("a name of %d characters accepted", utf8.RuneCountInString(v))
				}
			}
		}
		if len(r.Notices) > MaxHealthEntities {
			t.Errorf("%d notices from one message", len(r.Notices))
		}
		for _, w := range r.Warnings {
			if w.Problem == "" || w.Detail == "" {
				t.Errorf("warning without problem or detail: %+v", w)
			}
		}
		if err != nil {
			if r.Notices != nil || r.Reservations != nil || r.Ignore || r.Warnings != nil {
				t.Errorf("error %v with a result %+v", err, r)
			}
			return
		}
		if r.Ignore {
			if r.Reason == "" || len(r.Notices) != 0 {
				t.Errorf("ignored result %+v", r)
			}
			return
		}
		if len(r.Notices) == 0 && len(r.Reservations) == 0 {
			t.Errorf("neither ignored nor any notice: %+v", r)
		}
		for _, res := range r.Reservations {
			// A reservation's notices are as well-formed as any other.
			if n := res.Notice("i-0123456789abcdef0"); n.ID == "" || len(n.ID) > 63 || n.Deadline.IsZero() || !strings.HasPrefix(res.ID, "cr-") {
				t.Errorf("reservation %+v gives notice %+v", res, n)
			}
		}
		for _, n := range r.Notices {
			if n.ID == "" || len(n.ID) > 63 || !strings.HasPrefix(n.InstanceID, "i-") || n.Source != notice.SourceQueue {
				t.Errorf("bad notice %+v", n)
			}
			// A notice either has what its drain needs or says why it only cordons.
			if n.Kind == notice.ScheduledMaintenance && !n.Released && n.Deadline.IsZero() == (n.CordonOnly == "") {
				t.Errorf("scheduled notice with deadline %v and cordon-only %q", n.Deadline, n.CordonOnly)
			}
			asg := n.Kind == notice.ASGTermination || n.Kind == notice.ASGLaunch
			if asg != (n.Lifecycle != nil) {
				t.Errorf("notice %s: lifecycle %+v", n.Kind, n.Lifecycle)
			}
		}
		// Identity never depends on when the message is read.
		r2, err := Parse(body, received.Add(time.Hour))
		if err != nil || len(r2.Notices) != len(r.Notices) {
			t.Fatalf("second parse differs: %+v %v", r2, err)
		}
		for i := range r.Notices {
			if r.Notices[i].ID != r2.Notices[i].ID {
				t.Errorf("id %q then %q", r.Notices[i].ID, r2.Notices[i].ID)
			}
		}
	})
}

func TestParseHealthTime(t *testing.T) {
	tests := []struct {
		in   string
		want time.Time
		err  bool
	}{
		{"", time.Time{}, false},
		{"2026-12-01T04:00:00Z", time.Date(2026, 12, 1, 4, 0, 0, 0, time.UTC), false},
		{"2026-12-01T04:00:00+02:00", time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC), false},
		{"Tue, 01 Dec 2026 04:00:00 GMT", time.Date(2026, 12, 1, 4, 0, 0, 0, time.UTC), false},
		{"Tue, 1 Dec 2026 04:00:00 GMT", time.Date(2026, 12, 1, 4, 0, 0, 0, time.UTC), false},
		{"Tue, 1 Dec 2026 04:00:00 UT", time.Date(2026, 12, 1, 4, 0, 0, 0, time.UTC), false},
		{"Tue, 1 Dec 2026 04:00:00 UTC", time.Date(2026, 12, 1, 4, 0, 0, 0, time.UTC), false},
		{"Tue, 1 Dec 2026 04:00:00 +0100", time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC), false},
		{"Tue, 1 Dec 2026 04:00:00 -0530", time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC), false},
		// Zone names other than GMT, UT and UTC would be read as UTC by Go: refused.
		{"Tue, 1 Dec 2026 04:00:00 EST", time.Time{}, true},
		{"Tue, 1 Dec 2026 04:00:00 CET", time.Time{}, true},
		{"Tue, 1 Dec 2026 04:00:00", time.Time{}, true},
		{"Tue, 1 Dec 2026 04:00:00 GMT+1", time.Time{}, true},
		{"1 Dec 2026 04:00:00 GMT", time.Time{}, true},
		{"tomorrow", time.Time{}, true},
	}
	for _, tt := range tests {
		got, err := ParseHealthTime(tt.in)
		if (err != nil) != tt.err || !got.Equal(tt.want) {
			t.Errorf("ParseHealthTime(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.err)
		}
		if err != nil && !strings.Contains(err.Error(), tt.in) {
			t.Errorf("error %q does not name the input", err)
		}
	}
}
