// SPDX-License-Identifier: Apache-2.0

package messages

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"lifeboat.dev/lifeboat/internal/notice"
)

const kindHealth = "health event"

// healthStays are the EC2 scheduled-change codes after which AWS documents the instance as
// still running, without a stop, a reboot or a retirement: network maintenance only cuts its
// network for a short while. They are ignored.
var healthStays = map[string]string{
	"AWS_EC2_INSTANCE_NETWORK_MAINTENANCE_SCHEDULED":       "network maintenance: the instance keeps running and loses connectivity briefly",
	"AWS_EC2_DEDICATED_HOST_NETWORK_MAINTENANCE_SCHEDULED": "network maintenance of its Dedicated Host: the instance keeps running and loses connectivity briefly",
}

// healthTakesDown are the EC2 scheduled-change codes known to stop, reboot, retire or
// terminate the instance. A code in neither list is taken as one too (the pods leave an
// instance that may go), with a warning.
var healthTakesDown = map[string]bool{
	"AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED":                     true,
	"AWS_EC2_INSTANCE_RETIREMENT_EXPEDITED":                     true,
	"AWS_EC2_PERSISTENT_INSTANCE_RETIREMENT_SCHEDULED":          true,
	"AWS_EC2_PERSISTENT_INSTANCE_RETIREMENT_EXPEDITED":          true,
	"AWS_EC2_INSTANCE_STOP_SCHEDULED":                           true,
	"AWS_EC2_INSTANCE_TERMINATION_SCHEDULED":                    true,
	"AWS_EC2_INSTANCE_REBOOT_MAINTENANCE_SCHEDULED":             true,
	"AWS_EC2_INSTANCE_REBOOT_FLEXIBLE_MAINTENANCE_SCHEDULED":    true,
	"AWS_EC2_SYSTEM_REBOOT_MAINTENANCE_SCHEDULED":               true,
	"AWS_EC2_INSTANCE_POWER_MAINTENANCE_SCHEDULED":              true,
	"AWS_EC2_PERSISTENT_INSTANCE_POWER_MAINTENANCE_SCHEDULED":   true,
	"AWS_EC2_MAINTENANCE_SCHEDULED":                             true,
	"AWS_EC2_DEDICATED_HOST_MAINTENANCE_SCHEDULED":              true,
	"AWS_EC2_DEDICATED_HOST_POWER_MAINTENANCE_SCHEDULED":        true,
	"AWS_EC2_DEDICATED_HOST_RETIREMENT_SCHEDULED":               true,
	"AWS_EC2_DEDICATED_HOST_ACCESSREVOKED_RETIREMENT_SCHEDULED": true,
}

// parseHealth makes one notice per affected instance of an EC2 scheduled change that takes
// the instance down. AWS Health sends one event (one detail.eventArn) again at each status
// update (upcoming, open, closed), each time in a new EventBridge envelope: the notice's
// identity is the event ARN and the instance, so updates are the same notice, and "closed"
// releases it. A detail that cannot be read never drops the rest: an entity that is not an
// instance is skipped, and an unreadable start time makes cordon-only notices (no drain can
// be scheduled without it).
func parseHealth(body string, e envelope, _ time.Time) (Result, error) {
	var d healthDetail
	if err := json.Unmarshal(e.Detail, &d); err != nil {
		return Result{}, detailError(kindHealth, err, body)
	}
	if ignored, ok := d.ignored(); ok {
		return ignored, nil
	}
	if err := d.check(body, e); err != nil {
		return Result{}, err
	}
	h := &healthEvent{d: &d, e: e}
	h.identify()
	h.readTimes()
	h.noticeInstances()
	if len(h.r.Notices) == 0 {
		r := ignored(IgnoreHealth, ReasonNoInstance, fmt.Sprintf("AWS Health event %s (%s) names no EC2 instance", h.name, d.Code))
		r.Warnings = h.r.Warnings
		return r, nil
	}
	return h.r, nil
}

