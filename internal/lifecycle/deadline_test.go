// SPDX-License-Identifier: Apache-2.0

package lifecycle

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// hooks answers DescribeLifecycleHooks with timeouts or err.
type hooks struct {
	cloud.AutoScaling
	timeouts cloud.HookTimeouts
	err      error
}

func (h hooks) LifecycleHookTimeouts(context.Context, string, string) (cloud.HookTimeouts, error) {
	return h.timeouts, h.err
}

func TestDeadline(t *testing.T) {
	start := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	own := cloud.HookTimeouts{Heartbeat: 5 * time.Minute, Global: time.Hour}
	tests := []struct {
		name  string
		hooks hooks
		hb    cloud.Heartbeats
		want  time.Time
		log   string
	}{
		{"the hook's heartbeat timeout", hooks{timeouts: own}, cloud.Heartbeats{}, start.Add(5 * time.Minute), "lifecycle hook timeouts"},
		{"carried on by heartbeats, within the global timeout", hooks{timeouts: own}, cloud.Heartbeats{Interval: time.Minute, Until: 2 * time.Hour},
			start.Add(time.Hour), "lifecycle hook timeouts"},
		{"unknown: Auto Scaling's default, said", hooks{err: errors.New("throttled")}, cloud.Heartbeats{}, start.Add(time.Hour),
			"heartbeat timeout is unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logs := &sandboxtest.LogBuffer{}
			got := Deadline(context.Background(), cloud.NewHookTimeoutCache(tt.hooks), "workers", "drain", start, tt.hb, slog.New(slog.NewTextHandler(logs, nil)))
			if !got.Equal(tt.want) {
				t.Errorf("deadline %v, want %v", got, tt.want)
			}
			if !strings.Contains(logs.String(), tt.log) {
				t.Errorf("log lacks %q:\n%s", tt.log, logs.String())
			}
		})
	}
}
