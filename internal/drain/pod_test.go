// SPDX-License-Identifier: Apache-2.0

package drain

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"lifeboat.dev/lifeboat/test/retained"
)

// keepAll is what the shared informer keeps of test pods.
func keepAll(pods []*corev1.Pod) []*Pod {
	out := make([]*Pod, len(pods))
	for i, p := range pods {
		out[i] = NewPod(p)
	}
	return out
}

// jsonFields is a JSON object of n empty fields under f:status, the shape of a writer's
// managed fields and, as text, of a last applied configuration.
func jsonFields(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"f:status":{`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"f:field%d":{}`, i)
	}
	b.WriteString(`}}`)
	return []byte(b.String())
}

// bigPod is a Deployment's pod as the API server serves it: two containers with their
// environment, the projected token volume, a claim, an ephemeral volume and an emptyDir,
// managed fields from three writers, a sidecar injector's status, the last applied
// configuration, and a running status.
func bigPod() *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-7d9c8f6b5-x2x9q", UID: "0f4c-uid", ResourceVersion: "123",
			Labels: map[string]string{"app": "web", "pod-template-hash": "7d9c8f6b5"},
			Annotations: map[string]string{AnnotationDoNotDisrupt: "true", corev1.LastAppliedConfigAnnotation: string(jsonFields(40)),
				"sidecar.istio.io/status": string(jsonFields(20))},
			OwnerReferences: []metav1.OwnerReference{
				{APIVersion: "v1", Kind: "ConfigMap", Name: "not-the-controller", UID: "cm-uid"},
				{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-7d9c8f6b5", UID: "rs-uid", Controller: ptr.To(true)},
			}},
		Spec: corev1.PodSpec{NodeName: "ip-10-0-0-1.ec2.internal", TerminationGracePeriodSeconds: ptr.To[int64](45), Priority: ptr.To[int32](1000),
			PriorityClassName: "business", Tolerations: []corev1.Toleration{{Key: "aws-node-termination-handler/spot-itn", Operator: corev1.TolerationOpExists}},
			Volumes: []corev1.Volume{
				{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-web"}}},
				{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "kube-api-access-abcde", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}},
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
				}}}},
				{Name: "cache", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}},
			}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.7", StartTime: &metav1.Time{Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}, {Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}},
	}
	for i := range 2 {
		c := corev1.Container{Name: fmt.Sprintf("c%d", i), Image: fmt.Sprintf("123456789012.dkr.ecr.us-east-1.amazonaws.com/team/web:v1.%d", i),
			Args: []string{"--port=8080", "--log-format=json"}}
		for j := range 15 {
			c.Env = append(c.Env, corev1.EnvVar{Name: fmt.Sprintf("SETTING_%d", j), Value: fmt.Sprintf("value-%d", j)})
		}
		p.Spec.Containers = append(p.Spec.Containers, c)
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image, Ready: true,
			ImageID: fmt.Sprintf("123456789012.dkr.ecr.us-east-1.amazonaws.com/team/web@sha256:%064d", i), ContainerID: fmt.Sprintf("containerd://%064d", i)})
	}
	for _, manager := range []string{"kube-controller-manager", "kubelet", "sidecar-injector"} {
		entry := metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, FieldsType: "FieldsV1"}
		entry.FieldsV1 = &metav1.FieldsV1{Raw: jsonFields(60)}
		p.ManagedFields = append(p.ManagedFields, entry)
	}
	return p
}

