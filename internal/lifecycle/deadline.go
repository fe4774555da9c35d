// SPDX-License-Identifier: Apache-2.0

package lifecycle

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"lifeboat.dev/lifeboat/internal/cloud"
)

// Deadline is when a termination hook's action that began at start expires: the hook's
// timeouts (DescribeLifecycleHooks, cached per hook) carried on by the heartbeats hb the mode
// sends, never past the hook's global timeout (docs/concepts/deadlines.md). When the
// timeouts cannot be learned, Auto Scaling's default stands in, so that pods keep their own
// grace periods, and the log says why (once per hook for a lasting answer).
func Deadline(ctx context.Context, hooks *cloud.HookTimeoutCache, group, hook string, start time.Time, hb cloud.Heartbeats, log *slog.Logger) time.Time {
	timeouts, first, err := hooks.Timeouts(ctx, group, hook)
	switch {
	case err != nil && (first || !(cloud.IsPermanent(err) || errors.Is(err, cloud.ErrNoSuchHook))):
		log.Warn("the lifecycle hook's heartbeat timeout is unknown: pods keep their own grace periods, and the drain is bounded by Auto Scaling's default timeout",
			"group", group, "hook", hook, "assumedHeartbeatTimeout", cloud.AssumedHookTimeouts.Heartbeat.String(), "err", err)
		timeouts = cloud.AssumedHookTimeouts
	case err != nil:
		timeouts = cloud.AssumedHookTimeouts
	case first:
		log.Info("lifecycle hook timeouts", "group", group, "hook", hook,
			"heartbeatTimeout", timeouts.Heartbeat.String(), "globalTimeout", timeouts.Global.String())
	}
	deadline := timeouts.Deadline(start, hb)
	log.Debug("lifecycle action deadline", "start", start, "deadline", deadline)
	return deadline
}
