// SPDX-License-Identifier: Apache-2.0

package demo

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// Workloads the scenario runs. Every node gets the same mix, so each drain shows every kind.
const (
	appNamespace    = "shop"
	systemNamespace = "kube-system"
	// ControllerPodName is the controller's POD_NAME: a pod of that name on node B stands in
	// for the controller's own Deployment pod (the controller itself runs as a local process).
	ControllerPodName = "lifeboat-controller-5f7c9d-x2k4q"
	ownPod            = systemNamespace + "/" + ControllerPodName
)

type workload struct {
	namespace, name string
	replicas        int32
	priorityClass   string
	emptyDir        bool
}

var (
	web      = workload{namespace: appNamespace, name: "web", replicas: 6}                                                  // under a PodDisruptionBudget
	checkout = workload{namespace: appNamespace, name: "checkout", replicas: 3}                                             // under a budget that allows no disruption
	scratch  = workload{namespace: appNamespace, name: "cache", replicas: 3, emptyDir: true}                                // local scratch data
	dns      = workload{namespace: systemNamespace, name: "coredns", replicas: 3, priorityClass: "system-cluster-critical"} // critical
)

// workloads are the scenario's Deployments.
var workloads = []workload{web, checkout, scratch, dns}

// budget is a workload's PodDisruptionBudget as the scenario creates it, with the disruptions
// it allows once every replica is healthy.
type budget struct {
	workload                     workload
	minAvailable, maxUnavailable *intstr.IntOrString // one of them
	allows                       int32
}

var (
	// webBudget lets one web pod go at a time: whether it refuses an eviction depends on
	// how fast the replacements come up.
	webBudget = budget{workload: web, maxUnavailable: ptr.To(intstr.FromInt32(1)), allows: 1}
	// checkoutBudget asks for every replica, as budgets often do by mistake: it refuses every
	// eviction until its owner relaxes it to checkoutRelaxedTo (relaxWhenHeld).
	checkoutBudget = budget{workload: checkout, minAvailable: ptr.To(intstr.FromInt32(checkout.replicas)), allows: 0}
)

// checkoutRelaxedTo is the minAvailable checkout's owner relaxes its budget to mid-drain: it
// lets node A's and node B's pods go together.
const checkoutRelaxedTo = 1

func (b budget) object() *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: b.workload.namespace, Name: b.workload.name},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: b.minAvailable, MaxUnavailable: b.maxUnavailable,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": b.workload.name}},
		},
	}
}

const daemonSetName = "log-shipper"

// createWorkloads creates the scenario's objects and waits until every pod runs and the
// PodDisruptionBudget is computed. Node B, the controller's case, also gets the stand-in for
// the controller's own pod and the stateful pod.
func createWorkloads(ctx context.Context, client kubernetes.Interface, nodes []*corev1.Node, nodeB string) error {
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: appNamespace}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create namespace %s: %w", appNamespace, err)
	}
	for _, w := range workloads {
		if _, err := client.AppsV1().Deployments(w.namespace).Create(ctx, w.deployment(), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create deployment %s/%s: %w", w.namespace, w.name, err)
		}
	}
	for _, b := range []budget{webBudget, checkoutBudget} {
		if _, err := client.PolicyV1().PodDisruptionBudgets(b.workload.namespace).Create(ctx, b.object(), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create PodDisruptionBudget %s: %w", b.workload.name, err)
		}
	}
	if _, err := client.AppsV1().DaemonSets(systemNamespace).Create(ctx, daemonSet(), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create daemonset: %w", err)
	}
	for _, n := range nodes {
		if _, err := client.CoreV1().Pods(systemNamespace).Create(ctx, mirrorPod(n), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create mirror pod on %s: %w", n.Name, err)
		}
	}
	own := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: systemNamespace, Name: ControllerPodName, Labels: map[string]string{"app": "lifeboat-controller"}},
		Spec:       corev1.PodSpec{NodeName: nodeB, Containers: []corev1.Container{{Name: "lifeboat", Image: "lifeboat:demo"}}},
	}
	if _, err := client.CoreV1().Pods(systemNamespace).Create(ctx, own, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create the controller's pod: %w", err)
	}
	if err := createStatefulPod(ctx, client, nodeB); err != nil {
		return err
	}
	if err := waitWorkloads(ctx, client, len(nodes)); err != nil {
		return err
	}
	return waitStatefulPod(ctx, client)
}