// healthDetail is the detail of an AWS Health event.
type healthDetail struct {
	EventArn string      `json:"eventArn"`
	Service  string      `json:"service"`
	Category string      `json:"eventTypeCategory"`
	Code     string      `json:"eventTypeCode"`
	Status   string      `json:"statusCode"` // upcoming, open, closed
	Start    string      `json:"startTime"`
	End      looseString `json:"endTime"` // optional: an unreadable end is warned about
	Entities []struct {
		Value looseString `json:"entityValue"` // an entity that is no string is skipped as no instance
	} `json:"affectedEntities"`
}

// ignored is the result for an event that is no EC2 scheduled change taking an instance down.
func (d *healthDetail) ignored() (Result, bool) {
	if d.Service != "EC2" {
		return ignored(IgnoreHealth, ReasonOtherService, fmt.Sprintf("AWS Health %s event %s of service %q concerns no EC2 instance", clip(d.Category), clip(d.Code), clip(d.Service))), true
	}
	if d.Category != "scheduledChange" {
		return ignored(IgnoreHealth, ReasonInformational, fmt.Sprintf("AWS Health %s event %s is not an EC2 scheduled change: informational, nothing scheduled to act on", clip(d.Category), clip(d.Code))), true
	}
	if why, ok := healthStays[d.Code]; ok {
		return ignored(IgnoreHealth, ReasonInstanceStays, fmt.Sprintf("AWS Health scheduled change %s does not take the instance down (%s)", d.Code, why)), true
	}
	return Result{}, false
}

// check refuses an event that cannot make notices: no id, names too long, no affected entity,
// or more than a message may name.
func (d *healthDetail) check(body string, e envelope) error {
	if e.ID == "" {
		return fmt.Errorf("%s: missing id (or customer_event_id), or not a string (body %q)", kindHealth, clip(body))
	}
	for _, f := range []struct{ name, value string }{{"id", e.ID}, {"detail.eventArn", d.EventArn}, {"detail.eventTypeCode", d.Code}} {
		if n := utf8.RuneCountInString(f.value); n > maxNameLength {
			return fmt.Errorf("%s: %s %q is %d characters long, more than %d (body %q)", kindHealth, f.name, clip(f.value), n, maxNameLength, clip(body))
		}
	}
	if len(d.Entities) == 0 {
		return fmt.Errorf("%s: no detail.affectedEntities (body %q)", kindHealth, clip(body))
	}
	if len(d.Entities) > MaxHealthEntities {
		return fmt.Errorf("%s %s: %d affected entities, more than the %d a message may name (body %q)", kindHealth, e.ID, len(d.Entities), MaxHealthEntities, clip(body))
	}
	return nil
}

// healthEvent is an AWS Health event being made into notices.
type healthEvent struct {
	d *healthDetail
	e envelope
	r Result

	name string // the event's name in what is logged: its ARN, else the envelope id
	fact string // what names the event in its notices' ids
	// released: the change is over; cordonOnly: why its notices cannot drain, if they cannot.
	released   bool
	cordonOnly string
	start, end time.Time
}

// identify names the event, and warns of an event code Lifeboat does not know.
func (h *healthEvent) identify() {
	d, e := h.d, h.e
	h.name, h.fact = d.EventArn, notice.Digest(d.EventArn)
	if d.EventArn == "" {
		// AWS always states it; without it each update is a notice of its own, and a
		// "closed" one cannot find what the event did.
		h.name, h.fact = e.ID, e.ID
		h.r.Warnings = append(h.r.Warnings, Warning{Problem: problemEndUnreadable,
			Detail: fmt.Sprintf("the AWS Health event %s states no detail.eventArn: its notices are named by the envelope id, and its later updates cannot release them", e.ID)})
	}
	if d.Code == "" || !healthTakesDown[d.Code] {
		h.r.Warnings = append(h.r.Warnings, Warning{Problem: problemCodeUnknown,
			Detail: fmt.Sprintf("the AWS Health event %s has detail.eventTypeCode %q, not one Lifeboat knows: taken as a change that takes the instance down", h.name, clip(d.Code))})
	}
}

