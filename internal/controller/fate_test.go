// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"testing"
	"time"

	"lifeboat.dev/lifeboat/internal/source/sqs"
)

func TestMessageFate(t *testing.T) {
	t.Parallel()
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
		outcome, delay, label := messageFate(tt.ctx, tt.fates, 5)
		if outcome != tt.outcome || delay != tt.delay || label != tt.label {
			t.Errorf("%s: %v %v %q, want %v %v %q", tt.name, outcome, delay, label, tt.outcome, tt.delay, tt.label)
		}
	}
}

func TestRetryDelayDoublesToRetrySoon(t *testing.T) {
	t.Parallel()
	for receives, want := range map[int]time.Duration{
		0:    retryFirst, // a queue that did not say
		1:    time.Second,
		2:    2 * time.Second,
		3:    4 * time.Second,
		4:    8 * time.Second,
		5:    retrySoon,
		1000: retrySoon,
	} {
		if got := retryDelay(receives); got != want {
			t.Errorf("after delivery %d: %v, want %v", receives, got, want)
		}
	}
	_, delay, _ := messageFate(context.Background(), []noticeFate{noticeRetry}, 1)
	if delay != retryFirst {
		t.Errorf("first delivery of an unfinished message: back in %v, want %v", delay, retryFirst)
	}
}
