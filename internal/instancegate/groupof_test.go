// SPDX-License-Identifier: Apache-2.0

package instancegate

import (
	"context"
	"testing"

	"k8s.io/client-go/kubernetes/fake"
)

// A call that names no group of its own (SetInstanceHealth) learns the instance's group from
// the gate and is checked against it: Auto Scaling is asked once, and a node naming another
// instance is still refused.
func TestGroupOfThenCheck(t *testing.T) {
	const own, other = "i-0123456789abcdef0", "i-0fedcba9876543210"
	client := fake.NewSimpleClientset(node("a", "aws:///us-east-1a/"+own))
	asg := &groups{of: map[string]string{own: "workers", other: "workers"}}
	g := New(Options{Nodes: client, Groups: asg})
	ctx := context.Background()
	group, err := g.GroupOf(ctx, own)
	if err != nil || group != "workers" {
		t.Fatalf("GroupOf: %q %v", group, err)
	}
	if err := g.Check(ctx, Request{Call: CallSetInstanceHealth, Node: "a", InstanceID: own, Group: group}); err != nil {
		t.Fatalf("own instance refused: %v", err)
	}
	if asg.asked != 1 {
		t.Errorf("Auto Scaling asked %d times, want once", asg.asked)
	}
	err = g.Check(ctx, Request{Call: CallSetInstanceHealth, Node: "a", InstanceID: other, Group: "workers"})
	if r, refused := IsRefusal(err); !refused || r.Call != CallSetInstanceHealth {
		t.Errorf("another instance: %v, want a SetInstanceHealth refusal", err)
	}
}
