// SPDX-License-Identifier: Apache-2.0

package imds

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/text"
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

// Warning is one part of a metadata answer that could not be read while the rest was used.
type Warning struct {
	Problem string // a metrics.Problem* value
	Detail  string // what and where, for the log
}

// Problems a Warning names (the same words as the metrics' problem label).
const (
	problemEventUnreadable       = "event_unreadable"
	problemEventStateUnknown     = "event_state_unknown"
	problemStartUnreadable       = "start_time_unreadable"
	problemLifecycleStateUnknown = "lifecycle_state_unknown"
)

// parseScheduled reads the list of scheduled events and returns a notice for each active,
// canceled or completed one. One event Lifeboat cannot read never hides the others: an event
// without an id or with an unknown state is skipped with a warning, and an active event whose
// start cannot be read cordons without a drain (see notice.Notice.CordonOnly).
func parseScheduled(body []byte, instanceID string) ([]notice.Notice, []Warning, error) {
	var events []ScheduledEvent
	if err := json.Unmarshal(body, &events); err != nil {
		return nil, nil, fmt.Errorf("%s: not a JSON list of events: %v (body %q)", PathScheduled, err, clip(body))
	}
	var (
		out      []notice.Notice
		warnings []Warning
	)
	warn := func(problem, format string, args ...any) {
		warnings = append(warnings, Warning{Problem: problem, Detail: PathScheduled + ": " + fmt.Sprintf(format, args...)})
	}
	for i, e := range events {
		if e.EventID == "" {
			warn(problemEventUnreadable, "event %d (%s) has no EventId: skipped", i, clipString(e.Code))
			continue
		}
		released := strings.EqualFold(e.State, "canceled") || strings.EqualFold(e.State, "completed")
		if !released && !strings.EqualFold(e.State, "active") {
			warn(problemEventStateUnknown, "event %s has unknown state %q: skipped", clipString(e.EventID), clipString(e.State))
			continue
		}
		n := notice.Notice{
			ID: notice.ID(notice.ScheduledMaintenance, instanceID, e.EventID), Kind: notice.ScheduledMaintenance, Source: notice.SourceIMDS,
			InstanceID: instanceID, Action: e.Code, Released: released,
		}
		start, err := parseEventTime(e.NotBefore)
		if err != nil {
			if !released {
				n.CordonOnly = fmt.Sprintf("scheduled event %s has NotBefore %v", clipString(e.EventID), err)
				warn(problemStartUnreadable, "event %s NotBefore %v: the node is cordoned, not drained", clipString(e.EventID), err)
			}
		} else {
			n.Deadline, n.StartTime = start, start
		}
		if e.NotAfter != "" {
			if end, err := parseEventTime(e.NotAfter); err != nil {
				warn(problemEventUnreadable, "event %s NotAfter %v: ignored", clipString(e.EventID), err)
			} else {
				n.EndTime = end
			}
		}
		n.Description = fmt.Sprintf("Scheduled %s (%s, %s): %s", e.Code, e.EventID, strings.ToLower(e.State), e.Description)
		out = append(out, n)
	}
	return out, warnings, nil
}

func parseEventTime(s string) (time.Time, error) {
	if t, err := time.Parse(scheduledTimeLayout, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("%q is neither %q nor RFC 3339", clipString(s), scheduledTimeLayout)
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

// lifecycleStates are the target lifecycle states instance metadata reports.
var lifecycleStates = map[string]bool{"InService": true, "Standby": true, "Terminated": true, "Detached": true,
	"Warmed:Stopped": true, "Warmed:Running": true, "Warmed:Hibernated": true, "Warmed:Terminated": true}

// parseLifecycleState reads the plain-text target lifecycle state. Only Terminated is a
// notice; it has no id or time, so the instance and the state identify it. A state this
// version does not know (Auto Scaling may add some) is not an error: it comes back as
// unknown, to be logged once and ignored. Only an answer that is no state name at all
// (a proxy's error page, say) is an error.
func parseLifecycleState(body []byte, instanceID string) (n *notice.Notice, unknown string, err error) {
	state := strings.TrimSpace(string(body))
	switch {
	case state == "Terminated":
		return &notice.Notice{
			ID: notice.ID(notice.ASGTermination, instanceID, ""), Kind: notice.ASGTermination, Source: notice.SourceIMDS,
			InstanceID: instanceID, Action: state,
			Description: "Auto Scaling is terminating the instance (target lifecycle state Terminated)",
		}, "", nil
	case lifecycleStates[state]:
		return nil, "", nil
	case isStateName(state):
		return nil, state, nil
	}
	return nil, "", fmt.Errorf("%s: not a lifecycle state: %q", PathLifecycleState, clip(body))
}

// isStateName accepts what an Auto Scaling state looks like: a short word of letters, with
// colons between parts (Warmed:Pending:Wait).
func isStateName(s string) bool {
	if s == "" || len(s) > 40 || s[0] == ':' || s[len(s)-1] == ':' {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == ':') {
			return false
		}
	}
	return true
}

func clipString(s string) string { return clip([]byte(s)) }

// clip keeps error messages short when a body is garbage.
func clip(b []byte) string {
	return text.Clip(string(b), 120, "…")
}
