// SPDX-License-Identifier: Apache-2.0

package config

import (
	"strings"
	"testing"
)

func TestInstanceStatusSettings(t *testing.T) {
	controller := []string{"QUEUE_URL", "https://sqs.us-east-1.amazonaws.com/111122223333/q", "CLUSTER_NAME", "c"}
	tests := []struct {
		name    string
		mode    Mode
		env     []string
		wantErr string
		warning string
	}{
		{"off by default", ModeController, controller, "", ""},
		{"on", ModeController, append(controller, "ENABLE_INSTANCE_STATUS_DRAINING", "true", "SET_IMPAIRED_INSTANCE_UNHEALTHY", "true"), "", ""},
		{"unhealthy marks need the poll", ModeController, append(controller, "SET_IMPAIRED_INSTANCE_UNHEALTHY", "true"),
			"SET_IMPAIRED_INSTANCE_UNHEALTHY=true needs ENABLE_INSTANCE_STATUS_DRAINING=true", ""},
		{"agent mode", ModeAgent, []string{"NODE_NAME", "n", "ENABLE_INSTANCE_STATUS_DRAINING", "true"}, "", "ENABLE_INSTANCE_STATUS_DRAINING has no effect in agent mode"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := mustLoad(t, nil, env(tt.env...))
			err := l.Validate(tt.mode)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("got %v, want %q", err, tt.wantErr)
			}
			if got := strings.Join(l.Warnings, "\n"); (tt.warning == "") != !strings.Contains(got, "INSTANCE_STATUS") || !strings.Contains(got, tt.warning) {
				t.Errorf("warnings %q, want %q", got, tt.warning)
			}
		})
	}
	for _, bad := range [][2]string{{"INSTANCE_STATUS_INTERVAL", "0"}, {"INSTANCE_IMPAIRED_THRESHOLD", "-1"}, {"INSTANCE_STATUS_INTERVAL", "often"}} {
		if _, err := Load(nil, env(bad[0], bad[1])); err == nil || !strings.Contains(err.Error(), bad[0]) {
			t.Errorf("%s=%s: %v, want an error naming it", bad[0], bad[1], err)
		}
	}
}
