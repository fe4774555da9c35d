// SPDX-License-Identifier: Apache-2.0

package lifecycle

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"

	"github.com/aws/smithy-go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/instancegate"
	"lifeboat.dev/lifeboat/internal/metrics"
)

// autoScaling answers completions with err and counts them; every instance is in "workers".
type autoScaling struct {
	cloud.AutoScaling
	mu    sync.Mutex
	err   error
	calls []cloud.LifecycleAction
}

func (a *autoScaling) GroupOf(context.Context, string) (string, error) { return "workers", nil }

func (a *autoScaling) CompleteLifecycleAction(_ context.Context, l cloud.LifecycleAction) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls = append(a.calls, l)
	return a.err
}

const (
	node     = "ip-10-0-0-1.ec2.internal"
	instance = "i-0123456789abcdef0"
)

func TestComplete(t *testing.T) {
	ownNode := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}, Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/" + instance}}
	tests := []struct {
		name     string
		instance string
		group    string
		err      error
		done     bool
		wantErr  func(error) bool
		calls    int
		result   string // lifeboat_actions_total{action="lifecycle_complete"} result counted, if any
	}{
		{name: "completed", instance: instance, group: "workers", done: true, calls: 1, result: metrics.ResultOK},
		{name: "already over", instance: instance, group: "workers", err: cloud.ErrNoActiveAction, calls: 1},
		{name: "a transient failure is returned to retry", instance: instance, group: "workers", err: errors.New("throttled"), calls: 1,
			wantErr: func(err error) bool { return err != nil && errors.Unwrap(err) != nil }},
		{name: "a permanent failure is given up: the action times out", instance: instance, group: "workers", calls: 1,
			err: &smithy.GenericAPIError{Code: "AccessDenied"}, result: metrics.ResultGivenUp},
		{name: "another instance than the node's is refused without a call", instance: "i-0fedcba9876543210", group: "workers",
			wantErr: func(err error) bool { _, refused := instancegate.IsRefusal(err); return refused }, result: metrics.ResultRefused},
		{name: "another group than the instance's is refused without a call", instance: instance, group: "other",
			wantErr: func(err error) bool { _, refused := instancegate.IsRefusal(err); return refused }, result: metrics.ResultRefused},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			asg := &autoScaling{err: tt.err}
			m := metrics.New()
			c := Completer{AutoScaling: asg, Metrics: m, Log: slog.New(slog.DiscardHandler),
				Gate: instancegate.New(instancegate.Options{Nodes: fake.NewClientset(ownNode.DeepCopy()), Groups: asg})}
			done, err := c.Complete(context.Background(), node, cloud.LifecycleAction{Group: tt.group, Hook: "drain", InstanceID: tt.instance}, "n1")
			if done != tt.done {
				t.Errorf("done %v, want %v", done, tt.done)
			}
			if tt.wantErr == nil && err != nil || tt.wantErr != nil && !tt.wantErr(err) {
				t.Errorf("err %v", err)
			}
			if len(asg.calls) != tt.calls {
				t.Errorf("%d CompleteLifecycleAction calls, want %d", len(asg.calls), tt.calls)
			}
			if tt.result != "" && m.Value("lifeboat_actions_total", "action", metrics.ActionLifecycleComplete, "result", tt.result) != 1 {
				t.Errorf("no lifeboat_actions_total{result=%q}", tt.result)
			}
		})
	}
}
