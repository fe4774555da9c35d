// SPDX-License-Identifier: Apache-2.0

package messages

import (
	"strings"
	"testing"

	"lifeboat.dev/lifeboat/internal/notice"
)

// A Capacity Block's expiration warning names its reservation; the deadline is when EC2
// begins to terminate its instances.
func TestCapacityBlockWarning(t *testing.T) {
	tests := []struct {
		file     string
		deadline string
		warnings []string
		wantErr  []string
	}{
		// Both documented spellings of the detail-type: the warning's time + 10 min.
		{file: "capacity-block.json", deadline: "2026-11-21T11:30:00Z"},
		{file: "capacity-block-reservation-spelling.json", deadline: "2026-11-21T11:30:00Z"},
		// A warning sent late: 30 min before the end date comes first.
		{file: "capacity-block-late.json", deadline: "2026-11-21T11:30:00Z"},
		// The envelope keys of AWS's documentation example are read as EventBridge's.
		{file: "capacity-block-underscore-keys.json", deadline: "2026-11-21T11:30:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			res, err := Parser{QueueAccount: "111122223333"}.Parse(fixture(t, tt.file), received)
			if tt.wantErr != nil {
				if err == nil {
					t.Fatalf("no error: %+v", res)
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
			if res.Ignore || len(res.Notices) != 0 || len(res.Reservations) != 1 || len(res.Warnings) != 0 {
				t.Fatalf("got %+v, want one reservation and no notice", res)
			}
			r := res.Reservations[0]
			if r.ID != "cr-0a1b2c3d4e5f60718" || !r.Deadline.Equal(at(tt.deadline)) || !r.EndDate.Equal(at("2026-11-21T12:00:00Z")) {
				t.Errorf("reservation %+v, want cr-0a1b2c3d4e5f60718, deadline %s, end 12:00", r, tt.deadline)
			}
			n := r.Notice("i-0123456789abcdef0")
			if n.Kind != notice.CapacityBlockExpiration || n.Source != notice.SourceQueue || n.InstanceID != "i-0123456789abcdef0" ||
				n.ID != "capblock-i-0123456789abcdef0-cr-0a1b2c3d4e5f60718" || !n.Deadline.Equal(r.Deadline) || !strings.Contains(n.Description, "cr-0a1b2c3d4e5f60718") {
				t.Errorf("notice %+v", n)
			}
		})
	}
}

func TestCapacityBlockDetails(t *testing.T) {
	body := fixture(t, "capacity-block.json")
	// An end date that cannot be read keeps the warning, with the warning's time + 10 min.
	res, err := Parse(strings.Replace(body, `"end-date": "2026-11-21T12:00:00Z"`, `"end-date": "noon"`, 1), received)
	if err != nil || len(res.Reservations) != 1 || !res.Reservations[0].Deadline.Equal(at("2026-11-21T11:30:00Z")) ||
		!res.Reservations[0].EndDate.IsZero() || len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0].Detail, "detail.end-date") {
		t.Errorf("unreadable end date: %+v %v", res, err)
	}
	for _, tt := range []struct{ from, to, want string }{
		{`"capacity-reservation-id": "cr-0a1b2c3d4e5f60718",`, ``, "missing detail.capacity-reservation-id"},
		{`cr-0a1b2c3d4e5f60718",`, `i-0123456789abcdef0",`, `detail.capacity-reservation-id "i-0123456789abcdef0" is not a capacity reservation id`},
		{`"detail": {`, `"detail": {"capacity-reservation-id": 7, "x": {`, "capacity block expiration: detail.capacity-reservation-id is a JSON number, not a string"},
	} {
		odd := strings.Replace(body, tt.from, tt.to, 1)
		if tt.from == `"detail": {` {
			odd = strings.Replace(odd, `"end-date": "2026-11-21T12:00:00Z"`, `"end-date": "2026-11-21T12:00:00Z"}`, 1)
		}
		if _, err := Parse(odd, received); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s → %s: error %v, want %q", tt.from, tt.to, err, tt.want)
		}
	}
	// The id names the instance and the reservation only: the same for any copy.
	again, err := Parse(strings.Replace(body, "2026-11-21T11:20:00Z", "2026-11-21T11:20:07Z", 1), received)
	first, _ := Parse(body, received)
	if err != nil || again.Reservations[0].Notice("i-01234567").ID != first.Reservations[0].Notice("i-01234567").ID {
		t.Errorf("a restated copy names another notice: %+v %v", again, err)
	}
}
