// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/lifecycle"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/record"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// A try of the agent's intake that panics (here on reading the node) is that try's failure:
// counted under site notice, logged, and tried again as after an error, and the notice is
// recorded on the node by the next try.
func TestIntakePanicIsRetried(t *testing.T) {
	const instance = "i-0123456789abcdef0"
	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/" + instance}})
	var reads atomic.Int32
	client.PrependReactor("*", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		if reads.Add(1) == 1 {
			var nodes []*corev1.Node
			_ = nodes[0].Name // a bug met on the node
		}
		return false, nil, nil
	})
	m, logs := metrics.New(), &syncBuffer{}
	a := New(Options{Config: sandboxtest.Config(t, config.ModeAgent, "NODE_NAME", "n1"), Client: client, Metrics: m,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n := notice.Notice{ID: "spot-1", Kind: notice.SpotInterruption, Source: notice.SourceIMDS, InstanceID: instance,
		StartTime: time.Now(), Deadline: time.Now().Add(2 * time.Minute)}
	if !a.intake(ctx, n) {
		t.Fatal("the notice was not recorded after the try that panicked")
	}
	if got := m.Value("lifeboat_reconcile_panics_total", "site", "notice"); got != 1 {
		t.Errorf("lifeboat_reconcile_panics_total{site=notice} = %v, want 1", got)
	}
	node, err := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, recorded := node.Annotations[record.Annotation]; !recorded {
		t.Errorf("no record on the node: %v", node.Annotations)
	}
	logs.mu.Lock()
	defer logs.mu.Unlock()
	for _, want := range []string{"site=notice", "notice=spot-1", "intake_test.go", "retrying"} {
		if !strings.Contains(logs.b.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.b.String())
		}
	}
}

// panickingGroups is an Auto Scaling client whose every call panics (a nil method set).
type panickingGroups struct{ cloud.AutoScaling }

// A panic while reading the termination hook's timeout does not lose the notice: the poller
// reports a notice once, so it goes on to its intake with the assumed deadline, and the panic is
// counted under its own site and logged.
func TestHookTimeoutPanicKeepsTheNotice(t *testing.T) {
	m, logs := metrics.New(), &syncBuffer{}
	a := New(Options{Config: sandboxtest.Config(t, config.ModeAgent, "NODE_NAME", "n1", "ASG_LIFECYCLE_HOOK_NAME", "drain"),
		Client: fake.NewClientset(), Metrics: m, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	a.group = &lifecycle.InstanceGroup{AutoScaling: panickingGroups{}, InstanceID: "i-0123456789abcdef0"}
	a.hooks = cloud.NewHookTimeoutCache(panickingGroups{})
	start := time.Now().Add(-time.Minute)
	n := notice.Notice{ID: "asg-1", Kind: notice.ASGTermination, Source: notice.SourceIMDS, InstanceID: "i-0123456789abcdef0", StartTime: start}
	got := a.hookDeadlineOrAssumed(context.Background(), n)
	if want := cloud.AssumedHookTimeouts.Deadline(start, cloud.Heartbeats{}); !got.Equal(want) {
		t.Errorf("deadline after a panic = %v, want the assumed %v", got, want)
	}
	if got := m.Value("lifeboat_reconcile_panics_total", "site", "hook_timeout"); got != 1 {
		t.Errorf("lifeboat_reconcile_panics_total{site=hook_timeout} = %v, want 1", got)
	}
	logs.mu.Lock()
	defer logs.mu.Unlock()
	for _, want := range []string{"site=hook_timeout", "notice=asg-1", "intake_test.go"} {
		if !strings.Contains(logs.b.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.b.String())
		}
	}
}
