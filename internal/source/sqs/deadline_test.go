// SPDX-License-Identifier: Apache-2.0

package sqs

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// TestBlackHoledQueueTurnsUnhealthy: a queue endpoint that accepts connections and never
// answers ends each receive at its long-poll wait plus the margin, and Healthy reports it by
// then (the failure counts from the receive's start), instead of Run waiting for ever with
// Healthy still nil.
func TestBlackHoledQueueTurnsUnhealthy(t *testing.T) {
	d := cloud.Deadlines{Call: time.Second, ReceiveMargin: 500 * time.Millisecond}
	const wait = time.Second
	api := awssqs.NewFromConfig(cloud.WithDeadlines(sandboxtest.AWSConfig(sandboxtest.BlackHole(t)), d))
	c := NewConsumer(api, ConsumerOptions{
		QueueURL: "http://queue.test/000000000000/q", WaitTime: wait,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	c.healthWindow = wait // shorter than a receive's deadline: one timed-out receive is enough

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		done <- c.Run(ctx, func(context.Context, Message) (Outcome, time.Duration) { return Done, 0 })
	}()
	limit := wait + d.ReceiveMargin
	// Real time, sampled: the receive's own deadline against a silent endpoint is under test,
	// and the consumer is told of a failed receive (Observe) before its health counts it.
	var unhealthy error
	for unhealthy == nil && time.Since(start) < limit+5*time.Second {
		time.Sleep(10 * time.Millisecond)
		unhealthy = c.Healthy()
	}
	took := time.Since(start)
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	if unhealthy == nil {
		t.Fatalf("Healthy still nil %s after the first receive against an endpoint that never answers", took)
	}
	t.Logf("unhealthy after %s: %v", took.Round(time.Millisecond), unhealthy)
	if took > limit+time.Second {
		t.Errorf("unhealthy after %s, want by the receive's deadline %s", took, limit)
	}
	if !errors.Is(unhealthy, context.DeadlineExceeded) {
		t.Errorf("Healthy = %v, want the receive's deadline error", unhealthy)
	}
}