// A Pod keeps every field a drain reads (the drain's filter matrix checks that selections
// from an informer of Pods are the same) and nothing else.
func TestNewPodKeepsWhatADrainReads(t *testing.T) {
	src := bigPod()
	src.DeletionTimestamp = &metav1.Time{}
	got := NewPod(src)
	if got.Name != src.Name || got.Namespace != src.Namespace || got.UID != src.UID || got.ResourceVersion != src.ResourceVersion || got.DeletionTimestamp == nil {
		t.Errorf("identity or deletion dropped: %+v", got.ObjectMeta)
	}
	if c := controllerOf(got); len(got.OwnerReferences) != 1 || c == nil || c.Kind != "ReplicaSet" || c.Name != "web-7d9c8f6b5" || c.APIVersion != "apps/v1" {
		t.Errorf("owner references %+v, want only the controller", got.OwnerReferences)
	}
	if len(got.Annotations) != 1 || got.Annotations[AnnotationDoNotDisrupt] != "true" {
		t.Errorf("annotations %v, want only the one a drain reads", got.Annotations)
	}
	if got.Labels != nil || got.ManagedFields != nil || got.GenerateName != "" {
		t.Errorf("labels or managed fields kept: %+v", got.ObjectMeta)
	}
	s := got.Spec
	if s.NodeName != src.Spec.NodeName || *s.TerminationGracePeriodSeconds != 45 || *s.Priority != 1000 || s.PriorityClassName != "business" ||
		len(s.Tolerations) != 1 || s.HostNetwork || got.Status.Phase != corev1.PodRunning || got.Status.PodIP != "10.0.0.7" ||
		got.Status.StartTime == nil || !got.Status.StartTime.Equal(src.Status.StartTime) {
		t.Errorf("a spec or status field a drain reads was dropped: %+v %+v", s, got.Status)
	}
	wantVolumes := []PodVolume{{Name: "data", ClaimName: "data-web"}, {Name: "scratch", EmptyDir: true}, {Name: "cache", Ephemeral: true}}
	if fmt.Sprint(s.Volumes) != fmt.Sprint(wantVolumes) {
		t.Errorf("volumes %+v, want %+v (the projected token volume dropped)", s.Volumes, wantVolumes)
	}
	out := outcomeOf(Candidate{Pod: got})
	if fmt.Sprint(out.Claims) != "[shop/data-web shop/web-7d9c8f6b5-x2x9q-cache]" || out.IP != "10.0.0.7" {
		t.Errorf("outcome's claims %v and IP %q", out.Claims, out.IP)
	}

	mirror := bigPod()
	mirror.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "hash"}
	if !isMirror(NewPod(mirror)) {
		t.Error("a mirror pod's annotation was dropped")
	}
	mirror.Annotations = map[string]string{AnnotationSafeToEvict: "false"}
	if marked, _, _ := DoNotDisrupt(NewPod(mirror), time.Now()); !marked {
		t.Error("cluster-autoscaler's safe-to-evict=false was dropped")
	}
}

// The informer hands KeepPod the objects it already keeps on some paths: they pass unchanged.
// Other kinds pass with their managed fields dropped.
func TestKeepPod(t *testing.T) {
	kept, err := KeepPod(bigPod())
	if err != nil {
		t.Fatal(err)
	}
	pod, ok := kept.(*Pod)
	if !ok {
		t.Fatalf("KeepPod returned %T, want *Pod", kept)
	}
	if again, _ := KeepPod(pod); again != pod {
		t.Error("a Pod did not pass through KeepPod unchanged")
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", ManagedFields: bigPod().ManagedFields}}
	if out, _ := KeepPod(node); out.(*corev1.Node).ManagedFields != nil || out.(*corev1.Node).Name != "n" {
		t.Errorf("a Node through KeepPod: %+v", out)
	}
}

func TestPodDeepCopyShareNothing(t *testing.T) {
	orig := NewPod(bigPod())
	if (*Pod)(nil).DeepCopy() != nil {
		t.Error("a nil Pod's copy is not nil")
	}
	cp := orig.DeepCopyObject().(*Pod)
	*cp.Spec.Priority, *cp.Spec.TerminationGracePeriodSeconds = 1, 2
	cp.Spec.Tolerations[0].Key, cp.Spec.Volumes[0].Name = "changed", "changed"
	cp.Annotations[AnnotationDoNotDisrupt], cp.OwnerReferences[0].Name = "false", "changed"
	if *orig.Spec.Priority != 1000 || *orig.Spec.TerminationGracePeriodSeconds != 45 || orig.Spec.Tolerations[0].Key == "changed" ||
		orig.Spec.Volumes[0].Name == "changed" || orig.Annotations[AnnotationDoNotDisrupt] != "true" || orig.OwnerReferences[0].Name == "changed" {
		t.Errorf("the copy shares state with the original: %+v", orig)
	}
}

// BenchmarkPodCacheMemory reports the heap that 20,000 such pods keep (retained-MiB, after a
// GC) as an informer of whole corev1.Pods keeps them and as the drains' informer does (Pods).
// Each pod is decoded from JSON, as an informer receives it, so the objects share nothing.
func BenchmarkPodCacheMemory(b *testing.B) {
	raw, err := json.Marshal(bigPod())
	if err != nil {
		b.Fatal(err)
	}
	const pods = 20000
	for _, keep := range []string{"corev1.Pod", "Pod"} {
		b.Run("keep="+keep, func(b *testing.B) {
			var kept float64
			for range b.N {
				kept = retained.MiB(func() any {
					cache := make([]any, pods)
					for i := range cache {
						p := &corev1.Pod{}
						if err := json.Unmarshal(raw, p); err != nil {
							b.Fatal(err)
						}
						cache[i] = p
						if keep == "Pod" {
							cache[i] = NewPod(p)
						}
					}
					return cache
				})
			}
			b.ReportMetric(kept, "retained-MiB")
		})
	}
}
