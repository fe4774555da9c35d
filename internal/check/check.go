// SPDX-License-Identifier: Apache-2.0

// Package check finds, before any interruption, the workloads that could not leave a node
// within a Spot warning's two minutes, and says how to fix each: a PodDisruptionBudget that
// allows no disruption now, a grace period longer than the warning, a do-not-disrupt mark, a
// single replica without a budget, emptyDir data a drain must keep, a pod no controller
// recreates. `lifeboat check` prints the findings and exits 1 when there are any, for CI.
package check

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"lifeboat.dev/lifeboat/internal/drain"
)

// SpotWarning is the notice a Spot interruption gives: the budget every check measures against.
const SpotWarning = 2 * time.Minute

// Reasons a workload is reported.
const (
	ReasonBudgetBlocks  = "budget-allows-no-disruption"
	ReasonLongGrace     = "grace-period-above-warning"
	ReasonDoNotDisrupt  = "do-not-disrupt"
	ReasonSingleReplica = "single-replica-without-budget"
	ReasonLocalData     = "local-data-kept"
	ReasonUnmanaged     = "unmanaged-pod"
)

// Finding is one workload that cannot leave a node in time, or not cleanly.
type Finding struct {
	Namespace string `json:"namespace"`
	// Workload is kind/name of the pods' controller (a Deployment rather than its
	// ReplicaSet), or pod/name for a pod without one.
	Workload string `json:"workload"`
	Pods     int    `json:"pods"`
	Reason   string `json:"reason"`
	Detail   string `json:"detail"`
	Fix      string `json:"fix"`
}

// Options are what the checks measure against: Lifeboat's own drain settings.
type Options struct {
	// Policy is the drain's (IGNORE_DAEMON_SETS, DELETE_LOCAL_DATA, Lifeboat's own pod).
	Policy drain.Policy
	// PodGracePeriod is POD_TERMINATION_GRACE_PERIOD: -1 keeps each pod's own.
	PodGracePeriod int
	// Namespace limits the check to one namespace; empty: all.
	Namespace string
	// FromCache lists from the API server's watch cache (resourceVersion "0") rather than
	// etcd: a periodic check on a large cluster costs the API server far less, and a
	// second-old view is as good.
	FromCache bool
}

// Check reads the pods, budgets and workloads and returns the findings, ordered by namespace,
// workload and reason.
func Check(ctx context.Context, client kubernetes.Interface, o Options) ([]Finding, error) {
	list := metav1.ListOptions{}
	if o.FromCache {
		list.ResourceVersion = "0"
	}
	pods, err := client.CoreV1().Pods(o.Namespace).List(ctx, list)
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	w, err := readWorld(ctx, client, o.Namespace, list)
	if err != nil {
		return nil, err
	}
	f := &findings{w: w, o: o, found: map[string]*Finding{}, listed: make(map[types.NamespacedName]*corev1.Pod, len(pods.Items))}
	// The checks read the listed pods themselves: a drain's pods keep no labels.
	for i := range pods.Items {
		f.listed[types.NamespacedName{Namespace: pods.Items[i].Namespace, Name: pods.Items[i].Name}] = &pods.Items[i]
	}
	// Select with no terms: a pod marked not to disrupt comes back skipped, and is reported.
	candidates, skipped := drain.Select(drain.PodsOf(pods.Items), o.Policy, drain.Terms{})
	f.checkSkipped(skipped)
	f.checkCandidates(candidates)
	return f.sorted(), nil
}

// readWorld lists the budgets and the workloads that own pods.
func readWorld(ctx context.Context, client kubernetes.Interface, namespace string, list metav1.ListOptions) (world, error) {
	pdbs, err := client.PolicyV1().PodDisruptionBudgets(namespace).List(ctx, list)
	if err != nil {
		return world{}, fmt.Errorf("list PodDisruptionBudgets: %w", err)
	}
	rsList, err := client.AppsV1().ReplicaSets(namespace).List(ctx, list)
	if err != nil {
		return world{}, fmt.Errorf("list ReplicaSets: %w", err)
	}
	deployments, err := client.AppsV1().Deployments(namespace).List(ctx, list)
	if err != nil {
		return world{}, fmt.Errorf("list Deployments: %w", err)
	}
	statefulSets, err := client.AppsV1().StatefulSets(namespace).List(ctx, list)
	if err != nil {
		return world{}, fmt.Errorf("list StatefulSets: %w", err)
	}
	w := world{pdbs: pdbs.Items, replicaSetOwner: map[string]string{}, replicas: map[string]int32{}}
	for _, rs := range rsList.Items {
		if ref := metav1.GetControllerOf(&rs); ref != nil && ref.Kind == "Deployment" {
			w.replicaSetOwner[rs.Namespace+"/"+rs.Name] = "deployment/" + ref.Name
		}
	}
	for _, d := range deployments.Items {
		w.replicas[d.Namespace+"/deployment/"+d.Name] = replicasOf(d.Spec.Replicas)
	}
	for _, s := range statefulSets.Items {
		w.replicas[s.Namespace+"/statefulset/"+s.Name] = replicasOf(s.Spec.Replicas)
	}
	return w, nil
}

// findings are the findings of one check, one per workload and reason.
type findings struct {
	w      world
	o      Options
	listed map[types.NamespacedName]*corev1.Pod
	found  map[string]*Finding // namespace/workload/reason
}

