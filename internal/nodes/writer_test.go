// SPDX-License-Identifier: Apache-2.0

package nodes

import (
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func node(mods ...func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", ResourceVersion: "42"}}
	for _, m := range mods {
		m(n)
	}
	return n
}

func withLabels(kv ...string) func(*corev1.Node) {
	return func(n *corev1.Node) {
		n.Labels = map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			n.Labels[kv[i]] = kv[i+1]
		}
	}
}

func withTaints(keys ...string) func(*corev1.Node) {
	return func(n *corev1.Node) {
		for _, k := range keys {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: k, Effect: corev1.TaintEffectNoSchedule})
		}
	}
}

func TestMergePatch(t *testing.T) {
	tests := []struct {
		name    string
		current *corev1.Node
		edits   []Edit
		want    string // JSON, "" = no change
	}{
		{"nothing to do", node(withLabels("a", "1")), []Edit{SetLabel("a", "1")}, ""},
		{"add label", node(), []Edit{SetLabel("a", "1")},
			`{"metadata":{"labels":{"a":"1"},"resourceVersion":"42"}}`},
		{"remove label only that key", node(withLabels("a", "1", "b", "2")), []Edit{RemoveLabel("a")},
			`{"metadata":{"labels":{"a":null},"resourceVersion":"42"}}`},
		{"taint list is sent whole", node(withTaints("user/x")), []Edit{AddTaint(TaintSpotInterruption, "e-1", corev1.TaintEffectNoSchedule)},
			`{"metadata":{"resourceVersion":"42"},"spec":{"taints":[{"key":"user/x","effect":"NoSchedule"},{"key":"aws-node-termination-handler/spot-itn","value":"e-1","effect":"NoSchedule"}]}}`},
		{"last taint removed", node(withTaints(TaintRebalance)), []Edit{RemoveTaint(TaintRebalance, "")},
			`{"metadata":{"resourceVersion":"42"},"spec":{"taints":null}}`},
		{"cordon marks it ours", node(), []Edit{Cordon()},
			`{"metadata":{"annotations":{"lifeboat.dev/cordoned":"true"},"resourceVersion":"42"},"spec":{"unschedulable":true}}`},
		{"cordon of a cordoned node changes nothing", node(func(n *corev1.Node) { n.Spec.Unschedulable = true }), []Edit{Cordon()}, ""},
		{"uncordon leaves someone else's cordon", node(func(n *corev1.Node) { n.Spec.Unschedulable = true }), []Edit{Uncordon()}, ""},
		{"uncordon undoes ours", node(func(n *corev1.Node) {
			n.Spec.Unschedulable = true
			n.Annotations = map[string]string{AnnotationCordonedBy: "true", "other": "x"}
		}), []Edit{Uncordon()},
			`{"metadata":{"annotations":{"lifeboat.dev/cordoned":null},"resourceVersion":"42"},"spec":{"unschedulable":false}}`},
		{"same taint updates value", node(withTaints(TaintSpotInterruption)), []Edit{AddTaint(TaintSpotInterruption, "e-2", corev1.TaintEffectNoSchedule)},
			`{"metadata":{"resourceVersion":"42"},"spec":{"taints":[{"key":"aws-node-termination-handler/spot-itn","value":"e-2","effect":"NoSchedule"}]}}`},
		{"remove taint by effect keeps other effect", node(func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}, {Key: "k", Effect: corev1.TaintEffectNoExecute}}
		}), []Edit{RemoveTaint("k", corev1.TaintEffectNoExecute)},
			`{"metadata":{"resourceVersion":"42"},"spec":{"taints":[{"key":"k","effect":"NoSchedule"}]}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.current.DeepCopy()
			_, patch, changed, err := plan(tt.current, tt.edits)
			if err != nil {
				t.Fatal(err)
			}
			if changed != (tt.want != "") {
				t.Fatalf("changed = %v, patch %s", changed, patch)
			}
			if tt.want != "" && !jsonEqual(t, string(patch), tt.want) {
				t.Errorf("patch\n got %s\nwant %s", patch, tt.want)
			}
			if !equalNodes(before, tt.current) {
				t.Error("plan modified the node it was given")
			}
		})
	}
}

func jsonEqual(t *testing.T, a, b string) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal([]byte(a), &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(b), &y); err != nil {
		t.Fatal(err)
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}

func equalNodes(a, b *corev1.Node) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func TestLabelValue(t *testing.T) {
	for in, want := range map[string]string{
		"e-1234":                                "e-1234",
		"arn:aws:health:us-east-1::event/EC2/x": "arn-aws-health-us-east-1-event-EC2-x",
		"-lead.and.trail_":                      "lead.and.trail",
		strings.Repeat("a", 70):                 strings.Repeat("a", 63),
		strings.Repeat("a", 62) + "-b":          strings.Repeat("a", 62),
		"":                                      "",
	} {
		if got := LabelValue(in); got != want {
			t.Errorf("LabelValue(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzLabelValue(f *testing.F) {
	f.Add("e-1234")
	f.Add("arn:aws:health:us-east-1::event/EC2/AWS_EC2_PERSISTENT_INSTANCE_RETIREMENT_SCHEDULED/abc")
	f.Fuzz(func(t *testing.T, s string) {
		v := LabelValue(s)
		if len(v) > 63 {
			t.Fatalf("%q longer than 63", v)
		}
		if v != "" && (!isAlnum(v[0]) || !isAlnum(v[len(v)-1])) {
			t.Fatalf("%q does not start and end alphanumeric", v)
		}
		if notLabelSafe.MatchString(v) {
			t.Fatalf("%q has characters a label value may not", v)
		}
	})
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
