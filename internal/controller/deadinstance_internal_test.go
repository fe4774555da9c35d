// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/ownership"
)

type stateEC2 map[string]string

func (s stateEC2) DescribeInstances(_ context.Context, ids []string) (map[string]cloud.Instance, error) {
	out := map[string]cloud.Instance{}
	for _, id := range ids {
		if st, ok := s[id]; ok {
			out[id] = cloud.Instance{ID: id, State: st, PrivateDNSName: "ip-10-0-0-1.ec2.internal", PrivateIPs: []string{"10.0.0.1"}}
		}
	}
	return out, nil
}
func (stateEC2) InstancesInCapacityReservation(context.Context, string) ([]cloud.Instance, error) {
	return nil, nil
}
func (stateEC2) DescribeCapacityReservation(context.Context, string) (cloud.CapacityReservation, error) {
	return cloud.CapacityReservation{}, nil
}

func (stateEC2) DescribeInstanceStatus(context.Context, []string) ([]cloud.InstanceStatus, error) {
	return nil, nil
}

// The fast path needs both facts: Ready Unknown and EC2's dead state (stopped or terminated:
// an instance stopping or shutting down may still run its containers); a running instance
// only with the opt-in.
func TestDeadInstances(t *testing.T) {
	t.Parallel()
	const id = "i-0123456789abcdef0"
	node := func(ready corev1.ConditionStatus) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "ip-10-0-0-1.ec2.internal"}, Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/" + id},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}}}
	}
	log := slog.New(slog.DiscardHandler)
	for _, tc := range []struct {
		state       string
		ready       corev1.ConditionStatus
		unreachable bool
		dead        bool
	}{
		{"stopped", corev1.ConditionUnknown, false, true},
		{"terminated", corev1.ConditionUnknown, false, true},
		{"shutting-down", corev1.ConditionUnknown, false, false},
		{"stopping", corev1.ConditionUnknown, false, false},
		{"shutting-down", corev1.ConditionUnknown, true, false},
		{"stopping", corev1.ConditionUnknown, true, false},
		{"stopped", corev1.ConditionTrue, false, false},
		{"stopped", corev1.ConditionFalse, false, false},
		{"running", corev1.ConditionUnknown, false, false},
		{"running", corev1.ConditionUnknown, true, true},
		{"running", corev1.ConditionTrue, true, false},
		{"", corev1.ConditionUnknown, true, false}, // EC2 no longer describes it
	} {
		ec2 := stateEC2{}
		if tc.state != "" {
			ec2[id] = tc.state
		}
		why := deadInstances{ec2: ec2, unreachable: tc.unreachable, log: log}.Dead(context.Background(), node(tc.ready))
		if (why != "") != tc.dead || tc.dead && !strings.Contains(why, tc.state) {
			t.Errorf("%s, Ready %s, unreachable opt-in %v: %q, want dead %v", tc.state, tc.ready, tc.unreachable, why, tc.dead)
		}
	}
}

type claimsSeen []ownership.Claim

func (c *claimsSeen) ClaimRefused(cl ownership.Claim) { *c = append(*c, cl) }

// A node whose providerID names a stopped instance that EC2 describes as another node is not
// dead: its pods are drained as usual, and the claim is reported on the dead-instance path.
func TestDeadInstancesRefusesAClaim(t *testing.T) {
	t.Parallel()
	const id = "i-0123456789abcdef0"
	claimant := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "ip-10-0-0-2.ec2.internal"}, Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/" + id},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.2"}},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown}}}}
	seen := &claimsSeen{}
	d := deadInstances{ec2: stateEC2{id: "stopped"}, claims: seen, log: slog.New(slog.DiscardHandler)}
	if why := d.Dead(context.Background(), claimant); why != "" {
		t.Fatalf("the claimant was taken for dead: %s", why)
	}
	if len(*seen) != 1 || (*seen)[0].Path != ownership.PathDeadInstance || (*seen)[0].Claimant.Name != claimant.Name {
		t.Fatalf("claims reported = %+v, want the claimant's on the dead-instance path", *seen)
	}
}
