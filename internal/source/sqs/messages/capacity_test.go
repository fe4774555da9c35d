// SPDX-License-Identifier: Apache-2.0

package messages

import (
	"strings"
	"testing"
	"time"
)

// An unreadable termination time falls back to the two minutes of a Spot warning, and says so.
func TestCapacityReservationUnreadableTerminationTime(t *testing.T) {
	body := strings.Replace(fixture(t, "capacity-reservation-termination-time.json"), "2026-11-21T10:33:30Z", "soon", 1)
	res, err := Parse(body, time.Now())
	if err != nil || len(res.Notices) != 1 {
		t.Fatalf("%+v, %v", res, err)
	}
	if want := time.Date(2026, 11, 21, 10, 32, 0, 0, time.UTC); !res.Notices[0].Deadline.Equal(want) {
		t.Errorf("deadline %v, want the event time + 2 min (%v)", res.Notices[0].Deadline, want)
	}
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0].Detail, "instance-termination-time") {
		t.Errorf("warnings %+v, want one naming detail.instance-termination-time", res.Warnings)
	}
}
