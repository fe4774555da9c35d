// SPDX-License-Identifier: Apache-2.0

package imds

import (
	"context"
	"testing"
	"time"

	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// TestBlackHoledMetadataTurnsUnhealthy: a metadata endpoint that accepts connections and
// never answers fails each read by the client's deadline (METADATA_TRIES seconds and a half;
// the SDK gives up on a token sooner), and the agent's health reports it once FailingAfter
// has passed since the first such read began, instead of the poll waiting for ever.
func TestBlackHoledMetadataTurnsUnhealthy(t *testing.T) {
	client := NewClient(sandboxtest.BlackHole(t), 1, false)
	start := time.Now()
	_, _, err := client.Get(context.Background(), PathSpot)
	if took := time.Since(start); err == nil || took > client.timeout+time.Second {
		t.Fatalf("Get returned %v after %s, want an error by its deadline %s", err, took, client.timeout)
	}

	const failingAfter = time.Second // shorter than one read's deadline: one timed-out read is enough
	// Health is read as each failed read leaves it, on the poller's goroutine, until it fails.
	var p *Poller
	type reading struct {
		unhealthy error
		at        time.Time
	}
	first := make(chan reading, 1)
	observe := func(_ string, err error) {
		if err == nil {
			return
		}
		if unhealthy := p.Healthy(); unhealthy != nil {
			select {
			case first <- reading{unhealthy, time.Now()}:
			default:
			}
		}
	}
	p = NewPoller(client, inst, Options{Spot: true, Interval: 100 * time.Millisecond, FailingAfter: failingAfter, Observe: observe})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	start = time.Now()
	go func() { defer close(done); p.Run(ctx, make(chan notice.Notice)) }()
	// Real time: what is under test is the read's own deadline against a silent endpoint.
	var r reading
	select {
	case r = <-first:
	case <-time.After(client.timeout + 5*time.Second):
	}
	unhealthy, took := r.unhealthy, r.at.Sub(start)
	cancel()
	<-done
	if unhealthy == nil {
		t.Fatalf("Healthy still nil %s after polling an endpoint that never answers", time.Since(start))
	}
	t.Logf("unhealthy after %s: %v", took.Round(time.Millisecond), unhealthy)
	if limit := max(failingAfter, client.timeout); took > limit+time.Second {
		t.Errorf("unhealthy after %s, want by %s", took, limit)
	}
}
