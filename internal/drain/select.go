// SPDX-License-Identifier: Apache-2.0

// Package drain empties a node before its deadline: it selects the pods to evict through one
// filter (whatever the list source), evicts them in priority tiers with bounded concurrency,
// retries PodDisruptionBudget refusals with backoff, caps grace periods so pods end before the
// deadline, and observes completion through one watch instead of polling each pod.
package drain

import (
	"fmt"
	"slices"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Policy decides which pods a drain evicts. Its zero value evicts DaemonSet pods and refuses
// emptyDir pods; NewPolicy gives NTH's defaults.
type Policy struct {
	// IgnoreDaemonSets leaves DaemonSet pods in place (IGNORE_DAEMON_SETS).
	IgnoreDaemonSets bool
	// DeleteLocalData evicts pods with emptyDir volumes (DELETE_LOCAL_DATA); otherwise they
	// stay and are reported.
	DeleteLocalData bool
	// OwnPod is Lifeboat's own pod: never evicted, unless OwnPodLast.
	OwnPod types.NamespacedName
	// OwnPodLast evicts OwnPod too (if the other filters let it go), last: once every other
	// pod's eviction on the node was accepted or has ended its attempts (TierOwnPod). A
	// controller leader draining its own node thus hands over once, at the end of the drain.
	OwnPodLast bool
}

// Terms are what the notices behind one drain allow it, beyond the Policy.
type Terms struct {
	// Reclaim says the instance is taken away at the deadline whatever happens (a Spot or
	// capacity-reservation warning, a termination hook's expiry, a scheduled event's start).
	// Pods marked not to disrupt then leave too, last, at the deadline minus their grace
	// period. Otherwise (a rebalance recommendation, a state change) they stay, and the drain
	// reports them as holding the node.
	Reclaim bool
	// Taints are Lifeboat's interruption taints on the node (none without TAINT_NODE). A pod
	// that tolerates every one of them stays: evicted, it would be scheduled straight back.
	Taints []corev1.Taint
	// Dead, when set, says why the node's instance is dead (stopped, terminated, ...): its
	// pods are deleted with grace 0, with no eviction and no budget wait (see deleteDead).
	Dead string
}

// Reason says why a pod was not evicted.
type Reason string

const (
	ReasonMirror      Reason = "mirror pod of a static pod: managed by the kubelet"
	ReasonOwnPod      Reason = "Lifeboat's own pod"
	ReasonFinished    Reason = "already finished"
	ReasonTerminating Reason = "already terminating"
	ReasonDaemonSet   Reason = "DaemonSet pod (IGNORE_DAEMON_SETS=true)"
	ReasonLocalData   Reason = "uses emptyDir and DELETE_LOCAL_DATA=false"
	ReasonTolerates   Reason = "tolerates the node's interruption taint: it would be scheduled straight back"
	ReasonDoNotEvict  Reason = "marked not to disrupt (" + AnnotationDoNotDisrupt + " or " + AnnotationSafeToEvict + "=false), and the notice is no reclaim"
)

// Label is the reason's short name, for metrics: snake_case, as Prometheus label values are.
func (r Reason) Label() string {
	switch r {
	case ReasonMirror:
		return "mirror"
	case ReasonOwnPod:
		return "own_pod"
	case ReasonFinished:
		return "finished"
	case ReasonTerminating:
		return "terminating"
	case ReasonDaemonSet:
		return "daemonset"
	case ReasonLocalData:
		return "local_data"
	case ReasonTolerates:
		return "tolerates_taint"
	case ReasonDoNotEvict:
		return "do_not_disrupt"
	}
	return "other"
}

// The annotations by which pod owners ask not to be disrupted, as Karpenter and the Cluster
// Autoscaler read them.
const (
	AnnotationDoNotDisrupt = "karpenter.sh/do-not-disrupt"                    // "true", or a duration from the pod's start
	AnnotationSafeToEvict  = "cluster-autoscaler.kubernetes.io/safe-to-evict" // "false"
)

// Tier orders evictions: a tier starts once every pod of the one before is gone or held by a
// disruption budget, so critical pods (DNS, CNI, log shippers) serve the others until they
// leave, and by the moment that still leaves its pods their grace period before the deadline.
type Tier int

const (
	TierWorkload          Tier = iota // not critical, not from a DaemonSet
	TierDaemonSet                     // not critical, from a DaemonSet (when not ignored)
	TierCritical                      // system-cluster-critical / system-node-critical
	TierCriticalDaemonSet             // critical and from a DaemonSet
	// TierDoNotDisrupt holds the pods marked not to disrupt, under a reclaim. They are not
	// evicted in turn: each leaves at the deadline minus its grace period, the last moment
	// that still lets it stop cleanly, whatever the other tiers are doing.
	TierDoNotDisrupt
	// TierOwnPod is Lifeboat's own pod (Policy.OwnPodLast): evicted once every other pod's
	// eviction was accepted or has ended its attempts, so that its end comes after theirs.
	TierOwnPod
)

func (t Tier) String() string {
	return [...]string{"workload", "daemonset", "critical", "critical-daemonset", "do-not-disrupt", "own-pod"}[t]
}

// Candidate is a pod selected for eviction.
type Candidate struct {
	Pod  *Pod
	Tier Tier
	// Unmanaged pods have no controller and are not recreated elsewhere. They are evicted
	// like the rest, as NTH does (kubectl drain --force), and reported.
	Unmanaged bool
	// ProtectedUntil is when a pod marked not to disrupt for a duration may leave; zero when
	// it is marked without an end.
	ProtectedUntil time.Time
	// MarkError says why its do-not-disrupt annotation could not be read (it is then taken
	// as "true").
	MarkError string
}

// Skipped is a pod the drain leaves alone, and why.
type Skipped struct {
	Pod    types.NamespacedName
	UID    types.UID
	Reason Reason
	// MarkError says why its do-not-disrupt annotation could not be read (it is then taken
	// as "true").
	MarkError string
}

// Select is the one place that decides which pods a drain evicts. Every list source (watch
// cache, quorum read, informer) goes through it. Candidates come back in tier order.
func Select(pods []*Pod, p Policy, terms Terms) (evict []Candidate, skipped []Skipped) {
	now := time.Now()
	for _, pod := range pods {
		key := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
		owner := controllerOf(pod)
		fromDaemonSet := owner != nil && owner.Kind == "DaemonSet" && owner.APIVersion == "apps/v1"
		marked, until, markErr := DoNotDisrupt(pod, now)
		var markError string
		if markErr != nil {
			markError = markErr.Error()
		}
		var reason Reason
		switch {
		case isMirror(pod):
			reason = ReasonMirror
		case key == p.OwnPod && !p.OwnPodLast:
			reason = ReasonOwnPod
		case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
			reason = ReasonFinished
		case pod.DeletionTimestamp != nil:
			reason = ReasonTerminating
		case fromDaemonSet && p.IgnoreDaemonSets:
			reason = ReasonDaemonSet
		case hasEmptyDir(pod) && !p.DeleteLocalData:
			reason = ReasonLocalData
		case toleratesAll(pod, terms.Taints):
			reason = ReasonTolerates
		case marked && !terms.Reclaim:
			reason = ReasonDoNotEvict
		}
		if reason != "" {
			skipped = append(skipped, Skipped{Pod: key, UID: pod.UID, Reason: reason, MarkError: markError})
			continue
		}
		tier := tierOf(pod, fromDaemonSet, marked)
		if key == p.OwnPod {
			tier = TierOwnPod
		}
		evict = append(evict, Candidate{Pod: pod, Tier: tier, Unmanaged: owner == nil,
			ProtectedUntil: until, MarkError: markError})
	}
	slices.SortStableFunc(evict, func(a, b Candidate) int { return int(a.Tier) - int(b.Tier) })
	return evict, skipped
}

func tierOf(pod *Pod, fromDaemonSet, doNotDisrupt bool) Tier {
	if doNotDisrupt {
		return TierDoNotDisrupt
	}
	t := TierWorkload
	if isCritical(pod) {
		t = TierCritical
	}
	if fromDaemonSet {
		t++
	}
	return t
}

// isCritical: the two built-in system priority classes, or a priority at least as high.
func isCritical(pod *Pod) bool {
	switch pod.Spec.PriorityClassName {
	case "system-cluster-critical", "system-node-critical":
		return true
	}
	return pod.Spec.Priority != nil && *pod.Spec.Priority >= 2000000000
}

// DoNotDisrupt reports whether the pod's owners ask, at now, that it not be disrupted, and
// until when (zero: with no end). It is the one reader of the marks, for the drain and the
// periodic check alike.
//
// karpenter.sh/do-not-disrupt is "true", or a duration ("30m", "1h30m"): the pod is protected
// until that long after its start (status.startTime; from now for a pod not started yet).
// "false" marks nothing. Any other value is unreadable: err names it, and the pod is taken
// as marked "true", since its owners meant to protect it. safe-to-evict "false" marks it too.
func DoNotDisrupt(pod *Pod, now time.Time) (marked bool, until time.Time, err error) {
	if pod.Annotations[AnnotationSafeToEvict] == "false" {
		marked = true
	}
	v, ok := pod.Annotations[AnnotationDoNotDisrupt]
	switch {
	case !ok || v == "false":
		return marked, time.Time{}, nil
	case v == "true":
		return true, time.Time{}, nil
	}
	d, perr := time.ParseDuration(v)
	if perr != nil || d < 0 {
		return true, time.Time{}, fmt.Errorf("annotation %s=%q is neither \"true\" nor a duration such as \"30m\"; taken as \"true\"", AnnotationDoNotDisrupt, v)
	}
	if marked { // safe-to-evict=false protects it with no end
		return true, time.Time{}, nil
	}
	start := now
	if pod.Status.StartTime != nil {
		start = pod.Status.StartTime.Time
	}
	if until = start.Add(d); !until.After(now) {
		return false, time.Time{}, nil
	}
	return true, until, nil
}

// toleratesAll reports whether the pod tolerates every one of the taints (and there are some).
func toleratesAll(pod *Pod, taints []corev1.Taint) bool {
	if len(taints) == 0 {
		return false
	}
	for i := range taints {
		if !slices.ContainsFunc(pod.Spec.Tolerations, func(t corev1.Toleration) bool {
			return t.ToleratesTaint(logr.Discard(), &taints[i], false)
		}) {
			return false
		}
	}
	return true
}

func isMirror(pod *Pod) bool {
	_, ok := pod.Annotations[corev1.MirrorPodAnnotationKey]
	return ok
}

func hasEmptyDir(pod *Pod) bool {
	for _, v := range pod.Spec.Volumes {
		if v.EmptyDir {
			return true
		}
	}
	return false
}

func controllerOf(pod *Pod) *metav1.OwnerReference {
	for i := range pod.OwnerReferences {
		if r := &pod.OwnerReferences[i]; r.Controller != nil && *r.Controller {
			return r
		}
	}
	return nil
}
