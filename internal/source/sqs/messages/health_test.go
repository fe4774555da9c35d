// SPDX-License-Identifier: Apache-2.0

package messages

import (
	"strings"
	"testing"
	"time"

	"lifeboat.dev/lifeboat/internal/notice"
)

// AWS Health sends one event again at each status update, each time in a new EventBridge
// envelope: every update names the same notices, and "closed" releases exactly them.
func TestHealthIdentity(t *testing.T) {
	parse := func(name string) Result {
		t.Helper()
		r, err := Parse(fixture(t, name), received)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return r
	}
	upcoming, open, closed := parse("health-ec2.json"), parse("health-ec2-open.json"), parse("health-ec2-closed.json")
	if len(upcoming.Notices) != 3 || len(open.Notices) != 3 || len(closed.Notices) != 3 {
		t.Fatalf("notices: %d, %d, %d; want 3 each", len(upcoming.Notices), len(open.Notices), len(closed.Notices))
	}
	for i, n := range upcoming.Notices {
		if open.Notices[i].ID != n.ID || closed.Notices[i].ID != n.ID {
			t.Errorf("instance %s: ids %q, %q, %q; want one", n.InstanceID, n.ID, open.Notices[i].ID, closed.Notices[i].ID)
		}
		if n.Released || open.Notices[i].Released || !closed.Notices[i].Released {
			t.Errorf("instance %s: released %v, %v, %v; want only the closed update", n.InstanceID, n.Released, open.Notices[i].Released, closed.Notices[i].Released)
		}
		if len(n.ID) > 63 || !strings.HasPrefix(n.ID, "sched-"+n.InstanceID+"-") {
			t.Errorf("id %q: want sched-<instance>-<digest>, at most 63 characters", n.ID)
		}
		// A record written by an earlier release names the notice by the envelope id.
		if want := notice.Digest(notice.ID(notice.ScheduledMaintenance, n.InstanceID, "6b8d0f2a-4c6e-4a1b-9d3f-5e7a9c1b3d5f")); n.LegacyIDDigest != want {
			t.Errorf("legacy id digest %q, want %q", n.LegacyIDDigest, want)
		}
		if !n.Restated() {
			t.Errorf("%s: a Health notice may be restated", n.ID)
		}
	}
	// The open update moved the start: its notices carry the new one.
	if want := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC); !open.Notices[0].Deadline.Equal(want) || !open.Notices[0].StartTime.Equal(want) {
		t.Errorf("moved start: deadline %v, start %v; want %v", open.Notices[0].Deadline, open.Notices[0].StartTime, want)
	}
	// Another event for the same instance is another notice.
	other := strings.Replace(fixture(t, "health-ec2.json"), "RETIREMENT_SCHEDULED_3f1e5d7c9b", "RETIREMENT_SCHEDULED_0a2c4e6b8d", 1)
	r, err := Parse(other, received)
	if err != nil || len(r.Notices) != 3 || r.Notices[0].ID == upcoming.Notices[0].ID || r.Notices[0].InstanceID != upcoming.Notices[0].InstanceID {
		t.Errorf("another eventArn: %+v %v; want other ids for the same instances", r, err)
	}
}

func TestHealthCodes(t *testing.T) {
	body := func(service, code string) string {
		b := strings.Replace(fixture(t, "health-ec2.json"), "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED", code, -1)
		return strings.Replace(b, `"service": "EC2"`, `"service": "`+service+`"`, 1)
	}
	for _, code := range []string{
		"AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED", "AWS_EC2_INSTANCE_REBOOT_MAINTENANCE_SCHEDULED", "AWS_EC2_SYSTEM_REBOOT_MAINTENANCE_SCHEDULED",
		"AWS_EC2_INSTANCE_STOP_SCHEDULED", "AWS_EC2_PERSISTENT_INSTANCE_RETIREMENT_SCHEDULED", "AWS_EC2_MAINTENANCE_SCHEDULED",
		"AWS_EC2_DEDICATED_HOST_RETIREMENT_SCHEDULED", "AWS_EC2_INSTANCE_POWER_MAINTENANCE_SCHEDULED",
	} {
		r, err := Parse(body("EC2", code), received)
		if err != nil || len(r.Notices) != 3 || len(r.Warnings) != 0 || r.Notices[0].Action != code {
			t.Errorf("%s: %+v %v; want a notice per instance, no warning", code, r, err)
		}
	}
	// Network maintenance leaves the instance running: nothing to do, and the log says why.
	for _, code := range []string{"AWS_EC2_INSTANCE_NETWORK_MAINTENANCE_SCHEDULED", "AWS_EC2_DEDICATED_HOST_NETWORK_MAINTENANCE_SCHEDULED"} {
		r, err := Parse(body("EC2", code), received)
		if err != nil || !r.Ignore || len(r.Notices) != 0 || !strings.Contains(r.Reason, "does not take the instance down") || !strings.Contains(r.Reason, code) {
			t.Errorf("%s: %+v %v; want ignored with the reason", code, r, err)
		}
	}
	if r, err := Parse(fixture(t, "health-network-maintenance.json"), received); err != nil || !r.Ignore {
		t.Errorf("network maintenance fixture: %+v %v", r, err)
	}
	// A code Lifeboat does not know takes the instance down, with a warning.
	for _, name := range []string{"health-unknown-code.json", ""} {
		b := fixture(t, "health-unknown-code.json")
		if name == "" {
			b = strings.Replace(b, `"eventTypeCode": "AWS_EC2_FUTURE_CHANGE_SCHEDULED",`, "", 1)
		}
		r, err := Parse(b, received)
		if err != nil || len(r.Notices) != 3 || len(r.Warnings) != 1 || r.Warnings[0].Problem != problemCodeUnknown ||
			!strings.Contains(r.Warnings[0].Detail, "taken as a change that takes the instance down") {
			t.Errorf("unknown code %q: %+v %v; want notices and one %s warning", name, r, err, problemCodeUnknown)
		}
	}
	// Other services are ignored, with the reason.
	for _, service := range []string{"RDS", "EBS", "ec2"} {
		r, err := Parse(body(service, "AWS_"+service+"_MAINTENANCE_SCHEDULED"), received)
		if err != nil || !r.Ignore || !strings.Contains(r.Reason, `service "`+service+`"`) {
			t.Errorf("service %s: %+v %v; want ignored with the reason", service, r, err)
		}
	}
}

// An event that states no eventArn is still acted on, named by its envelope; its updates
// cannot be joined, and the warning says so.
func TestHealthWithoutArn(t *testing.T) {
	b := strings.Replace(fixture(t, "health-ec2.json"), `"eventArn":`, `"unknownKey":`, 1)
	r, err := Parse(b, received)
	if err != nil || len(r.Notices) != 3 || r.Notices[0].ID != notice.ID(notice.ScheduledMaintenance, "i-0123456789abcdef0", "6b8d0f2a-4c6e-4a1b-9d3f-5e7a9c1b3d5f") ||
		len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0].Detail, "no detail.eventArn") {
		t.Errorf("%+v %v", r, err)
	}
	long := strings.Replace(fixture(t, "health-ec2.json"), "_3f1e5d7c9b", "_"+strings.Repeat("a", 300), 1)
	if _, err := Parse(long, received); err == nil || !strings.Contains(err.Error(), "detail.eventArn") {
		t.Errorf("a long eventArn: %v", err)
	}
}
