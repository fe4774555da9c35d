// SPDX-License-Identifier: Apache-2.0

package instancegate

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"lifeboat.dev/lifeboat/internal/cloud"
)

// groups is Auto Scaling's answer per instance, counting the questions.
type groups struct {
	of    map[string]string
	err   error
	asked int
}

func (g *groups) GroupOf(_ context.Context, id string) (string, error) {
	g.asked++
	return g.of[id], g.err
}

// instances is EC2's description of instances.
type instances map[string]cloud.Instance

func (i instances) Describe(_ context.Context, id string) (cloud.Instance, bool, error) {
	in, ok := i[id]
	return in, ok, nil
}

func node(name, providerID string, internalIPs ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{ProviderID: providerID}}
	for _, ip := range internalIPs {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
	}
	return n
}

func TestCheck(t *testing.T) {
	const (
		own    = "i-0123456789abcdef0"
		other  = "i-0fedcba9876543210"
		third  = "i-00000000000000003"
		byIP   = "i-00000000000000004"
		victim = "i-00000000000000005"
	)
	nodes := []*corev1.Node{
		node("a", "aws:///us-east-1a/"+own),
		node("ip-10-0-0-2.ec2.internal", ""), // no providerID: matched by private DNS name
		node("ip-10-0-0-3.ec2.internal", ""),
		node("odd", "gce://project/zone/vm"),
		node("worker-4", "aws:///us-east-1a/"+byIP, "10.0.0.4"),
		node("claimant", "aws:///us-east-1a/"+victim), // set its providerID to another node's instance
		node("ghost", "aws:///us-east-1a/i-00000000000000009"),
	}
	ec2 := instances{
		own:    {ID: own, PrivateDNSName: "a"},
		other:  {ID: other, PrivateDNSName: "ip-10-0-0-2.ec2.internal"},
		third:  {ID: third, PrivateDNSName: "ip-10-0-0-9.ec2.internal"},
		byIP:   {ID: byIP, PrivateDNSName: "ip-10-0-0-4.ec2.internal", PrivateIPs: []string{"10.0.0.4"}},
		victim: {ID: victim, PrivateDNSName: "ip-10-0-0-5.ec2.internal", PrivateIPs: []string{"10.0.0.5"}},
	}
	asg := map[string]string{own: "workers", other: "workers", third: "workers", byIP: "workers", victim: "workers"}
	for _, tc := range []struct {
		name    string
		req     Request
		ec2     instances // nil: none given (only the providerID is checked)
		local   string
		refused string // "" when allowed; else a part of the reason
	}{
		{"own instance, own group", Request{Node: "a", InstanceID: own, Group: "workers"}, ec2, "", ""},
		{"no group asked", Request{Node: "a", InstanceID: own}, ec2, "", ""},
		{"another instance", Request{Node: "a", InstanceID: other, Group: "workers"}, ec2, "", "names another instance"},
		{"another group", Request{Node: "a", InstanceID: own, Group: "other"}, ec2, "", `in group "workers", not in group "other"`},
		{"in no group", Request{Node: "a", InstanceID: own, Group: "other"}, ec2, "", "no group"},
		{"not an instance id", Request{Node: "a", InstanceID: "i-../../x", Group: "workers"}, ec2, "", "not an EC2 instance id"},
		{"node gone", Request{Node: "gone", InstanceID: own, Group: "workers"}, ec2, "", "no longer exists"},
		{"private DNS name matches", Request{Node: "ip-10-0-0-2.ec2.internal", InstanceID: other, Group: "workers"}, ec2, "", ""},
		{"private IP matches", Request{Node: "worker-4", InstanceID: byIP, Group: "workers"}, ec2, "", ""},
		{"private DNS name of another node", Request{Node: "ip-10-0-0-3.ec2.internal", InstanceID: third, Group: "workers"}, ec2, "", "as another node"},
		{"a claim EC2 does not bear out", Request{Node: "claimant", InstanceID: victim, Group: "workers"}, ec2, "", "EC2 describes the instance (private DNS name ip-10-0-0-5.ec2.internal, private IP 10.0.0.5) as another node"},
		{"unknown to EC2", Request{Node: "ghost", InstanceID: "i-00000000000000009"}, ec2, "", "EC2 does not know the instance"},
		{"without EC2: the providerID alone", Request{Node: "claimant", InstanceID: victim, Group: "workers"}, nil, "", ""},
		{"without EC2: no providerID", Request{Node: "ip-10-0-0-2.ec2.internal", InstanceID: other, Group: "workers"}, nil, "", "no providerID"},
		{"providerID of another cloud", Request{Node: "odd", InstanceID: own, Group: "workers"}, ec2, "", "names another instance"},
		{"agent: no providerID is its own instance", Request{Node: "ip-10-0-0-3.ec2.internal", InstanceID: own, Group: "workers"}, nil, own, ""},
		{"agent: providerID still wins", Request{Node: "a", InstanceID: other, Group: "workers"}, nil, other, "names another instance"},
		{"agent: another instance than its own", Request{Node: "ip-10-0-0-3.ec2.internal", InstanceID: other, Group: "workers"}, nil, own, "instance metadata says this node is instance " + own},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewSimpleClientset()
			for _, n := range nodes {
				if _, err := client.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			of := asg
			if tc.name == "in no group" {
				of = map[string]string{}
			}
			refusals := 0
			opts := Options{Nodes: client, Groups: &groups{of: of}, LocalInstance: tc.local, Refused: func(string) { refusals++ }}
			if tc.ec2 != nil {
				opts.Instances = tc.ec2
			}
			g := New(opts)
			tc.req.Call = CallCompleteLifecycleAction
			err := g.Check(context.Background(), tc.req)
			r, refused := IsRefusal(err)
			switch {
			case tc.refused == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.refused != "" && !refused:
				t.Fatalf("got %v, want a refusal saying %q", err, tc.refused)
			case tc.refused != "" && !strings.Contains(r.Error(), tc.refused):
				t.Errorf("refusal %q does not say %q", r.Error(), tc.refused)
			case refused && !strings.Contains(r.Error(), tc.req.InstanceID) && tc.name != "not an instance id":
				t.Errorf("refusal %q does not name the instance asked for", r.Error())
			}
			if want := map[bool]int{true: 1, false: 0}[refused]; refusals != want {
				t.Errorf("%d refusals counted, want %d", refusals, want)
			}
		})
	}
}

