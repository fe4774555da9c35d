// SPDX-License-Identifier: Apache-2.0

package ownership

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/notice"
)

// A reason read from a Node acts only on that Node, when EC2 describes the instance as it: a
// claimant's condition never becomes the victim's repair, whether or not the victim names its
// instance, and the claimant's claim is reported once with the path.
func TestResolveReadFromANode(t *testing.T) {
	const victim, claimant, managed = "ip-10-0-0-1.ec2.internal", "ip-10-0-0-2.ec2.internal", "aws-node-termination-handler/managed"
	for _, victimProviderID := range []string{providerID("i-1"), ""} {
		reported := &claims{}
		r, _ := startInformer(t, newFakeEC2(instance("i-1", victim, managed, "")),
			Options{CheckManagedTag: true, ManagedTag: managed, Claims: reported},
			node(victim, victimProviderID), node(claimant, providerID("i-1")))

		v, err := r.Resolve(context.Background(), Subject{Path: PathNodeCondition, InstanceID: "i-1", Node: claimant})
		if err != nil {
			t.Fatal(err)
		}
		if v.Owned || v.Node != nil || !v.ClaimRefused || !strings.Contains(v.Reason, "read from node "+claimant) {
			t.Errorf("victim providerID %q: the claimant's reason: %+v, want refused, no node", victimProviderID, v)
		}
		if got := reported.claimants(); !slices.Equal(got, []string{claimant}) {
			t.Errorf("victim providerID %q: claims reported %q, want the claimant's once", victimProviderID, got)
		}
		if len(reported.got) == 1 && reported.got[0].Path != PathNodeCondition {
			t.Errorf("the claim was reported on path %q, want %q", reported.got[0].Path, PathNodeCondition)
		}

		v, err = r.Resolve(context.Background(), Subject{Path: PathNodeCondition, InstanceID: "i-1", Node: victim})
		if err != nil {
			t.Fatal(err)
		}
		if !v.Owned || v.Node == nil || v.Node.Name != victim || v.ClaimRefused {
			t.Errorf("victim providerID %q: the victim's own reason: %+v, want its node, owned", victimProviderID, v)
		}
	}
}

// Confirm: EC2's description of the instance must name the node; what it cannot check it
// refuses.
func TestConfirm(t *testing.T) {
	t.Parallel()
	n := node("ip-10-0-0-1.ec2.internal", providerID("i-1"), "10.0.0.1")
	for _, tc := range []struct {
		name  string
		inst  cloud.Instance
		found bool
		ok    bool
	}{
		{"by private DNS name", cloud.Instance{ID: "i-1", PrivateDNSName: n.Name}, true, true},
		{"by private IP", cloud.Instance{ID: "i-1", PrivateIPs: []string{"10.0.0.1"}}, true, true},
		{"another node's instance", cloud.Instance{ID: "i-1", PrivateDNSName: "ip-10-0-0-9.ec2.internal", PrivateIPs: []string{"10.0.0.9"}}, true, false},
		{"not the instance the node names", cloud.Instance{ID: "i-2", PrivateDNSName: n.Name}, true, false},
		{"no addresses", cloud.Instance{ID: "i-1", State: "terminated"}, true, false},
		{"unknown to EC2", cloud.Instance{}, false, false},
	} {
		claim := Confirm(PathNodeCleanup, n, tc.inst, tc.found)
		if (claim == nil) != tc.ok {
			t.Errorf("%s: %+v, want confirmed %v", tc.name, claim, tc.ok)
		}
		if claim != nil && (claim.Path != PathNodeCleanup || claim.Claimant.Name != n.Name || claim.String() == "") {
			t.Errorf("%s: claim %+v", tc.name, claim)
		}
	}
}

// Every path has a name fit for a metric label, and the notice sources map onto paths.
func TestPaths(t *testing.T) {
	t.Parallel()
	seen := map[Path]bool{}
	for _, p := range Paths {
		if seen[p] || p == "" || strings.ContainsAny(string(p), " -") {
			t.Errorf("path %q: duplicate, empty or not a label value", p)
		}
		seen[p] = true
	}
	for _, k := range notice.Kinds() {
		r, _ := notice.RulesOf(k)
		for _, s := range r.Sources {
			if p := PathOf(notice.Notice{Kind: k, Source: s}); !seen[p] {
				t.Errorf("a %s notice from %s is checked on %q, which is not a registered path", k, s, p)
			}
		}
	}
}

// A note on a Node is input: whatever its annotation holds, reading it neither panics nor
// yields more text than the bound, and a note written reads back.
func FuzzNoteOf(f *testing.F) {
	f.Add(NoteValue(time.Date(2026, 12, 7, 2, 0, 0, 0, time.UTC), "spot-i-0123456789abcdef0", "instance i-0123456789abcdef0 is missing the managed tag"))
	f.Add("not a time spot-i-1 why")
	f.Add("2026-12-07T02:00:00Z")
	f.Fuzz(func(t *testing.T, value string) {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{AnnotationUntagged: value}}}
		note, ok := NoteOf(n, AnnotationUntagged)
		if ok && len(note.Notice)+len(note.Why) > maxUntaggedNote+len("…") {
			t.Fatalf("note of %d bytes read from a %d-byte value", len(note.Notice)+len(note.Why), len(value))
		}
	})
}

func TestNoteReadsBack(t *testing.T) {
	at := time.Date(2026, 12, 7, 2, 0, 0, 0, time.UTC)
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
		AnnotationDenied: NoteValue(at, "spot-i-1", "AWS answered UnauthorizedOperation to DescribeInstances")}}}
	got, ok := NoteOf(n, AnnotationDenied)
	if !ok || !got.At.Equal(at) || got.Notice != "spot-i-1" || got.Why != "AWS answered UnauthorizedOperation to DescribeInstances" {
		t.Fatalf("read back %+v (%v)", got, ok)
	}
	if _, ok := NoteOf(n, AnnotationUntagged); ok {
		t.Error("a note read from an annotation the node does not have")
	}
}
