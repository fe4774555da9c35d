// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"encoding/json"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"lifeboat.dev/lifeboat/test/retained"
)

// bigNode is a Node as a kubelet on a busy instance reports it: 50 images, managed fields
// from three writers, 20 volumes in use, plus what Lifeboat reads.
func bigNode() *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "ip-10-0-0-1.ec2.internal", Labels: map[string]string{"node.kubernetes.io/instance-type": "m5.large"},
			Annotations: map[string]string{"lifeboat.dev/interruption": `{"v":2}`}},
		Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-0123456789abcdef0", Unschedulable: true,
			Taints: []corev1.Taint{{Key: "aws-node-termination-handler/spot-itn", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}},
			NodeInfo:   corev1.NodeSystemInfo{BootID: "b-1"},
		},
	}
	for i := range 3 {
		n.ManagedFields = append(n.ManagedFields, metav1.ManagedFieldsEntry{Manager: fmt.Sprintf("writer-%d", i), Operation: metav1.ManagedFieldsOperationUpdate,
			FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: fieldsJSON(100)}})
	}
	for i := range 50 {
		n.Status.Images = append(n.Status.Images, corev1.ContainerImage{SizeBytes: 1 << 28,
			Names: []string{fmt.Sprintf("123456789012.dkr.ecr.us-east-1.amazonaws.com/team/service-%d@sha256:%064d", i, i), fmt.Sprintf("123456789012.dkr.ecr.us-east-1.amazonaws.com/team/service-%d:v1.%d", i, i)}})
	}
	for i := range 20 {
		v := corev1.UniqueVolumeName(fmt.Sprintf("kubernetes.io/csi/ebs.csi.aws.com^vol-%017d", i))
		n.Status.VolumesInUse = append(n.Status.VolumesInUse, v)
		n.Status.VolumesAttached = append(n.Status.VolumesAttached, corev1.AttachedVolume{Name: v, DevicePath: "/dev/xvdba"})
	}
	return n
}

// fieldsJSON is a managed-fields set of n status fields, as server-side apply records them.
func fieldsJSON(n int) []byte {
	f := map[string]any{}
	for i := range n {
		f[fmt.Sprintf("f:field%d", i)] = map[string]any{}
	}
	b, _ := json.Marshal(map[string]any{"f:status": f})
	return b
}

func size(t *testing.T, obj any) int {
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return len(b)
}

// TrimNode keeps every field Lifeboat reads and drops the rest.
func TestTrimNode(t *testing.T) {
	n := bigNode()
	before := size(t, n)
	out, err := TrimNode(n)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*corev1.Node)
	want := bigNode()
	want.ManagedFields, want.Status.Images, want.Status.VolumesInUse, want.Status.VolumesAttached = nil, nil, nil, nil
	if a, b := size(t, got), size(t, want); a != b {
		t.Errorf("trimmed node is %d bytes as JSON, want %d (what Lifeboat reads)", a, b)
	}
	if got.Spec.ProviderID == "" || len(got.Spec.Taints) != 1 || got.Annotations["lifeboat.dev/interruption"] == "" || len(got.Status.Conditions) != 1 ||
		got.Status.NodeInfo.BootID != "b-1" || len(got.Status.Addresses) != 1 || got.Labels["node.kubernetes.io/instance-type"] != "m5.large" {
		t.Errorf("a field Lifeboat reads was dropped: %+v", got)
	}
	t.Logf("node as JSON: %d bytes before, %d after", before, size(t, got))

	va := &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: "csi-1", ManagedFields: bigNode().ManagedFields},
		Spec: storagev1.VolumeAttachmentSpec{NodeName: "n"}}
	out, _ = TrimNode(va)
	if v := out.(*storagev1.VolumeAttachment); v.ManagedFields != nil || v.Spec.NodeName != "n" {
		t.Errorf("VolumeAttachment after the transform: %+v", v)
	}
}

// BenchmarkNodeCacheMemory reports the heap an informer's cache of 2,000 such Nodes keeps
// (retained-MiB, after a GC), with and without TrimNode. Each Node is decoded from JSON, as
// the informer receives it, so the objects share nothing.
func BenchmarkNodeCacheMemory(b *testing.B) {
	benchmarkCacheMemory(b, bigNode(), 2000, TrimNode, func() any { return &corev1.Node{} })
}

// benchmarkCacheMemory decodes n copies of obj from JSON, as the informer receives them (so
// the objects share nothing), keeps them with and without trim, and reports the heap kept.
func benchmarkCacheMemory(b *testing.B, obj any, n int, trim func(any) (any, error), empty func() any) {
	raw, err := json.Marshal(obj)
	if err != nil {
		b.Fatal(err)
	}
	for _, trimmed := range []bool{false, true} {
		b.Run(fmt.Sprintf("trim=%v", trimmed), func(b *testing.B) {
			var kept float64
			for range b.N {
				kept = retained.MiB(func() any {
					cache := make([]any, 0, n)
					for range n {
						o := empty()
						if err := json.Unmarshal(raw, o); err != nil {
							b.Fatal(err)
						}
						if trimmed {
							o, _ = trim(o)
						}
						cache = append(cache, o)
					}
					return cache
				})
			}
			b.ReportMetric(kept, "retained-MiB")
		})
	}
}
