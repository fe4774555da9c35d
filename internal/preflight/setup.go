// SPDX-License-Identifier: Apache-2.0

package preflight

import (
	"context"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/setupcheck"
	"lifeboat.dev/lifeboat/internal/source/sqs/messages"
)

// CheckSetup is the controller's check of the AWS set-up that feeds the queue, as rows: one
// ok row when nothing is wrong, else a row per finding (a set-up that cannot be read warns).
func CheckSetup(ctx context.Context, s cloud.Setup, queueURL string) []Row {
	const check = "aws set-up: rules and queue policy"
	findings, err := setupcheck.Check(ctx, setupcheck.Options{Setup: s, QueueURL: queueURL, Kinds: messages.EventKinds()})
	if err != nil {
		return []Row{{Check: check, Status: StatusWarn, Detail: err.Error(), Fix: "the controller checks it again at start and every hour"}}
	}
	if len(findings) == 0 {
		return []Row{{Check: check, Status: StatusOK, Detail: "every notice kind has an enabled EventBridge rule to the queue, and the queue lets EventBridge send"}}
	}
	rows := make([]Row, 0, len(findings))
	for _, f := range findings {
		status := StatusFail
		if f.Check == setupcheck.CheckPermission {
			status = StatusWarn
		}
		rows = append(rows, Row{Check: "aws set-up: " + f.Check, Status: status, Detail: f.Problem, Fix: f.Fix})
	}
	return rows
}