// add counts the pod under its workload's finding for reason, the first pod making it.
func (f *findings) add(pod *corev1.Pod, reason, detail, fix string) {
	workload := f.w.workloadOf(pod)
	key := pod.Namespace + "/" + workload + "/" + reason
	if x, ok := f.found[key]; ok {
		x.Pods++
		return
	}
	f.found[key] = &Finding{Namespace: pod.Namespace, Workload: workload, Pods: 1, Reason: reason, Detail: detail, Fix: fix}
}

// checkSkipped reports the pods a drain would leave: marked not to disrupt (and then what else
// would hold them up when they do leave), or keeping local data.
func (f *findings) checkSkipped(skipped []drain.Skipped) {
	for _, s := range skipped {
		pod := f.listed[s.Pod]
		switch s.Reason {
		case drain.ReasonDoNotEvict:
			f.add(pod, ReasonDoNotDisrupt, "marked not to disrupt (karpenter.sh/do-not-disrupt or cluster-autoscaler.kubernetes.io/safe-to-evict=false)",
				"it stays through rebalance recommendations and, under a Spot warning, leaves only at the deadline minus its grace period; remove the mark if the pod can move")
			f.w.checkPod(pod, f.o, f.add)
		case drain.ReasonLocalData:
			f.add(pod, ReasonLocalData, "uses emptyDir and DELETE_LOCAL_DATA=false: every drain leaves it, and it ends with the instance",
				"keep the data on a PersistentVolume, or set DELETE_LOCAL_DATA=true if it can be lost")
		}
	}
}

// checkCandidates reports what would hold up the pods a drain would evict, and those no
// controller recreates.
func (f *findings) checkCandidates(candidates []drain.Candidate) {
	for _, c := range candidates {
		pod := f.listed[types.NamespacedName{Namespace: c.Pod.Namespace, Name: c.Pod.Name}]
		f.w.checkPod(pod, f.o, f.add)
		if c.Unmanaged {
			f.add(pod, ReasonUnmanaged, "no controller: evicted, it is not recreated anywhere", "run it under a Deployment, StatefulSet or Job")
		}
	}
}

// sorted lists the findings by namespace, workload and reason.
func (f *findings) sorted() []Finding {
	out := make([]Finding, 0, len(f.found))
	for _, x := range f.found {
		out = append(out, *x)
	}
	slices.SortFunc(out, func(a, b Finding) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Workload, b.Workload), cmp.Compare(a.Reason, b.Reason))
	})
	return out
}

// world is what the checks know beyond the pod itself.
type world struct {
	pdbs            []policyv1.PodDisruptionBudget
	replicaSetOwner map[string]string // namespace/replicaset -> deployment/name
	replicas        map[string]int32  // namespace/kind/name -> spec.replicas
}

// checkPod reports what keeps an evictable pod from leaving within a Spot warning: its
// budgets, its grace period, a single replica without a budget.
func (w world) checkPod(pod *corev1.Pod, o Options, add func(*corev1.Pod, string, string, string)) {
	budgets := w.budgetsOf(pod)
	for _, pdb := range budgets {
		if pdb.Status.DisruptionsAllowed < 1 {
			add(pod, ReasonBudgetBlocks,
				fmt.Sprintf("PodDisruptionBudget %s allows no disruption now (needs %d healthy pods and has %d): its pods cannot be evicted",
					pdb.Name, pdb.Status.DesiredHealthy, pdb.Status.CurrentHealthy),
				"run more replicas than the budget needs (or loosen it, e.g. maxUnavailable: 1), so one pod can leave at a time")
		}
	}
	grace := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		grace = *g
	}
	if o.PodGracePeriod >= 0 {
		grace = int64(o.PodGracePeriod)
	}
	if time.Duration(grace)*time.Second >= SpotWarning {
		add(pod, ReasonLongGrace,
			fmt.Sprintf("terminationGracePeriodSeconds %d is not shorter than a Spot warning (%d s): under one, Lifeboat cuts it to the time left and the pod is killed before it finishes", grace, int(SpotWarning.Seconds())),
			"make the pod stop within about 90 s of SIGTERM and lower terminationGracePeriodSeconds to match")
	}
	workload := w.workloadOf(pod)
	if replicas, ok := w.replicas[pod.Namespace+"/"+workload]; ok && replicas == 1 && len(budgets) == 0 {
		add(pod, ReasonSingleReplica, "1 replica and no PodDisruptionBudget: any drain of its node is an outage until the replacement is ready",
			"run 2 or more replicas with a PodDisruptionBudget (maxUnavailable: 1)")
	}
}

// budgetsOf lists the budgets that select the pod.
func (w world) budgetsOf(pod *corev1.Pod) []policyv1.PodDisruptionBudget {
	var out []policyv1.PodDisruptionBudget
	for _, pdb := range w.pdbs {
		if pdb.Namespace != pod.Namespace {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err == nil && !sel.Empty() && sel.Matches(labels.Set(pod.Labels)) {
			out = append(out, pdb)
		}
	}
	return out
}

// workloadOf names the pod's workload: kind/name of its controller, a ReplicaSet's Deployment
// when it has one, or pod/name.
func (w world) workloadOf(pod *corev1.Pod) string {
	ref := metav1.GetControllerOf(pod)
	if ref == nil {
		return "pod/" + pod.Name
	}
	if ref.Kind == "ReplicaSet" {
		if d, ok := w.replicaSetOwner[pod.Namespace+"/"+ref.Name]; ok {
			return d
		}
	}
	return strings.ToLower(ref.Kind) + "/" + ref.Name
}

func replicasOf(r *int32) int32 {
	if r == nil {
		return 1 // the API's default
	}
	return *r
}
