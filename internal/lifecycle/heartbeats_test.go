// SPDX-License-Identifier: Apache-2.0

package lifecycle

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/instancegate"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/notice"
)

// beatingScaling sends heartbeats, but panics on the hook named "bad"; its hooks time out an
// hour after their last heartbeat.
type beatingScaling struct {
	autoScaling
	mu    sync.Mutex
	beats map[string]int // by hook
	beat  chan struct{}  // closed and replaced at every heartbeat
}

func (a *beatingScaling) RecordLifecycleActionHeartbeat(_ context.Context, l cloud.LifecycleAction) error {
	a.mu.Lock()
	a.beats[l.Hook]++
	if a.beat != nil {
		close(a.beat)
	}
	a.beat = make(chan struct{})
	a.mu.Unlock()
	if l.Hook == "bad" {
		var hooks map[string]*notice.Lifecycle
		_ = hooks[l.Hook].Group // a bug met on this action's answer
	}
	return nil
}

func (a *beatingScaling) LifecycleHookTimeouts(context.Context, string, string) (cloud.HookTimeouts, error) {
	return cloud.HookTimeouts{Heartbeat: time.Hour, Global: 48 * time.Hour}, nil
}

func (a *beatingScaling) count(hook string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.beats[hook]
}

// awaitBeats waits, heartbeat by heartbeat, until hook has had n; on the bubble's clock the
// heartbeats' timers fire as soon as everything waits for them.
func (a *beatingScaling) awaitBeats(hook string, n int) {
	for {
		a.mu.Lock()
		if a.beat == nil {
			a.beat = make(chan struct{})
		}
		got, next := a.beats[hook], a.beat
		a.mu.Unlock()
		if got >= n {
			return
		}
		<-next
	}
}

// A heartbeat that panics stops its own action's heartbeats only: the panic is counted under
// site lifecycle_heartbeat and logged with the stack, the drain's deadline comes to that
// action's expiry (the heartbeats it counted on will not come), and the other action of the
// node goes on beating.
func TestHeartbeatPanicStopsThatActionOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ownNode := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}, Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/" + instance}}
		client := fake.NewClientset(ownNode.DeepCopy())
		asg := &beatingScaling{beats: map[string]int{}}
		m := metrics.New()
		var logs bytes.Buffer
		var mu sync.Mutex
		h := &Heartbeats{AutoScaling: asg, Hooks: cloud.NewHookTimeoutCache(asg), Nodes: nodes.NewWriter(client), Metrics: m,
			Gate: instancegate.New(instancegate.Options{Nodes: client, Groups: asg}),
			Log:  slog.New(slog.NewTextHandler(&lockedBuffer{mu: &mu, b: &logs}, nil)), Policy: cloud.Heartbeats{Interval: 20 * time.Millisecond, Until: time.Hour}}
		began := time.Now()
		action := func(hook string) notice.Notice {
			return notice.Notice{ID: "n-" + hook, Kind: notice.ASGTermination, InstanceID: instance, StartTime: began,
				Lifecycle: &notice.Lifecycle{Group: "workers", Hook: hook}}
		}
		far := began.Add(40 * time.Hour)
		deadline := drain.NewDeadline(far)
		stop := h.Start(context.Background(), ownNode, []notice.Notice{action("bad"), action("good")}, deadline)

		asg.awaitBeats("good", 4)
		synctest.Wait()
		if n := m.Value("lifeboat_reconcile_panics_total", "site", "lifecycle_heartbeat"); n != 1 {
			t.Errorf("%v panics counted under lifecycle_heartbeat, want 1", n)
		}
		stop()
		if n := asg.count("bad"); n != 1 {
			t.Errorf("%d heartbeats tried for the panicking action, want 1: its heartbeats stop", n)
		}
		if got, want := deadline.Time(), began.Add(time.Hour); !got.Equal(want) {
			t.Errorf("drain deadline %s, want the panicking action's expiry %s (its start plus the heartbeat timeout)", got, want)
		}
		mu.Lock()
		out := logs.String()
		mu.Unlock()
		for _, want := range []string{"level=ERROR", "site=lifecycle_heartbeat", "notice=n-bad", "nil pointer dereference", "heartbeats_test.go"} {
			if !strings.Contains(out, want) {
				t.Errorf("log lacks %q:\n%s", want, out)
			}
		}
	})
}

type lockedBuffer struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
