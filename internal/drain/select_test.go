// SPDX-License-Identifier: Apache-2.0

package drain

import (
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// matrixPods is a node holding one pod of every kind the filters distinguish.
func matrixPods(node string) []*corev1.Pod {
	return []*corev1.Pod{
		newPod("apps", "web-1", node, ownedBy("ReplicaSet", "web")),
		newPod("apps", "web-2", node, ownedBy("ReplicaSet", "web")),
		newPod("kube-system", "fluent-bit-x", node, ownedBy("DaemonSet", "fluent-bit")),
		newPod("kube-system", "kube-proxy-"+node, node, mirror()),
		newPod("kube-system", "lifeboat-abc", node, ownedBy("DaemonSet", "lifeboat")),
		newPod("batch", "job-done", node, ownedBy("Job", "nightly"), phase(corev1.PodSucceeded)),
		newPod("batch", "job-failed", node, ownedBy("Job", "nightly"), phase(corev1.PodFailed)),
		newPod("apps", "leaving", node, ownedBy("ReplicaSet", "web"), terminating()),
		newPod("apps", "cache", node, ownedBy("ReplicaSet", "cache"), withEmptyDir()),
		newPod("apps", "bare", node),
		newPod("kube-system", "coredns-1", node, ownedBy("ReplicaSet", "coredns"), critical("system-cluster-critical")),
		newPod("kube-system", "cni-x", node, ownedBy("DaemonSet", "cni"), critical("system-node-critical")),
	}
}

// selection is what Select decided, independent of the order within a tier (list sources
// return pods in different orders; only the tier order matters).
type selection struct {
	evict   map[string]Tier // namespace/name -> tier
	skipped map[string]Reason
}

func summarize(evict []Candidate, skipped []Skipped) selection {
	s := selection{evict: map[string]Tier{}, skipped: map[string]Reason{}}
	for i, c := range evict {
		if i > 0 && c.Tier < evict[i-1].Tier {
			s.evict["tier order broken at "+c.Pod.Name] = c.Tier
		}
		s.evict[c.Pod.Namespace+"/"+c.Pod.Name] = c.Tier
	}
	for _, k := range skipped {
		s.skipped[k.Pod.String()] = k.Reason
	}
	return s
}

// expectedSelection is what the matrix node must give under each policy.
func expectedSelection(ignoreDS, deleteLocal bool) selection {
	s := selection{
		evict: map[string]Tier{"apps/web-1": TierWorkload, "apps/web-2": TierWorkload, "apps/bare": TierWorkload, "kube-system/coredns-1": TierCritical},
		skipped: map[string]Reason{
			"kube-system/kube-proxy-n": ReasonMirror,
			"kube-system/lifeboat-abc": ReasonOwnPod,
			"batch/job-done":           ReasonFinished,
			"batch/job-failed":         ReasonFinished,
			"apps/leaving":             ReasonTerminating,
		},
	}
	if deleteLocal {
		s.evict["apps/cache"] = TierWorkload
	} else {
		s.skipped["apps/cache"] = ReasonLocalData
	}
	if ignoreDS {
		s.skipped["kube-system/fluent-bit-x"] = ReasonDaemonSet
		s.skipped["kube-system/cni-x"] = ReasonDaemonSet
	} else {
		s.evict["kube-system/fluent-bit-x"] = TierDaemonSet
		s.evict["kube-system/cni-x"] = TierCriticalDaemonSet
	}
	return s
}

func (s selection) equal(o selection) bool {
	return maps.Equal(s.evict, o.evict) && maps.Equal(s.skipped, o.skipped)
}

func TestSelect(t *testing.T) {
	pods := matrixPods("n")
	for _, ignoreDS := range []bool{true, false} {
		for _, deleteLocal := range []bool{true, false} {
			policy := Policy{IgnoreDaemonSets: ignoreDS, DeleteLocalData: deleteLocal, OwnPod: types.NamespacedName{Namespace: "kube-system", Name: "lifeboat-abc"}}
			got := summarize(Select(keepAll(pods), policy, Terms{}))
			if want := expectedSelection(ignoreDS, deleteLocal); !got.equal(want) {
				t.Errorf("ignoreDS=%v deleteLocal=%v:\n got %+v\nwant %+v", ignoreDS, deleteLocal, got, want)
			}
		}
	}
}

func TestTiersAndUnmanaged(t *testing.T) {
	pods := []*corev1.Pod{
		newPod("a", "cni", "n", ownedBy("DaemonSet", "cni"), critical("system-node-critical")),
		newPod("a", "dns", "n", ownedBy("ReplicaSet", "dns"), critical("system-cluster-critical")),
		newPod("a", "logs", "n", ownedBy("DaemonSet", "logs")),
		newPod("a", "bare", "n"),
		newPod("a", "web", "n", ownedBy("ReplicaSet", "web")),
	}
	evict, _ := Select(keepAll(pods), Policy{DeleteLocalData: true}, Terms{})
	want := []struct {
		name      string
		tier      Tier
		unmanaged bool
	}{{"bare", TierWorkload, true}, {"web", TierWorkload, false}, {"logs", TierDaemonSet, false}, {"dns", TierCritical, false}, {"cni", TierCriticalDaemonSet, false}}
	if len(evict) != len(want) {
		t.Fatalf("got %d candidates", len(evict))
	}
	for i, w := range want {
		if c := evict[i]; c.Pod.Name != w.name || c.Tier != w.tier || c.Unmanaged != w.unmanaged {
			t.Errorf("candidate %d: %s tier %s unmanaged %v, want %s tier %s unmanaged %v", i, c.Pod.Name, c.Tier, c.Unmanaged, w.name, w.tier, w.unmanaged)
		}
	}
}

// Pods marked not to disrupt leave only under a reclaim, in the last tier; pods tolerating
// every interruption taint on the node stay (they would be scheduled straight back).
func TestPodPolicies(t *testing.T) {
	spotTaint := corev1.Taint{Key: "aws-node-termination-handler/spot-itn", Value: "spot-i-1", Effect: corev1.TaintEffectNoSchedule}
	rebalanceTaint := corev1.Taint{Key: "aws-node-termination-handler/rebalance-recommendation", Value: "rebalance-i-1", Effect: corev1.TaintEffectNoSchedule}
	pods := []*corev1.Pod{
		newPod("a", "web", "n", ownedBy("ReplicaSet", "web")),
		newPod("a", "batch", "n", ownedBy("Job", "batch"), annotated(AnnotationDoNotDisrupt, "true")),
		newPod("a", "ca-pinned", "n", ownedBy("ReplicaSet", "ca"), annotated(AnnotationSafeToEvict, "false")),
		newPod("a", "ca-free", "n", ownedBy("ReplicaSet", "ca2"), annotated(AnnotationSafeToEvict, "true", AnnotationDoNotDisrupt, "false")),
		newPod("a", "spot-tolerant", "n", ownedBy("ReplicaSet", "t"), tolerating(corev1.Toleration{Key: spotTaint.Key, Operator: corev1.TolerationOpExists})),
		newPod("a", "tolerates-all", "n", ownedBy("ReplicaSet", "all"), tolerating(corev1.Toleration{Operator: corev1.TolerationOpExists})),
		newPod("a", "wrong-effect", "n", ownedBy("ReplicaSet", "w"), tolerating(corev1.Toleration{Key: spotTaint.Key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute})),
	}
	tests := []struct {
		name  string
		terms Terms
		want  selection
	}{
		{"reclaim, no taints", Terms{Reclaim: true}, selection{
			evict: map[string]Tier{"a/web": TierWorkload, "a/ca-free": TierWorkload, "a/spot-tolerant": TierWorkload, "a/tolerates-all": TierWorkload,
				"a/wrong-effect": TierWorkload, "a/batch": TierDoNotDisrupt, "a/ca-pinned": TierDoNotDisrupt},
			skipped: map[string]Reason{}}},
		{"no reclaim", Terms{}, selection{
			evict:   map[string]Tier{"a/web": TierWorkload, "a/ca-free": TierWorkload, "a/spot-tolerant": TierWorkload, "a/tolerates-all": TierWorkload, "a/wrong-effect": TierWorkload},
			skipped: map[string]Reason{"a/batch": ReasonDoNotEvict, "a/ca-pinned": ReasonDoNotEvict}}},
		{"reclaim, spot taint", Terms{Reclaim: true, Taints: []corev1.Taint{spotTaint}}, selection{
			evict:   map[string]Tier{"a/web": TierWorkload, "a/ca-free": TierWorkload, "a/wrong-effect": TierWorkload, "a/batch": TierDoNotDisrupt, "a/ca-pinned": TierDoNotDisrupt},
			skipped: map[string]Reason{"a/spot-tolerant": ReasonTolerates, "a/tolerates-all": ReasonTolerates}}},
		{"two taints: every one must be tolerated", Terms{Reclaim: true, Taints: []corev1.Taint{spotTaint, rebalanceTaint}}, selection{
			evict: map[string]Tier{"a/web": TierWorkload, "a/ca-free": TierWorkload, "a/wrong-effect": TierWorkload, "a/spot-tolerant": TierWorkload,
				"a/batch": TierDoNotDisrupt, "a/ca-pinned": TierDoNotDisrupt},
			skipped: map[string]Reason{"a/tolerates-all": ReasonTolerates}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := summarize(Select(keepAll(pods), Policy{DeleteLocalData: true}, tt.terms)); !got.equal(tt.want) {
				t.Errorf("\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
	for _, r := range []Reason{ReasonMirror, ReasonOwnPod, ReasonFinished, ReasonTerminating, ReasonDaemonSet, ReasonLocalData, ReasonTolerates, ReasonDoNotEvict} {
		if r.Label() == "other" {
			t.Errorf("reason %q has no metric label", r)
		}
	}
}

// The budget that refused an eviction is named from the API server's cause.
func TestBlockerNamesTheBudget(t *testing.T) {
	refusal := func(cause string) error {
		err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
		err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: policyv1.DisruptionBudgetCause, Message: cause}}
		return err
	}
	tests := []struct {
		err  error
		want Blocker
	}{
		{refusal("The disruption budget web needs 5 healthy pods and has 5 currently"), Blocker{Budget: "web", Detail: "needs 5 healthy pods and has 5 currently"}},
		{refusal("The disruption budget web is still being processed by the server."), Blocker{Budget: "web", Detail: "is still being processed by the server."}},
		{refusal("something else"), Blocker{Detail: "something else"}},
		{apierrors.NewInternalError(errors.New("This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.")),
			Blocker{Detail: "more than one PodDisruptionBudget selects the pod, which the eviction API refuses"}},
	}
	for _, tt := range tests {
		if got := blockerOf(tt.err); got != tt.want {
			t.Errorf("%v: got %+v, want %+v", tt.err, got, tt.want)
		}
	}
	if s := (Blocker{Budget: "web", Detail: "needs 5 healthy pods and has 5 currently"}).String(); s != "PodDisruptionBudget web (needs 5 healthy pods and has 5 currently)" {
		t.Errorf("String: %q", s)
	}
}

func TestGracePeriodCappedByDeadline(t *testing.T) {
	tests := []struct {
		name     string
		override int
		pod      *corev1.Pod
		left     time.Duration
		patient  bool
		want     int64 // -1 = nil (the pod's own)
	}{
		{"pod's own fits", -1, newPod("a", "p", "n", grace(30)), 5 * time.Minute, false, -1},
		{"default 30 s fits", -1, newPod("a", "p", "n"), time.Minute, false, -1},
		{"pod's own cut to the deadline", -1, newPod("a", "p", "n", grace(600)), 2 * time.Minute, false, 119},
		{"override", 10, newPod("a", "p", "n", grace(600)), 2 * time.Minute, false, 10},
		{"override cut to the deadline", 300, newPod("a", "p", "n"), 60 * time.Second, false, 59},
		{"override zero kept", 0, newPod("a", "p", "n"), time.Minute, false, 0},
		{"never below one second when time is up", -1, newPod("a", "p", "n"), 0, false, 1},
		{"patient: the pod's own, past the deadline", -1, newPod("a", "p", "n", grace(600)), 2 * time.Minute, true, -1},
		{"patient: the override, past the deadline", 300, newPod("a", "p", "n"), 60 * time.Second, true, 300},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := New(nil, Options{PodGracePeriod: tt.override})
			got := d.gracePeriod(NewPod(tt.pod), time.Now().Add(tt.left+500*time.Millisecond), tt.patient)
			switch {
			case tt.want == -1 && got != nil:
				t.Errorf("got %d, want the pod's own", *got)
			case tt.want != -1 && got == nil:
				t.Errorf("got the pod's own, want %d", tt.want)
			case tt.want != -1 && *got != tt.want:
				t.Errorf("got %d, want %d", *got, tt.want)
			}
		})
	}
}

// Only a refusal that names a disruption budget may be forced past near the deadline; a 429
// from an API server shedding load is retried like any transient error.
func TestRefusalClassification(t *testing.T) {
	budget := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10)
	budget.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: policyv1.DisruptionBudgetCause, Message: "still being processed"}}
	tests := []struct {
		name             string
		err              error
		blocked, retried bool
	}{
		{"budget refusal", budget, true, false},
		{"several budgets", apierrors.NewInternalError(errors.New("This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.")), true, true},
		{"load shedding", apierrors.NewTooManyRequests("the server has received too many requests", 1), false, true},
		{"unavailable", apierrors.NewServiceUnavailable("shutting down"), false, true},
		{"forbidden", apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "p", errors.New("no")), false, false},
	}
	for _, tt := range tests {
		if got := blockedByBudget(tt.err); got != tt.blocked {
			t.Errorf("%s: blockedByBudget %v, want %v", tt.name, got, tt.blocked)
		}
		if got := retriable(tt.err); got != tt.retried && !tt.blocked {
			t.Errorf("%s: retriable %v, want %v", tt.name, got, tt.retried)
		}
	}
}