// A failure to read the node or ask AWS is no refusal: the call is decided later.
func TestCheckUndecided(t *testing.T) {
	const own = "i-0123456789abcdef0"
	client := fake.NewSimpleClientset(node("a", "aws:///us-east-1a/"+own))
	g := New(Options{Nodes: client, Groups: &groups{err: errors.New("throttled")}})
	err := g.Check(context.Background(), Request{Call: CallLifecycleHeartbeat, Node: "a", InstanceID: own, Group: "workers"})
	if _, refused := IsRefusal(err); err == nil || refused {
		t.Fatalf("got %v, want an error that is not a refusal", err)
	}
}

// Auto Scaling is asked once per instance, not at every heartbeat.
func TestCheckCachesGroups(t *testing.T) {
	const own = "i-0123456789abcdef0"
	client := fake.NewSimpleClientset(node("a", "aws:///us-east-1a/"+own))
	asg := &groups{of: map[string]string{own: "workers"}}
	g := New(Options{Nodes: client, Groups: asg})
	for range 5 {
		if err := g.Check(context.Background(), Request{Call: CallLifecycleHeartbeat, Node: "a", InstanceID: own, Group: "workers"}); err != nil {
			t.Fatal(err)
		}
	}
	if asg.asked != 1 {
		t.Errorf("Auto Scaling asked %d times, want 1", asg.asked)
	}
}