// readTimes reads the event's status and times. "closed" means the change is over (done or
// canceled): it releases what its notices did, like a completed scheduled event. Without a
// readable start, an open change can only cordon.
func (h *healthEvent) readTimes() {
	d := h.d
	h.released = d.Status == "closed"
	start, startErr := ParseHealthTime(d.Start)
	h.start = start
	switch {
	case h.released:
	case d.Start == "":
		h.cordonOnly = "the AWS Health event " + h.name + " states no detail.startTime"
	case startErr != nil:
		h.cordonOnly = fmt.Sprintf("the AWS Health event %s has detail.startTime %v", h.name, startErr)
	}
	if h.cordonOnly != "" {
		h.r.Warnings = append(h.r.Warnings, Warning{Problem: problemStartUnreadable, Detail: h.cordonOnly + ": its instances are cordoned, not drained"})
	}
	end, endErr := ParseHealthTime(string(d.End))
	h.end = end
	if d.End != "" && endErr != nil {
		h.r.Warnings = append(h.r.Warnings, Warning{Problem: problemEndUnreadable, Detail: fmt.Sprintf("the AWS Health event %s has detail.endTime %v: ignored", h.name, endErr)})
	}
}

// noticeInstances makes one notice per affected instance, once each; entities that are no
// instance are skipped, told one by one up to a few, then counted.
func (h *healthEvent) noticeInstances() {
	d, e := h.d, h.e
	when := "at an unreadable time"
	if !h.start.IsZero() {
		when = "from " + stamp(h.start)
	}
	seen := map[string]bool{}
	skipped := 0
	for i, ent := range d.Entities {
		if !isInstanceID(string(ent.Value)) {
			if skipped++; skipped <= maxEntityWarnings {
				h.r.Warnings = append(h.r.Warnings, Warning{Problem: problemEntityNotInstance,
					Detail: fmt.Sprintf("the AWS Health event %s: detail.affectedEntities[%d].entityValue %q is not an EC2 instance id: skipped", h.name, i, clip(string(ent.Value)))})
			}
			continue
		}
		if seen[string(ent.Value)] {
			continue
		}
		seen[string(ent.Value)] = true
		// Earlier releases named the notice by the envelope id: only that very message,
		// delivered again, still matches a record they wrote (each update has a new id).
		h.r.Notices = append(h.r.Notices, notice.Notice{
			ID: notice.ID(notice.ScheduledMaintenance, string(ent.Value), h.fact), LegacyIDDigest: notice.Digest(notice.ID(notice.ScheduledMaintenance, string(ent.Value), e.ID)),
			Kind: notice.ScheduledMaintenance, Source: notice.SourceQueue,
			InstanceID: string(ent.Value), Deadline: h.start, StartTime: h.start, EndTime: h.end, Action: d.Code, CordonOnly: h.cordonOnly, Released: h.released,
			Description: fmt.Sprintf("AWS Health scheduled change %s %s", d.Code, when),
		})
	}
	if more := skipped - maxEntityWarnings; more > 0 {
		h.r.Warnings = append(h.r.Warnings, Warning{Problem: problemEntityNotInstance,
			Detail: fmt.Sprintf("the AWS Health event %s: %d more affected entities are not EC2 instance ids: skipped", h.name, more)})
	}
}

// Health time layouts: RFC 1123 with a zone name (checked below) or a numeric offset. The day
// may have one digit.
const (
	healthTimeNamedZone = "Mon, 2 Jan 2006 15:04:05 MST"
	healthTimeOffset    = "Mon, 2 Jan 2006 15:04:05 -0700"
)

// ParseHealthTime reads an AWS Health time: RFC 3339, or RFC 1123 with GMT, UT, UTC or a
// numeric offset. Other zone names are refused rather than guessed (Go would read an unknown
// abbreviation as UTC). An empty string is the zero time and no error.
func ParseHealthTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(healthTimeOffset, s); err == nil {
		return t, nil
	}
	named := s
	if rest, ok := strings.CutSuffix(s, " UT"); ok {
		named = rest + " UTC" // Go reads zone names of three letters or more
	}
	if t, err := time.Parse(healthTimeNamedZone, named); err == nil {
		switch zone, _ := t.Zone(); zone {
		case "GMT", "UT", "UTC":
			return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC), nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is neither RFC 3339 nor RFC 1123 with GMT, UT, UTC or a numeric offset", clip(s))
}

var _ = register(eventKind{source: "aws.health", detailTypes: []string{"AWS Health Event"}, name: kindHealth, parse: parseHealth})
