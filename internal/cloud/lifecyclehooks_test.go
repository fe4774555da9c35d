package cloud

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aws/smithy-go"
)

var t0 = time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)

func TestHookDeadline(t *testing.T) {
	hour := HookTimeouts{Heartbeat: time.Hour, Global: 48 * time.Hour}
	short := HookTimeouts{Heartbeat: time.Minute, Global: 100 * time.Minute}
	tests := []struct {
		name     string
		timeouts HookTimeouts
		hb       Heartbeats
		want     time.Time
	}{
		{"no heartbeats: the heartbeat timeout", hour, Heartbeats{}, t0.Add(time.Hour)},
		{"short hook, no heartbeats", short, Heartbeats{}, t0.Add(time.Minute)},
		{"heartbeats carry it to HEARTBEAT_UNTIL", short, Heartbeats{Interval: 30 * time.Second, Until: 10 * time.Minute}, t0.Add(10 * time.Minute)},
		{"never past the global timeout", short, Heartbeats{Interval: 30 * time.Second, Until: 48 * time.Hour}, t0.Add(100 * time.Minute)},
		{"heartbeats too far apart keep nothing alive", short, Heartbeats{Interval: 2 * time.Minute, Until: time.Hour}, t0.Add(time.Minute)},
		{"HEARTBEAT_UNTIL below the timeout: the timeout", hour, Heartbeats{Interval: 30 * time.Second, Until: 10 * time.Minute}, t0.Add(time.Hour)},
		{"no global timeout known", HookTimeouts{Heartbeat: time.Minute}, Heartbeats{}, t0.Add(time.Minute)},
	}
	for _, tt := range tests {
		if got := tt.timeouts.Deadline(t0, tt.hb); !got.Equal(tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, got.Sub(t0), tt.want.Sub(t0))
		}
	}
	if got := short.Expiry(t0, t0.Add(10*time.Minute)); !got.Equal(t0.Add(11 * time.Minute)) {
		t.Errorf("expiry after a heartbeat at +10m: %v", got.Sub(t0))
	}
	if got := short.Expiry(t0, time.Time{}); !got.Equal(t0.Add(time.Minute)) {
		t.Errorf("expiry without heartbeats: %v", got.Sub(t0))
	}
	if got := short.Expiry(t0, t0.Add(99*time.Minute+30*time.Second)); !got.Equal(t0.Add(100 * time.Minute)) {
		t.Errorf("expiry near the global timeout: %v", got.Sub(t0))
	}
}

type hookSource struct {
	calls int
	errs  []error // returned in turn; then success
}

func (s *hookSource) LifecycleHookTimeouts(_ context.Context, group, hook string) (HookTimeouts, error) {
	s.calls++
	if len(s.errs) > 0 {
		err := s.errs[0]
		s.errs = s.errs[1:]
		return HookTimeouts{}, err
	}
	return HookTimeouts{Heartbeat: 5 * time.Minute, Global: 500 * time.Minute}, nil
}

func TestHookTimeoutCache(t *testing.T) {
	ctx := context.Background()
	// A transient failure is asked again; a success is remembered.
	src := &hookSource{errs: []error{errors.New("connection reset")}}
	c := NewHookTimeoutCache(src)
	if _, first, err := c.Timeouts(ctx, "g", "h"); err == nil || !first {
		t.Fatalf("first call: first=%v err=%v", first, err)
	}
	for i := range 3 {
		got, first, err := c.Timeouts(ctx, "g", "h")
		if err != nil || got.Heartbeat != 5*time.Minute || first != (i == 0) {
			t.Errorf("call %d: %+v first=%v %v", i, got, first, err)
		}
	}
	if src.calls != 2 {
		t.Errorf("%d calls for one hook, want 2 (a failure, then a success)", src.calls)
	}
	// A lasting failure (no permission, no such hook) is remembered and reported once.
	for _, lasting := range []error{&smithy.GenericAPIError{Code: "AccessDenied", Message: "no"}, fmt.Errorf("x: %w", ErrNoSuchHook)} {
		src := &hookSource{errs: []error{lasting}}
		c := NewHookTimeoutCache(src)
		_, first, err := c.Timeouts(ctx, "g", "h")
		_, again, err2 := c.Timeouts(ctx, "g", "h")
		if err == nil || err2 == nil || !first || again || src.calls != 1 {
			t.Errorf("%v: first=%v again=%v calls=%d errs %v / %v", lasting, first, again, src.calls, err, err2)
		}
	}
}
