// SPDX-License-Identifier: Apache-2.0

package controller_test

import (
	"log/slog"
	"testing"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/controller"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/source/sqs/messages"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// TestIgnoredMessagesStartAtZero: the controller, which owns the queue's parser, hands its
// ignored (kind, reason) pairs to the metrics, so each series is there before its first message.
func TestIgnoredMessagesStartAtZero(t *testing.T) {
	m := metrics.New()
	cfg := sandboxtest.Config(t, config.ModeController, "QUEUE_URL", "http://127.0.0.1:1/000000000000/q", "AWS_REGION", "us-east-1")
	controller.New(controller.Options{Config: cfg, Metrics: m, Logger: slog.New(slog.DiscardHandler)})
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := 0
	for _, f := range families {
		if f.GetName() == "lifeboat_queue_messages_ignored_total" {
			series = len(f.GetMetric())
		}
	}
	if want := len(messages.IgnoredLabels()); series != want {
		t.Errorf("%d series of lifeboat_queue_messages_ignored_total after New, want the parser's %d", series, want)
	}
}
