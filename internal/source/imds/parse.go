package imds

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"lifeboat.dev/lifeboat/internal/notice"
)

// Paths under /latest/meta-data/ that the monitors poll.
const (
	PathSpot           = "spot/instance-action"
	PathScheduled      = "events/maintenance/scheduled"
	PathRebalance      = "events/recommendations/rebalance"
	PathLifecycleState = "autoscaling/target-lifecycle-state"
)

// parseSpot reads {"action":"terminate|stop|hibernate","time":"RFC3339"}. The notice id
// deliberately leaves out the time: a source that restates it on each poll must still name
// one interruption.
func parseSpot(body []byte, instanceID string) (notice.Notice, error) {
	var v struct {
		Action string `json:"action"`
		Time   string `json:"time"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return notice.Notice{}, fmt.Errorf("%s: not JSON: %v (body %q)", PathSpot, err, clip(body))
	}
	switch v.Action {
	case "terminate", "stop", "hibernate":
	default:
		return notice.Notice{}, fmt.Errorf("%s: unknown action %q (body %q)", PathSpot, v.Action, clip(body))
	}
	t, err := time.Parse(time.RFC3339, v.Time)
	if err != nil {
		return notice.Notice{}, fmt.Errorf("%s: time %q is not RFC 3339 (body %q)", PathSpot, v.Time, clip(body))
	}
	return notice.Notice{
		ID: notice.ID(notice.SpotInterruption, instanceID, v.Action), Kind: notice.SpotInterruption, Source: notice.SourceIMDS,
		InstanceID: instanceID, Deadline: t, StartTime: t, Action: v.Action,
		Description: fmt.Sprintf("Spot interruption: the instance will %s at %s", v.Action, t.UTC().Format(time.RFC3339)),
	}, nil
}

// scheduledTimeLayout is how instance metadata writes scheduled event times.
const scheduledTimeLayout = "2 Jan 2006 15:04:05 GMT"

// ScheduledEvent is one entry of the scheduled-events list.
type ScheduledEvent struct {
	Code        string `json:"Code"`
	Description string `json:"Description"`
	EventID     string `json:"EventId"`
	NotBefore   string `json:"NotBefore"`
	NotAfter    string `json:"NotAfter"`
	State       string `json:"State"`
}

// parseScheduled reads the list of scheduled events and returns a notice for each active one.
func parseScheduled(body []byte, instanceID string) ([]notice.Notice, []ScheduledEvent, error) {
	var events []ScheduledEvent
	if err := json.Unmarshal(body, &events); err != nil {
		return nil, nil, fmt.Errorf("%s: not a JSON list of events: %v (body %q)", PathScheduled, err, clip(body))
	}
	var out []notice.Notice
	for _, e := range events {
		if e.EventID == "" {
			return nil, nil, fmt.Errorf("%s: event without EventId (body %q)", PathScheduled, clip(body))
		}
		released := strings.EqualFold(e.State, "canceled") || strings.EqualFold(e.State, "completed")
		if !released && !strings.EqualFold(e.State, "active") {
			return nil, nil, fmt.Errorf("%s: event %s has unknown state %q", PathScheduled, e.EventID, e.State)
		}
		start, err := parseEventTime(e.NotBefore)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: event %s NotBefore: %v", PathScheduled, e.EventID, err)
		}
		var end time.Time
		if e.NotAfter != "" {
			if end, err = parseEventTime(e.NotAfter); err != nil {
				return nil, nil, fmt.Errorf("%s: event %s NotAfter: %v", PathScheduled, e.EventID, err)
			}
		}
		out = append(out, notice.Notice{
			ID: notice.ID(notice.ScheduledMaintenance, instanceID, e.EventID), Kind: notice.ScheduledMaintenance, Source: notice.SourceIMDS,
			InstanceID: instanceID, Deadline: start, StartTime: start, EndTime: end, Action: e.Code, Released: released,
			Description: fmt.Sprintf("Scheduled %s (%s, %s): %s", e.Code, e.EventID, strings.ToLower(e.State), e.Description),
		})
	}
	return out, events, nil
}

func parseEventTime(s string) (time.Time, error) {
	if t, err := time.Parse(scheduledTimeLayout, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("%q is neither %q nor RFC 3339", s, scheduledTimeLayout)
}

// parseRebalance reads {"noticeTime":"RFC3339"}. An instance gets one recommendation, so
// the instance alone identifies it. It sets no deadline: the caller gives the drain budget.
func parseRebalance(body []byte, instanceID string) (notice.Notice, error) {
	var v struct {
		NoticeTime string `json:"noticeTime"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return notice.Notice{}, fmt.Errorf("%s: not JSON: %v (body %q)", PathRebalance, err, clip(body))
	}
	t, err := time.Parse(time.RFC3339, v.NoticeTime)
	if err != nil {
		return notice.Notice{}, fmt.Errorf("%s: noticeTime %q is not RFC 3339 (body %q)", PathRebalance, v.NoticeTime, clip(body))
	}
	return notice.Notice{
		ID: notice.ID(notice.Rebalance, instanceID, ""), Kind: notice.Rebalance, Source: notice.SourceIMDS,
		InstanceID: instanceID, StartTime: t,
		Description: fmt.Sprintf("Rebalance recommendation at %s: the instance is at elevated risk of interruption", t.UTC().Format(time.RFC3339)),
	}, nil
}

// lifecycleStates are the values of autoscaling/target-lifecycle-state.
var lifecycleStates = map[string]bool{"InService": true, "Terminated": true, "Detached": true, "Warmed:Stopped": true, "Warmed:Running": true, "Warmed:Hibernated": true, "Warmed:Terminated": true}

// parseLifecycleState reads the plain-text target lifecycle state. Only Terminated is a
// notice; it has no id or time, so the instance and the state identify it.
func parseLifecycleState(body []byte, instanceID string) (*notice.Notice, error) {
	state := strings.TrimSpace(string(body))
	if !lifecycleStates[state] {
		return nil, fmt.Errorf("%s: unknown state %q", PathLifecycleState, clip(body))
	}
	if state != "Terminated" {
		return nil, nil
	}
	return &notice.Notice{
		ID: notice.ID(notice.ASGTermination, instanceID, ""), Kind: notice.ASGTermination, Source: notice.SourceIMDS,
		InstanceID: instanceID, Action: state,
		Description: "Auto Scaling is terminating the instance (target lifecycle state Terminated)",
	}, nil
}

// clip keeps error messages short when a body is garbage.
func clip(b []byte) string {
	const max = 120
	if len(b) > max {
		return string(b[:max]) + "…"
	}
	return string(b)
}
