// SPDX-License-Identifier: Apache-2.0

package lifecycle

import (
	"context"
	"log/slog"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/instancegate"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/notice"
)

// The agent's own hook is completed only for its own instance's termination notice, and only
// once the agent has set it up.
func TestOwnHook(t *testing.T) {
	ownNode := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}, Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/" + instance}}
	hookNotice := func(inst string) notice.Notice {
		return notice.Notice{ID: notice.ID(notice.ASGTermination, inst, ""), Kind: notice.ASGTermination, InstanceID: inst}
	}
	ctx := context.Background()
	asg := &autoScaling{}
	var o OwnHook
	if got, err := o.Complete(ctx, node, hookNotice(instance)); got != nil || err != nil || len(asg.calls) != 0 {
		t.Fatalf("before Use: %+v, %v, %d calls; want nothing done", got, err, len(asg.calls))
	}
	c := Completer{AutoScaling: asg, Metrics: metrics.New(), Log: slog.New(slog.DiscardHandler),
		Gate: instancegate.New(instancegate.Options{Nodes: fake.NewClientset(ownNode), Groups: asg, LocalInstance: instance})}
	o.Use(c, &InstanceGroup{AutoScaling: asg, InstanceID: instance}, "drain")

	got, err := o.Complete(ctx, node, hookNotice(instance))
	if err != nil || got == nil || got.Hook != "drain" || got.Result != cloud.ResultContinue {
		t.Fatalf("own instance: %+v, %v", got, err)
	}
	if len(asg.calls) != 1 || asg.calls[0] != (cloud.LifecycleAction{Group: "workers", Hook: "drain", InstanceID: instance}) {
		t.Fatalf("calls %+v, want one for the instance in its group", asg.calls)
	}
	if _, err := o.Complete(ctx, node, hookNotice("i-0fedcba9876543210")); err == nil {
		t.Error("a notice for another instance was not refused")
	} else if _, refused := instancegate.IsRefusal(err); !refused {
		t.Errorf("another instance: %v, want a refusal", err)
	}
	spot := notice.Notice{ID: notice.ID(notice.SpotInterruption, instance, "terminate"), Kind: notice.SpotInterruption, InstanceID: instance}
	if got, err := o.Complete(ctx, node, spot); got != nil || err != nil {
		t.Errorf("a Spot notice: %+v, %v; want nothing to complete", got, err)
	}
	if len(asg.calls) != 1 {
		t.Errorf("%d calls in all, want 1", len(asg.calls))
	}
}
