// SPDX-License-Identifier: Apache-2.0

package messages

import (
	"strings"
	"testing"

	"lifeboat.dev/lifeboat/internal/notice"
)

// A field a kind does not need, in any shape, never costs the notice.
func TestFieldsNotNeededInAnyShape(t *testing.T) {
	spot := fixture(t, "spot.json")
	health := fixture(t, "health-ec2.json")
	for _, tt := range []struct {
		name, body string
		kind       notice.Kind
		notices    int
	}{
		{"resources a string", strings.Replace(spot, `"resources": [`, `"resources": "arn", "x": [`, 1), notice.SpotInterruption, 1},
		{"resources an object", strings.Replace(spot, `"resources": [`, `"resources": {"a": 1}, "x": [`, 1), notice.SpotInterruption, 1},
		{"region and version numbers", strings.Replace(strings.Replace(spot, `"version": "0"`, `"version": 0`, 1), `"region": "eu-west-1"`, `"region": 7`, 1), notice.SpotInterruption, 1},
		{"id a number", strings.Replace(spot, `"id": "`, `"id": 12, "was": "`, 1), notice.SpotInterruption, 1},
		{"extra detail fields", strings.Replace(spot, `"instance-action"`, `"future": [1, {"a": null}], "instance-action"`, 1), notice.SpotInterruption, 1},
		{"health endTime a number", strings.Replace(health, `"endTime"`, `"endTime": 5, "was"`, 1), notice.ScheduledMaintenance, 3},
		{"health actionability and personas", strings.Replace(health, `"service"`, `"actionability": "ACTION_REQUIRED", "personas": ["OPERATIONS"], "service"`, 1), notice.ScheduledMaintenance, 3},
	} {
		if tt.body == spot || tt.body == health {
			t.Fatalf("%s: the fixture did not change", tt.name)
		}
		r, err := Parse(tt.body, received)
		if err != nil || len(r.Notices) != tt.notices || r.Notices[0].Kind != tt.kind {
			t.Errorf("%s: %+v %v", tt.name, r, err)
		}
	}
	// An affected entity that is not a string is skipped like one that is no instance.
	odd := strings.Replace(health, `{"entityValue": "i-0123456789abcdef0"}`, `{"entityValue": 42}`, 1)
	if r, err := Parse(odd, received); err != nil || len(r.Notices) != 2 || len(r.Warnings) != 1 || r.Warnings[0].Problem != problemEntityNotInstance {
		t.Errorf("entity a number: %+v %v", r, err)
	}
}

// The fields a notice acts on stay strict, and the error names the field.
func TestFieldsActedOnAreStrict(t *testing.T) {
	spot := fixture(t, "spot.json")
	for _, tt := range []struct{ name, body, want string }{
		{"instance id a number", strings.Replace(spot, `"instance-id": "i-0123456789abcdef0"`, `"instance-id": 7`, 1), "detail.instance-id is a JSON number, not a string"},
		{"time a number", strings.Replace(spot, `"time": "2026-11-21T10:00:00Z"`, `"time": 1763719200`, 1), "time is a number, not a string"},
		{"account an array", strings.Replace(spot, `"account": "111122223333"`, `"account": ["111122223333"]`, 1), "account is an array, not a string"},
		{"source an object", strings.Replace(spot, `"source": "aws.ec2"`, `"source": {"name": "aws.ec2"}`, 1), "source is an object, not a string"},
	} {
		if tt.body == spot {
			t.Fatalf("%s: the fixture did not change", tt.name)
		}
		if _, err := Parse(tt.body, received); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want %q", tt.name, err, tt.want)
		}
	}
}
