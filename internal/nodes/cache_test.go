// SPDX-License-Identifier: Apache-2.0

package nodes

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

// A write starts from the informer's copy of its node when a later write produced it than the
// caller's copy (a write that waited its turn behind this process's other writes), and from
// the caller's otherwise; the informer's object itself is never changed, and without a copy
// of either the node is read.
func TestWriteStartsFromTheNewestCopy(t *testing.T) {
	at := func(rv string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", ResourceVersion: rv, Labels: map[string]string{"zone": "a"}}}
	}
	label := func(n *corev1.Node) { n.Labels["lifeboat.dev/phase"] = "draining" }
	condition := corev1.NodeCondition{Type: ConditionInterruption, Status: corev1.ConditionTrue, Reason: "Draining", Message: "m"}
	for _, tc := range []struct {
		name           string
		hint, cached   *corev1.Node
		noCache        bool
		wantRV         string
		wantReadsFirst int
	}{
		{"the informer's copy is newer", at("3"), at("7"), false, "7", 0},
		{"the caller's copy is newer", at("9"), at("7"), false, "9", 0},
		{"no copy of the caller's", nil, at("7"), false, "7", 0},
		{"the informer has none", at("3"), nil, false, "3", 0},
		{"no informer", at("3"), at("7"), true, "3", 0},
		{"neither has a copy", nil, nil, false, "5", 1},
		{"versions that are not numbers", at("b"), at("c"), false, "b", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, write := range []string{"apply", "condition"} {
				client := fake.NewClientset(at("5"))
				w := NewWriter(client)
				var cachedBefore *corev1.Node
				if tc.cached != nil {
					cachedBefore = tc.cached.DeepCopy()
				}
				if !tc.noCache {
					w.UseCache(func(string) *corev1.Node { return tc.cached })
				}
				var err error
				if write == "apply" {
					_, err = w.Apply(context.Background(), "n1", tc.hint, "label", label)
				} else {
					_, err = w.SetCondition(context.Background(), "n1", tc.hint, condition)
				}
				if err != nil {
					t.Fatal(err)
				}
				var patch string
				reads := 0
				for _, a := range client.Actions() {
					if p, ok := a.(clienttesting.PatchAction); ok && patch == "" {
						patch = string(p.GetPatch())
					}
					if a.GetVerb() == "get" && patch == "" {
						reads++
					}
				}
				if !strings.Contains(patch, `"resourceVersion":"`+tc.wantRV+`"`) {
					t.Errorf("%s: first patch %s, want it computed from resourceVersion %s", write, patch, tc.wantRV)
				}
				if reads != tc.wantReadsFirst {
					t.Errorf("%s: %d reads before the first patch, want %d", write, reads, tc.wantReadsFirst)
				}
				if tc.cached != nil && (len(tc.cached.Labels) != len(cachedBefore.Labels) || len(tc.cached.Status.Conditions) != 0) {
					t.Errorf("%s: the informer's own object was changed: %+v", write, tc.cached)
				}
			}
		})
	}
}
