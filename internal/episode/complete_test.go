// SPDX-License-Identifier: Apache-2.0

package episode

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"lifeboat.dev/lifeboat/internal/instancegate"
	"lifeboat.dev/lifeboat/internal/lifecycle"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/record"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// The completion phase records a notice finished only once its completer is done with it: a
// transient failure leaves it to be retried, a refusal by the instance gate finishes it
// without the call, and an abandoned action is not completed again.
func TestCompletionFinishesOnlyWhatIsDone(t *testing.T) {
	hook := notice.Notice{ID: notice.ID(notice.ASGTermination, "i-0123456789abcdef0", notice.TokenDigest("t")), Kind: notice.ASGTermination,
		Source: notice.SourceQueue, InstanceID: "i-0123456789abcdef0", Lifecycle: &notice.Lifecycle{Group: "workers", Hook: "drain"}}
	refusal := &instancegate.Refusal{Request: instancegate.Request{Call: instancegate.CallCompleteLifecycleAction, Node: "n1", InstanceID: hook.InstanceID},
		NodeInstance: "i-0fedcba9876543210", Reason: "the node names another instance"}
	for _, tc := range []struct {
		name      string
		answer    error
		abandoned bool
		calls     int
		finished  bool
	}{
		{"completed", nil, false, 1, true},
		{"a transient failure is retried", errors.New("throttled"), false, 1, false},
		{"a refusal finishes it without the call", refusal, false, 1, true},
		{"an abandoned action is not completed again", nil, true, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			client := fake.NewSimpleClientset(ownedNode(t, record.PhaseDraining, &record.Owner{Origin: queueOrigin}, hook))
			calls := 0
			c := &completions{cfg: sandboxtest.Config(t, ""), writer: nodes.NewWriter(client), handled: newHandledNotices(),
				log: slog.New(slog.DiscardHandler), claims: &claims{origin: queueOrigin},
				reports: &reports{cfg: sandboxtest.Config(t, ""), log: slog.New(slog.DiscardHandler)},
				completer: CompleteFunc(func(context.Context, string, notice.Notice) (*lifecycle.Completed, error) {
					calls++
					return nil, tc.answer
				})}
			done := drainOutcome{ran: true}
			if tc.abandoned {
				done.abandoned = []string{hook.ID}
			}
			_, err := c.finish(ctx, hook, "n1", nil, &done)
			if (err != nil) == tc.finished {
				t.Fatalf("finish: %v", err)
			}
			n, _ := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
			r, _ := record.Read(n)
			if calls != tc.calls || r.WorkDone(hook.ID, true) != tc.finished {
				t.Errorf("%d completer calls, finished %v; want %d, %v", calls, r.WorkDone(hook.ID, true), tc.calls, tc.finished)
			}
			if tc.finished && r.Owner != nil {
				t.Errorf("the claim outlived the finished notice: %+v", r.Owner)
			}
		})
	}
}

// Under DRY_RUN the lifecycle action is not completed, and that is said: a log line, the
// dry_run count of lifecycle_complete, and the notice still finished in the record.
func TestDryRunSaysItWouldComplete(t *testing.T) {
	ctx := context.Background()
	hook := notice.Notice{ID: notice.ID(notice.ASGTermination, "i-0123456789abcdef0", notice.TokenDigest("t")), Kind: notice.ASGTermination,
		Source: notice.SourceQueue, InstanceID: "i-0123456789abcdef0", Lifecycle: &notice.Lifecycle{Group: "workers", Hook: "drain"}}
	client := fake.NewSimpleClientset(ownedNode(t, record.PhaseDraining, &record.Owner{Origin: queueOrigin}, hook))
	cfg := sandboxtest.Config(t, "", "DRY_RUN", "true")
	logs, m, calls := &sandboxtest.LogBuffer{}, metrics.New(), 0
	c := &completions{cfg: cfg, writer: nodes.NewWriter(client), handled: newHandledNotices(), metrics: m,
		log: slog.New(slog.NewTextHandler(logs, nil)), claims: &claims{origin: queueOrigin},
		reports: &reports{cfg: cfg, log: slog.New(slog.DiscardHandler)},
		completer: CompleteFunc(func(context.Context, string, notice.Notice) (*lifecycle.Completed, error) {
			calls++
			return nil, nil
		})}
	if _, err := c.finish(ctx, hook, "n1", nil, &drainOutcome{ran: true}); err != nil {
		t.Fatal(err)
	}
	if calls != 0 {
		t.Errorf("%d completer calls under DRY_RUN, want 0", calls)
	}
	if got := m.Value("lifeboat_actions_total", "action", "lifecycle_complete", "result", "dry_run"); got != 1 {
		t.Errorf("lifeboat_actions_total{lifecycle_complete,dry_run} = %v, want 1", got)
	}
	if !strings.Contains(logs.String(), "dry run: would complete the lifecycle action") || !strings.Contains(logs.String(), "hook=drain") {
		t.Errorf("no log line of the completion a dry run leaves out:\n%s", logs.String())
	}
}
