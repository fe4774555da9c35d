// SPDX-License-Identifier: Apache-2.0

package forget

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/output"
	"lifeboat.dev/lifeboat/internal/record"
	"lifeboat.dev/lifeboat/internal/record/recordtest"
)

// lifeboatNode is a node as Lifeboat leaves it mid-drain: its record, cordon, taint, labels,
// notes and condition, beside an operator's taint, label and annotation.
func lifeboatNode(t *testing.T) *corev1.Node {
	rec := recordtest.Good()
	n := recordtest.NodeWith(recordtest.Encode(t, rec))
	n.Annotations[nodes.AnnotationCordonedBy] = "true"
	n.Annotations["lifeboat.dev/untagged-notice"] = "2026-11-28T08:00:00Z spot-i-0123456789abcdef0-terminate untagged"
	n.Annotations["team.example.com/owner"] = "payments"
	n.Labels = map[string]string{nodes.LabelPhase: "draining", nodes.LabelExcludeFromLoadBalancers: "true", "topology.kubernetes.io/zone": "us-east-1a"}
	n.Spec.Taints = []corev1.Taint{
		{Key: nodes.TaintASGLifecycle, Value: nodes.LabelValue(rec.Notices[0]), Effect: corev1.TaintEffectNoSchedule},
		{Key: nodes.TaintSpotInterruption, Value: "nth-event-1", Effect: corev1.TaintEffectNoSchedule},
		{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule},
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue},
		{Type: nodes.ConditionInterruption, Status: corev1.ConditionTrue, Reason: "Draining"}}
	return n
}

func keys(items []Item) []string {
	var out []string
	for _, i := range items {
		out = append(out, i.What+" "+i.Key)
	}
	return out
}

func TestPlanSortsLifeboatsFromOthers(t *testing.T) {
	n := lifeboatNode(t)
	p := Plan(n)
	wantRemove := []string{"cordon spec.unschedulable", "annotation " + nodes.AnnotationCordonedBy, "annotation " + record.Annotation,
		"annotation lifeboat.dev/untagged-notice", "label " + nodes.LabelPhase, "label " + nodes.LabelExcludeFromLoadBalancers,
		"taint " + nodes.TaintASGLifecycle, "condition " + string(nodes.ConditionInterruption)}
	if got := keys(p.Remove); !slices.Equal(got, wantRemove) {
		t.Errorf("remove %q,\nwant %q", got, wantRemove)
	}
	if got := keys(p.Keep); !slices.Equal(got, []string{"taint " + nodes.TaintSpotInterruption}) {
		t.Errorf("keep %q, want only the spot taint no record names", got)
	}

	removed := []Item{}
	edit(&removed)(n)
	if n.Spec.Unschedulable || len(n.Spec.Taints) != 2 || n.Labels["topology.kubernetes.io/zone"] == "" || n.Annotations["team.example.com/owner"] == "" {
		t.Errorf("after the edit: unschedulable %v, taints %v, labels %v, annotations %v", n.Spec.Unschedulable, n.Spec.Taints, n.Labels, n.Annotations)
	}
	for k := range n.Annotations {
		if strings.HasPrefix(k, nodes.AnnotationPrefix) {
			t.Errorf("annotation %s left", k)
		}
	}
	if len(removed) != len(wantRemove) {
		t.Errorf("the edit reports %d items removed, want %d", len(removed), len(wantRemove))
	}
	if again := Plan(n); len(again.Remove) != 1 || again.Remove[0].What != WhatCondition {
		t.Errorf("after the edit, left to remove: %q; want the condition alone (it is on the status)", keys(again.Remove))
	}
}

// What Lifeboat cannot tell from an operator's stays: a cordon without its mark, an
// out-of-service taint or load-balancer label with no episode of Lifeboat's, the repair veto.
func TestPlanKeepsOperators(t *testing.T) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2",
		Annotations: map[string]string{"lifeboat.dev/node-repair": "disabled"},
		Labels:      map[string]string{nodes.LabelExcludeFromLoadBalancers: "true"}},
		Spec: corev1.NodeSpec{Unschedulable: true, Taints: []corev1.Taint{
			{Key: nodes.TaintOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute}}}}
	p := Plan(n)
	if len(p.Remove) != 0 {
		t.Errorf("remove %q from an operator's node", keys(p.Remove))
	}
	want := []string{"cordon spec.unschedulable", "annotation lifeboat.dev/node-repair", "label " + nodes.LabelExcludeFromLoadBalancers, "taint " + nodes.TaintOutOfService}
	if got := keys(p.Keep); !slices.Equal(got, want) {
		t.Errorf("keep %q, want %q", got, want)
	}
	for _, i := range p.Keep {
		if i.Why == "" {
			t.Errorf("%s kept without a reason", i)
		}
	}
	// A drained record of Lifeboat's makes the out-of-service taint its own; an unreadable
	// record makes nothing its own, and is removed all the same.
	drained := recordtest.Good()
	drained.Phase = record.PhaseDrained
	n.Annotations[record.Annotation] = recordtest.Encode(t, drained)
	if !slices.Contains(keys(Plan(n).Remove), "taint "+nodes.TaintOutOfService) {
		t.Errorf("the out-of-service taint of a drained record kept: %q", keys(Plan(n).Remove))
	}
	n.Annotations[record.Annotation] = "{not json"
	if got := keys(Plan(n).Remove); !slices.Equal(got, []string{"annotation " + record.Annotation}) {
		t.Errorf("with an unreadable record, remove %q; want the record alone", got)
	}
}

func TestPrint(t *testing.T) {
	found := []Node{Plan(lifeboatNode(t)), {Name: "n2", Remove: []Item{}, Keep: []Item{{What: WhatCordon, Key: "spec.unschedulable", Why: "not Lifeboat's"}}}}
	var b bytes.Buffer
	if err := PrintFormat(&b, found, true, output.Format{Name: output.Table}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"NODE", "n1", "remove", "taint " + nodes.TaintASGLifecycle, "keep", "not Lifeboat's",
		"Dry run: 8 items of Lifeboat's on 1 nodes would be removed; 2 kept (not Lifeboat's). Run again with --yes"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	b.Reset()
	if err := PrintFormat(&b, found, true, output.Format{Name: output.Name}); err != nil || b.String() != "node/n1\n" {
		t.Errorf("-o name: %q, %v", b.String(), err)
	}
	b.Reset()
	if err := PrintFormat(&b, nil, false, output.Format{Name: output.JSON}); err != nil {
		t.Fatal(err)
	}
	var r Report
	if err := json.Unmarshal(b.Bytes(), &r); err != nil || r.Kind != Kind || r.APIVersion != output.APIVersion || r.DryRun || r.Nodes == nil {
		t.Errorf("-o json of nothing: %s (%v)", b.String(), err)
	}
	b.Reset()
	if err := PrintFormat(&b, nil, true, output.Format{Name: output.Table}); err != nil || !strings.HasPrefix(b.String(), "Nothing of Lifeboat's") {
		t.Errorf("table of nothing: %q, %v", b.String(), err)
	}
}
