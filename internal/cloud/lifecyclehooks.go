// SPDX-License-Identifier: Apache-2.0

package cloud

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"k8s.io/apimachinery/pkg/util/cache"
)

// HookTimeouts are a lifecycle hook's time limits: an action expires HeartbeatTimeout after
// it began or after its last heartbeat, and never lives past GlobalTimeout from its start.
type HookTimeouts struct {
	Heartbeat time.Duration
	Global    time.Duration
}

// AssumedHookTimeouts are Auto Scaling's defaults (a heartbeat timeout of one hour; the global
// timeout is 100 heartbeat timeouts, at most 48 hours). They stand in when a hook's own
// cannot be learned, so that pods keep their own grace periods rather than being cut to a
// guess.
var AssumedHookTimeouts = HookTimeouts{Heartbeat: time.Hour, Global: 48 * time.Hour}

// Heartbeats say how Lifeboat keeps an action alive: one every Interval, none after Until from
// the action's start. A zero Interval means no heartbeats.
type Heartbeats struct {
	Interval, Until time.Duration
}

// Deadline is when an action that began at start expires, given the heartbeats Lifeboat
// sends. Without heartbeats (or with heartbeats too far apart to keep it alive) that is the
// heartbeat timeout from the start. With them it is as far as they carry it: HEARTBEAT_UNTIL
// from the start, never less than one heartbeat timeout. Either way never past the global
// timeout. A heartbeat that fails for good brings the deadline back (see Expiry).
func (t HookTimeouts) Deadline(start time.Time, hb Heartbeats) time.Time {
	end := start.Add(t.Heartbeat)
	if hb.Interval > 0 && hb.Interval < t.Heartbeat {
		end = start.Add(max(hb.Until, t.Heartbeat))
	}
	if t.Global > 0 {
		end = minTime(end, start.Add(t.Global))
	}
	return end
}

// Expiry is when an action that began at start expires if its last heartbeat was at last (the
// start when none was sent): the deadline once heartbeats stop.
func (t HookTimeouts) Expiry(start, last time.Time) time.Time {
	if last.Before(start) {
		last = start
	}
	end := last.Add(t.Heartbeat)
	if t.Global > 0 {
		end = minTime(end, start.Add(t.Global))
	}
	return end
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// LifecycleHookTimeouts asks DescribeLifecycleHooks for one hook's timeouts.
func (a *AWSAutoScaling) LifecycleHookTimeouts(ctx context.Context, group, hook string) (HookTimeouts, error) {
	out, err := a.client.DescribeLifecycleHooks(ctx, &autoscaling.DescribeLifecycleHooksInput{
		AutoScalingGroupName: aws.String(group), LifecycleHookNames: []string{hook},
	})
	if err != nil {
		return HookTimeouts{}, fmt.Errorf("DescribeLifecycleHooks %s/%s: %w", group, hook, err)
	}
	for _, h := range out.LifecycleHooks {
		if aws.ToString(h.LifecycleHookName) != hook {
			continue
		}
		t := HookTimeouts{
			Heartbeat: time.Duration(aws.ToInt32(h.HeartbeatTimeout)) * time.Second,
			Global:    time.Duration(aws.ToInt32(h.GlobalTimeout)) * time.Second,
		}
		if t.Heartbeat <= 0 {
			return HookTimeouts{}, fmt.Errorf("DescribeLifecycleHooks %s/%s: no HeartbeatTimeout in the answer", group, hook)
		}
		return t, nil
	}
	return HookTimeouts{}, fmt.Errorf("DescribeLifecycleHooks %s/%s: %w", group, hook, ErrNoSuchHook)
}

// ErrNoSuchHook means the group has no hook of that name (it was deleted, or the message
// names another account's group).
var ErrNoSuchHook = errors.New("no such lifecycle hook")

// HookTimeoutSource is the part of AutoScaling a HookTimeoutCache reads.
type HookTimeoutSource interface {
	LifecycleHookTimeouts(ctx context.Context, group, hook string) (HookTimeouts, error)
}

// HookTimeoutCache remembers each hook's timeouts: a burst of terminations in one group asks
// once. A hook whose timeouts cannot be learned for good (no permission, no such hook) is
// remembered too, so the reason is reported once per hook while it is remembered; a transient
// failure is asked again next time. Hook names come from queue messages, so the cache is
// bounded: the least recently used hook goes first, an answer is kept for an hour (a hook's
// timeouts can be changed) and a failure for five minutes (the hook may be created, the
// permission granted).
type HookTimeoutCache struct {
	src HookTimeoutSource
	// Calls, when set, counts every call made.
	Calls CallCounter

	mu      sync.Mutex
	entries *cache.LRUExpireCache
}

// Hook cache limits.
const (
	hookCacheSize    = 4096
	hookCacheTTL     = time.Hour
	hookCacheFailTTL = 5 * time.Minute
)

type hookEntry struct {
	timeouts HookTimeouts
	err      error
}

// NewHookTimeoutCache reads through src.
func NewHookTimeoutCache(src HookTimeoutSource) *HookTimeoutCache {
	return newHookTimeoutCache(src, hookCacheSize, realClock{})
}

func newHookTimeoutCache(src HookTimeoutSource, size int, clock cache.Clock) *HookTimeoutCache {
	return &HookTimeoutCache{src: src, entries: cache.NewLRUExpireCacheWithClock(size, clock)}
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

// Timeouts returns the hook's timeouts. first is true when this call learned the answer
// (or its lasting failure) rather than the cache, so the caller can report it once.
func (c *HookTimeoutCache) Timeouts(ctx context.Context, group, hook string) (t HookTimeouts, first bool, err error) {
	key := group + "/" + hook
	if e, ok := c.entries.Get(key); ok {
		e := e.(hookEntry)
		return e.timeouts, false, e.err
	}
	t, err = c.src.LifecycleHookTimeouts(ctx, group, hook)
	if c.Calls != nil {
		c.Calls.AWSCall("DescribeLifecycleHooks", err, nil)
	}
	if err != nil && !IsPermanent(err) && !errors.Is(err, ErrNoSuchHook) {
		return HookTimeouts{}, true, err
	}
	ttl := hookCacheTTL
	if err != nil {
		ttl = hookCacheFailTTL
	}
	// One check-and-add: callers that asked at the same time report the answer once.
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, raced := c.entries.Get(key); raced {
		return t, false, err
	}
	c.entries.Add(key, hookEntry{timeouts: t, err: err}, ttl)
	return t, true, err
}
