// SPDX-License-Identifier: Apache-2.0

package messages

import (
	"encoding/json"
	"fmt"
	"time"

	"lifeboat.dev/lifeboat/internal/notice"
)

const kindRebalance = "rebalance recommendation"

// parseRebalance: an instance gets one recommendation, so the instance alone identifies it.
// No deadline: the caller gives the drain budget.
func parseRebalance(body string, e envelope, at time.Time) (Result, error) {
	var d struct {
		InstanceID string `json:"instance-id"`
	}
	if err := json.Unmarshal(e.Detail, &d); err != nil {
		return Result{}, detailError(kindRebalance, err, body)
	}
	if err := checkInstance(kindRebalance, "detail.instance-id", d.InstanceID, body); err != nil {
		return Result{}, err
	}
	return one(notice.Notice{
		ID: notice.ID(notice.Rebalance, d.InstanceID, ""), Kind: notice.Rebalance, Source: notice.SourceQueue,
		InstanceID: d.InstanceID, StartTime: at,
		Description: fmt.Sprintf("Rebalance recommendation at %s: the instance is at elevated risk of interruption", stamp(at)),
	}), nil
}

var _ = register(eventKind{source: "aws.ec2", detailTypes: []string{"EC2 Instance Rebalance Recommendation"}, name: kindRebalance, parse: parseRebalance})
