// SPDX-License-Identifier: Apache-2.0

package instancegate

import (
	"context"
	"slices"
	"testing"

	"k8s.io/client-go/kubernetes/fake"
)

// A retained instance whose Node is gone is terminated only when its tags say it is this
// cluster's and Auto Scaling reports it in the group; the groups the gate has seen are the
// sweep's groups.
func TestCheckNodeless(t *testing.T) {
	const id = "i-0123456789abcdef0"
	var refused []string
	g := New(Options{Nodes: fake.NewSimpleClientset(), Groups: &groups{of: map[string]string{id: "workers", "i-0fedcba9876543210": "batch"}},
		Refused: func(call string) { refused = append(refused, call) }})
	ctx := context.Background()
	req := Request{Call: CallTerminateInstance, InstanceID: id, Group: "workers"}
	if err := g.CheckNodeless(ctx, req, ""); err != nil {
		t.Errorf("owned, in the group: %v", err)
	}
	for _, tt := range []struct {
		req  Request
		tags string
	}{
		{req, "instance is missing the cluster tag"},
		{Request{Call: CallTerminateInstance, InstanceID: id, Group: "batch"}, ""},
		{Request{Call: CallTerminateInstance, InstanceID: "i-bad", Group: "workers"}, ""},
		{Request{Call: CallTerminateInstance, InstanceID: id}, ""},
	} {
		if _, ok := IsRefusal(g.CheckNodeless(ctx, tt.req, tt.tags)); !ok {
			t.Errorf("%+v with tags refusal %q: not refused", tt.req, tt.tags)
		}
	}
	if len(refused) != 4 {
		t.Errorf("%d refusals counted, want 4", len(refused))
	}
	_, _ = g.GroupOf(ctx, "i-0fedcba9876543210")
	if got := g.KnownGroups(); !slices.Equal(got, []string{"batch", "workers"}) {
		t.Errorf("known groups %v", got)
	}
}
