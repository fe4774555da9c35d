// SPDX-License-Identifier: Apache-2.0

package demo

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"lifeboat.dev/lifeboat/test/sandbox/fakeaws"
)

// What node B holds besides its pods, and so what the controller waits for before it hands
// the instance back: a place in a load balancer's target group, and a volume attached for a
// stateful pod.
const (
	targetGroupName = "web"
	// targetDelay is the group's deregistration delay: short, to keep the demo short (AWS's
	// default is 300 s).
	targetDelay = 10 * time.Second
	// detachAfter is how long the attach/detach controller's stand-in takes to detach the
	// volume once its pod is gone (unmount, then the cloud's detach).
	detachAfter = 2 * time.Second

	statefulPodName = "db-0"
	claimName       = "data-db-0"
	volumeName      = "pv-db-0"
	attachmentName  = "csi-db-0"
)

// statefulPodKey names the stateful pod as the watcher and the summary do.
const statefulPodKey = appNamespace + "/" + statefulPodName

// addTargetGroup registers the instance in target group "web", as its Auto Scaling group does
// for the instances it launches. It must happen before the controller starts: the controller
// lists the target groups then, and reuses the list for a minute.
func (e *env) addTargetGroup(instance string) error {
	e.targetGroup = e.aws.AddTargetGroup(fakeaws.TargetGroup{Name: targetGroupName, TargetType: "instance", Port: 80, DeregistrationDelay: targetDelay})
	return e.aws.RegisterTarget(e.targetGroup, instance, 80)
}

// leaveTargetGroup is what the Auto Scaling group does as it begins terminating the instance:
// it deregisters it from its target group, where it drains for the deregistration delay.
func (e *env) leaveTargetGroup(instance string) error {
	return e.aws.DeregisterTarget(e.targetGroup, instance)
}

// createStatefulPod runs db-0 on the node with claim data-db-0, bound to volume pv-db-0, and
// attaches the volume to the node as the attach/detach controller would (a VolumeAttachment).
// The pod has no controller: nothing recreates it here after its eviction.
func createStatefulPod(ctx context.Context, client kubernetes.Interface, node string) error {
	pv, pvc, va, pod := statefulObjects(node)
	if _, err := client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create PersistentVolume %s: %w", pv.Name, err)
	}
	if _, err := client.CoreV1().PersistentVolumeClaims(appNamespace).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create PersistentVolumeClaim %s: %w", pvc.Name, err)
	}
	if _, err := client.StorageV1().VolumeAttachments().Create(ctx, va, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create VolumeAttachment %s: %w", va.Name, err)
	}
	if _, err := client.CoreV1().Pods(appNamespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create pod %s: %w", statefulPodKey, err)
	}
	return nil
}

// statefulObjects are the stateful pod and what it stands on. The claim and the volume name
// each other, so the PersistentVolume controller binds them; the hostPath volume is one no
// attach/detach controller would act on, leaving the VolumeAttachment to the demo.
func statefulObjects(node string) (*corev1.PersistentVolume, *corev1.PersistentVolumeClaim, *storagev1.VolumeAttachment, *corev1.Pod) {
	size := corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
	rwo := []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: volumeName}, Spec: corev1.PersistentVolumeSpec{
		Capacity: size, AccessModes: rwo, PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
		PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data/" + statefulPodName}},
		ClaimRef:               &corev1.ObjectReference{Namespace: appNamespace, Name: claimName},
	}}
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: appNamespace, Name: claimName}, Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: rwo, VolumeName: volumeName, StorageClassName: ptr.To(""),
		Resources: corev1.VolumeResourceRequirements{Requests: size},
	}}
	va := &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: attachmentName}, Spec: storagev1.VolumeAttachmentSpec{
		Attacher: "ebs.csi.aws.com", NodeName: node, Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr.To(volumeName)},
	}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: appNamespace, Name: statefulPodName, Labels: map[string]string{"app": "db"}}, Spec: corev1.PodSpec{
		NodeName:                      node,
		TerminationGracePeriodSeconds: ptr.To[int64](5),
		Containers: []corev1.Container{{Name: "db", Image: "registry.example/db:1",
			VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/var/lib/db"}}}},
		Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claimName}}}},
	}}
	return pv, pvc, va, pod
}

// waitStatefulPod waits until the stateful pod runs and its claim is bound.
func waitStatefulPod(ctx context.Context, client kubernetes.Interface) error {
	state := "not created"
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		pod, err := client.CoreV1().Pods(appNamespace).Get(ctx, statefulPodName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pvc, err := client.CoreV1().PersistentVolumeClaims(appNamespace).Get(ctx, claimName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		state = fmt.Sprintf("pod %s, claim %s", pod.Status.Phase, pvc.Status.Phase)
		return pod.Status.Phase == corev1.PodRunning && pvc.Status.Phase == corev1.ClaimBound, nil
	})
	if err != nil {
		return fmt.Errorf("stateful pod %s not ready (%s): %w", statefulPodKey, state, err)
	}
	return nil
}

// detachWhenGone plays the attach/detach controller for the stateful pod's volume: once the
// pod is gone it waits detachAfter, then deletes the VolumeAttachment. It returns when done
// or when ctx ends; failed reports an error.
func (e *env) detachWhenGone(ctx context.Context, failed func(error)) {
	gone := func(ctx context.Context) (bool, error) {
		_, err := e.client.CoreV1().Pods(appNamespace).Get(ctx, statefulPodName, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}
	if err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, gone); err != nil {
		return // the run is over
	}
	select {
	case <-ctx.Done():
		return
	case <-time.After(detachAfter):
	}
	err := e.client.StorageV1().VolumeAttachments().Delete(ctx, attachmentName, metav1.DeleteOptions{})
	if err != nil && ctx.Err() == nil {
		failed(fmt.Errorf("the attach/detach stand-in could not delete VolumeAttachment %s: %w", attachmentName, err))
	}
}

// detachAtCompletion is what node B still held when its lifecycle action was completed:
// its instance's place in the target group, unless gone, and the VolumeAttachments on it.
// It is asked of the fake and the API server as the call arrives.
func (e *env) detachAtCompletion(ctx context.Context, instance, node string) (draining, attached []string) {
	if state, registered := e.aws.TargetState(e.targetGroup, instance); registered || state == "draining" {
		draining = []string{fmt.Sprintf("%s in target group %s (%s)", instance, targetGroupName, state)}
	}
	vas, err := e.client.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
	if err != nil {
		return draining, []string{"(cannot tell: " + err.Error() + ")"}
	}
	for _, va := range vas.Items {
		if va.Spec.NodeName == node && va.Spec.Source.PersistentVolumeName != nil {
			attached = append(attached, fmt.Sprintf("%s (VolumeAttachment %s)", *va.Spec.Source.PersistentVolumeName, va.Name))
		}
	}
	return draining, attached
}
