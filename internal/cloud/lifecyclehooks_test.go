// SPDX-License-Identifier: Apache-2.0

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

// keyedHookSource answers every hook, except those in missing, which do not exist.
type keyedHookSource struct {
	calls   map[string]int
	missing map[string]bool
}

func (s *keyedHookSource) LifecycleHookTimeouts(_ context.Context, group, hook string) (HookTimeouts, error) {
	s.calls[group+"/"+hook]++
	if s.missing[hook] {
		return HookTimeouts{}, fmt.Errorf("DescribeLifecycleHooks %s/%s: %w", group, hook, ErrNoSuchHook)
	}
	return HookTimeouts{Heartbeat: time.Minute}, nil
}

type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time { return c.now }

// Hook names come from queue messages: the cache holds a bounded number of hooks, the least
// recently used going first.
func TestHookTimeoutCacheBounded(t *testing.T) {
	ctx := context.Background()
	src := &keyedHookSource{calls: map[string]int{}}
	c := NewHookTimeoutCache(src)
	for i := range hookCacheSize + 1 {
		if _, _, err := c.Timeouts(ctx, "g", fmt.Sprintf("h%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, first, _ := c.Timeouts(ctx, "g", "h0"); !first || src.calls["g/h0"] != 2 {
		t.Errorf("the oldest of %d hooks: first=%v after %d calls, want it dropped and asked again", hookCacheSize+1, first, src.calls["g/h0"])
	}
	last := fmt.Sprintf("h%d", hookCacheSize)
	if _, first, _ := c.Timeouts(ctx, "g", last); first || src.calls["g/"+last] != 1 {
		t.Errorf("the newest hook was asked again (%d calls)", src.calls["g/"+last])
	}
}

// An answer is kept for an hour, a hook that does not exist for five minutes: then each is
// asked (and reported) again.
func TestHookTimeoutCacheExpires(t *testing.T) {
	ctx := context.Background()
	src := &keyedHookSource{calls: map[string]int{}, missing: map[string]bool{"gone": true}}
	clock := &fakeClock{now: t0}
	c := newHookTimeoutCache(src, 10, clock)
	ask := func(hook string) (bool, error) {
		_, first, err := c.Timeouts(ctx, "g", hook)
		return first, err
	}
	for _, hook := range []string{"drain", "gone"} {
		if first, _ := ask(hook); !first {
			t.Fatalf("%s: not first on the first call", hook)
		}
	}
	tests := []struct {
		after      time.Duration
		hook       string
		wantFirst  bool
		wantCalled int
	}{
		{4 * time.Minute, "gone", false, 1},
		{4 * time.Minute, "drain", false, 1},
		{5*time.Minute + time.Second, "gone", true, 2},
		{59 * time.Minute, "drain", false, 1},
		{61 * time.Minute, "drain", true, 2},
	}
	for _, tt := range tests {
		clock.now = t0.Add(tt.after)
		first, err := ask(tt.hook)
		if first != tt.wantFirst || src.calls["g/"+tt.hook] != tt.wantCalled {
			t.Errorf("%s after %v: first=%v, %d calls; want first=%v, %d calls", tt.hook, tt.after, first, src.calls["g/"+tt.hook], tt.wantFirst, tt.wantCalled)
		}
		if (tt.hook == "gone") != errors.Is(err, ErrNoSuchHook) {
			t.Errorf("%s after %v: err %v", tt.hook, tt.after, err)
		}
	}
}
