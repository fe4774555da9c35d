package controller

import (
	"context"
	"testing"
	"time"

	"lifeboat.dev/lifeboat/internal/source/sqs"
)

func TestMessageFate(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name    string
		ctx     context.Context
		fates   []noticeFate
		outcome sqs.Outcome
		delay   time.Duration
		label   string
	}{
		{"all done", context.Background(), []noticeFate{noticeDone, noticeDone}, sqs.Done, 0, "done"},
		{"one of ours unfinished: back soon", context.Background(), []noticeFate{noticeDone, noticeRetry, noticeForeign}, sqs.Retry, retrySoon, "retry"},
		{"ours done, another cluster's kept for it", context.Background(), []noticeFate{noticeForeign, noticeDone}, sqs.Retry, retryLater, "not_owned"},
		{"stopping", context.Background(), []noticeFate{noticeDone, noticeCancelled}, sqs.Retry, 0, "retry"},
		{"stopping, all done", cancelled, []noticeFate{noticeDone}, sqs.Retry, 0, "retry"},
	}
	for _, tt := range tests {
		outcome, delay, label := messageFate(tt.ctx, tt.fates)
		if outcome != tt.outcome || delay != tt.delay || label != tt.label {
			t.Errorf("%s: %v %v %q, want %v %v %q", tt.name, outcome, delay, label, tt.outcome, tt.delay, tt.label)
		}
	}
}
