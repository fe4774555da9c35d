// SPDX-License-Identifier: Apache-2.0

package messages

import (
	"encoding/json"
	"fmt"
	"time"

	"lifeboat.dev/lifeboat/internal/notice"
)

const kindState = "state change"

// stateGoing are the states after which the instance is gone or going; stateStaying the rest.
var (
	stateGoing   = map[string]bool{"stopping": true, "stopped": true, "shutting-down": true, "terminated": true}
	stateStaying = map[string]bool{"pending": true, "running": true}
)

func parseStateChange(body string, e envelope, at time.Time) (Result, error) {
	var d struct {
		InstanceID string `json:"instance-id"`
		State      string `json:"state"`
	}
	if err := json.Unmarshal(e.Detail, &d); err != nil {
		return Result{}, detailError(kindState, err, body)
	}
	if err := checkInstance(kindState, "detail.instance-id", d.InstanceID, body); err != nil {
		return Result{}, err
	}
	if stateStaying[d.State] {
		return ignored(IgnoreStateChange, ReasonInstanceStays, fmt.Sprintf("instance %s is %s", d.InstanceID, d.State)), nil
	}
	if !stateGoing[d.State] {
		return Result{}, fmt.Errorf("%s: detail.state %q is not an EC2 instance state (body %q)", kindState, clip(d.State), clip(body))
	}
	return one(notice.Notice{
		ID: notice.ID(notice.StateChange, d.InstanceID, d.State), Kind: notice.StateChange, Source: notice.SourceQueue,
		InstanceID: d.InstanceID, StartTime: at, Action: d.State,
		Description: fmt.Sprintf("The instance entered state %s at %s", d.State, stamp(at)),
	}), nil
}

var _ = register(eventKind{source: "aws.ec2", detailTypes: []string{"EC2 Instance State-change Notification"}, name: kindState, parse: parseStateChange})