func TestReviseSkipped(t *testing.T) {
	ds := Skipped{Pod: types.NamespacedName{Namespace: "kube-system", Name: "logs"}, UID: "ds", Reason: ReasonDaemonSet}
	pinned := Skipped{Pod: types.NamespacedName{Namespace: "apps", Name: "db"}, UID: "db", Reason: ReasonDoNotEvict}
	newcomer := Skipped{Pod: types.NamespacedName{Namespace: "apps", Name: "mirror"}, UID: "mirror", Reason: ReasonMirror}
	released := Candidate{Pod: &Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "db", UID: "db"}}}

	got := reviseSkipped([]Skipped{ds, pinned}, []Skipped{ds, newcomer}, []Candidate{released})
	want := []Skipped{ds, newcomer}
	if !slices.Equal(got, want) {
		t.Errorf("got %+v, want %+v: the DaemonSet pod once, the newcomer added, the released pod gone", got, want)
	}
}

// OwnPodLast: the own pod is a candidate of its own tier, after every other tier, the pods
// marked not to disrupt included; the other filters still apply to it. Without it, it stays.
func TestOwnPodLast(t *testing.T) {
	own := types.NamespacedName{Namespace: "kube-system", Name: "lifeboat-abc"}
	pods := []*corev1.Pod{
		newPod("kube-system", "lifeboat-abc", "n", ownedBy("ReplicaSet", "lifeboat")),
		newPod("a", "dns", "n", ownedBy("ReplicaSet", "dns"), critical("system-cluster-critical")),
		newPod("a", "web", "n", ownedBy("ReplicaSet", "web")),
	}
	pods[2].Annotations = map[string]string{AnnotationDoNotDisrupt: "true"}
	evict, skipped := Select(keepAll(pods), Policy{DeleteLocalData: true, OwnPod: own, OwnPodLast: true}, Terms{Reclaim: true})
	if len(skipped) != 0 || len(evict) != 3 {
		t.Fatalf("evict %d, skipped %+v; want all three evicted", len(evict), skipped)
	}
	if last := evict[2]; last.Pod.Name != own.Name || last.Tier != TierOwnPod || last.Tier.String() != "own-pod" {
		t.Errorf("last candidate %s in tier %s; want the own pod in the own-pod tier", last.Pod.Name, last.Tier)
	}
	_, skipped = Select(keepAll(pods), Policy{DeleteLocalData: true, OwnPod: own}, Terms{Reclaim: true})
	if len(skipped) != 1 || skipped[0].Reason != ReasonOwnPod {
		t.Errorf("without OwnPodLast: skipped %+v; want the own pod alone", skipped)
	}
	pods[0].DeletionTimestamp = &metav1.Time{Time: time.Now()}
	if _, skipped = Select(keepAll(pods), Policy{DeleteLocalData: true, OwnPod: own, OwnPodLast: true}, Terms{Reclaim: true}); len(skipped) != 1 || skipped[0].Reason != ReasonTerminating {
		t.Errorf("terminating own pod: skipped %+v; want it left as terminating", skipped)
	}
}