// deployment spreads the replicas evenly over the nodes that are not tainted (a cordoned
// node is, once the node lifecycle controller has seen it), so each node starts with the
// same pods and replacements go to the nodes left.
func (w workload) deployment() *appsv1.Deployment {
	labels := map[string]string{"app": w.name}
	spec := corev1.PodSpec{
		PriorityClassName:             w.priorityClass,
		TerminationGracePeriodSeconds: ptr.To[int64](5),
		Containers:                    []corev1.Container{{Name: w.name, Image: "registry.example/" + w.name + ":1"}},
		TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
			MaxSkew: 1, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector: &metav1.LabelSelector{MatchLabels: labels}, NodeTaintsPolicy: ptr.To(corev1.NodeInclusionPolicyHonor),
		}},
	}
	if w.emptyDir {
		spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.namespace, Name: w.name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(w.replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
		},
	}
}

func daemonSet() *appsv1.DaemonSet {
	labels := map[string]string{"app": daemonSetName}
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: systemNamespace, Name: daemonSetName},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: daemonSetName, Image: "registry.example/" + daemonSetName + ":1"}},
			}},
		},
	}
}

// mirrorPod is what the kubelet writes for a static pod (kube-proxy on kOps nodes): the
// mirror annotation and the Node as owner. Here the demo writes it; no kubelet reads a
// manifest.
func mirrorPod(n *corev1.Node) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: systemNamespace, Name: "kube-proxy-" + n.Name,
			Annotations:     map[string]string{corev1.MirrorPodAnnotationKey: "demo", "kubernetes.io/config.source": "file"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: n.Name, UID: n.UID, Controller: ptr.To(true)}},
		},
		Spec: corev1.PodSpec{NodeName: n.Name, PriorityClassName: "system-node-critical",
			Containers: []corev1.Container{{Name: "kube-proxy", Image: "registry.example/kube-proxy:1"}}},
	}
}

// waitWorkloads waits until the deployments are available, the DaemonSet runs on every node,
// and each PodDisruptionBudget's status counts every replica healthy: web's then allows one
// disruption, checkout's none.
func waitWorkloads(ctx context.Context, client kubernetes.Interface, nodes int) error {
	var state string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		for _, w := range workloads {
			d, err := client.AppsV1().Deployments(w.namespace).Get(ctx, w.name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if d.Status.AvailableReplicas != w.replicas {
				state = fmt.Sprintf("deployment %s/%s: %d of %d replicas available", w.namespace, w.name, d.Status.AvailableReplicas, w.replicas)
				return false, nil
			}
		}
		ds, err := client.AppsV1().DaemonSets(systemNamespace).Get(ctx, daemonSetName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if ds.Status.NumberReady != int32(nodes) {
			state = fmt.Sprintf("daemonset %s: %d of %d pods ready", daemonSetName, ds.Status.NumberReady, nodes)
			return false, nil
		}
		for _, b := range []budget{webBudget, checkoutBudget} {
			pdb, err := client.PolicyV1().PodDisruptionBudgets(b.workload.namespace).Get(ctx, b.workload.name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			// A budget not yet computed allows no disruption either: checkout's must count
			// its replicas too.
			st := pdb.Status
			if st.ObservedGeneration != pdb.Generation || st.CurrentHealthy != b.workload.replicas || st.DisruptionsAllowed != b.allows {
				state = fmt.Sprintf("PodDisruptionBudget %s: %d of %d pods healthy, %d disruptions allowed, want %d",
					pdb.Name, st.CurrentHealthy, b.workload.replicas, st.DisruptionsAllowed, b.allows)
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("workloads not ready: %s: %w", state, err)
	}
	return nil
}
