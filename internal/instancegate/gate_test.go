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

// instances is EC2's answer for private DNS names.
type instances map[string]cloud.Instance

func (i instances) DescribeInstances(_ context.Context, ids []string) (map[string]cloud.Instance, error) {
	out := map[string]cloud.Instance{}
	for _, id := range ids {
		if in, ok := i[id]; ok {
			out[id] = in
		}
	}
	return out, nil
}

// The gate asks EC2 nothing else.
func (instances) InstancesInCapacityReservation(context.Context, string) ([]cloud.Instance, error) {
	return nil, errors.New("not asked by the gate")
}

func (instances) DescribeInstanceStatus(context.Context, []string) ([]cloud.InstanceStatus, error) {
	return nil, errors.New("not asked by the gate")
}

func node(name, providerID string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{ProviderID: providerID}}
}

func TestCheck(t *testing.T) {
	const (
		own   = "i-0123456789abcdef0"
		other = "i-0fedcba9876543210"
	)
	nodes := []*corev1.Node{
		node("a", "aws:///us-east-1a/"+own),
		node("ip-10-0-0-2.ec2.internal", ""), // no providerID: matched by private DNS name
		node("ip-10-0-0-3.ec2.internal", ""),
		node("odd", "gce://project/zone/vm"),
	}
	ec2 := instances{
		own:                   {ID: own, PrivateDNSName: "ip-10-0-0-2.ec2.internal"},
		"i-00000000000000003": {ID: "i-00000000000000003", PrivateDNSName: "ip-10-0-0-9.ec2.internal"},
	}
	asg := map[string]string{own: "workers", other: "workers", "i-00000000000000003": "workers"}
	for _, tc := range []struct {
		name          string
		req           Request
		useProviderID bool
		local         string
		refused       string // "" when allowed; else a part of the reason
	}{
		{"own instance, own group", Request{Node: "a", InstanceID: own, Group: "workers"}, false, "", ""},
		{"no group asked", Request{Node: "a", InstanceID: own}, false, "", ""},
		{"another instance", Request{Node: "a", InstanceID: other, Group: "workers"}, false, "", "names another instance"},
		{"another group", Request{Node: "a", InstanceID: own, Group: "other"}, false, "", `in group "workers", not in group "other"`},
		{"in no group", Request{Node: "a", InstanceID: own, Group: "other"}, false, "", "no group"},
		{"not an instance id", Request{Node: "a", InstanceID: "i-../../x", Group: "workers"}, false, "", "not an EC2 instance id"},
		{"node gone", Request{Node: "gone", InstanceID: own, Group: "workers"}, false, "", "no longer exists"},
		{"private DNS name matches", Request{Node: "ip-10-0-0-2.ec2.internal", InstanceID: own, Group: "workers"}, false, "", ""},
		{"private DNS name of another node", Request{Node: "ip-10-0-0-3.ec2.internal", InstanceID: "i-00000000000000003", Group: "workers"}, false, "", "private DNS name is not the node's name"},
		{"no providerID with USE_PROVIDER_ID", Request{Node: "ip-10-0-0-2.ec2.internal", InstanceID: own, Group: "workers"}, true, "", "USE_PROVIDER_ID=true"},
		{"providerID of another cloud", Request{Node: "odd", InstanceID: own, Group: "workers"}, false, "", "names another instance"},
		{"agent: no providerID is its own instance", Request{Node: "ip-10-0-0-3.ec2.internal", InstanceID: own, Group: "workers"}, true, own, ""},
		{"agent: providerID still wins", Request{Node: "a", InstanceID: other, Group: "workers"}, true, other, "names another instance"},
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
			g := New(Options{Nodes: client, Groups: &groups{of: of}, EC2: ec2, UseProviderID: tc.useProviderID, LocalInstance: tc.local,
				Refused: func(string) { refusals++ }})
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
