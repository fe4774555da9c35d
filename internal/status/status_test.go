// SPDX-License-Identifier: Apache-2.0

package status_test

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"lifeboat.dev/lifeboat/deploy"
	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/detach/targets"
	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/record"
	"lifeboat.dev/lifeboat/internal/status"
	"lifeboat.dev/lifeboat/test/sandbox"
	"lifeboat.dev/lifeboat/test/sandbox/fakeaws"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// episodeNode is a node with an open episode: a Spot warning and a terminate hook (one
// heartbeat sent), owned by a controller.
func episodeNode(name string, deadline, renewed time.Time) *corev1.Node {
	n := sandbox.NodeSpec{Name: name}.Node()
	n.Spec.ProviderID = "aws:///us-east-1a/i-0123456789abcdef0"
	n.Spec.Unschedulable = true
	rec := record.Record{Version: record.Version, Notices: []string{"spot-i-0123456789abcdef0", "asg-term-i-0123456789abcdef0"},
		Phase: record.PhaseDraining, Deadline: deadline,
		Intents: []record.Intent{
			{ID: "spot-i-0123456789abcdef0", Kind: "spot-interruption", Source: "queue", InstanceID: "i-0123456789abcdef0", Deadline: deadline, Origin: "queue q"},
			{ID: "asg-term-i-0123456789abcdef0", Kind: "asg-termination", Source: "queue", InstanceID: "i-0123456789abcdef0", Deadline: deadline.Add(time.Hour), Origin: "queue q",
				Lifecycle: &record.Lifecycle{Group: "workers", Hook: "drain"}},
		},
		Owner:     &record.Owner{Origin: "queue q", Holder: "lifeboat-0/1", Renewed: renewed, Contested: renewed.Add(-20 * time.Second)},
		Detach:    &record.Detach{PodIPs: []string{"10.0.0.7"}}, // an evicted pod's IP
		Heartbeat: &record.Heartbeat{Notice: "asg-term-i-0123456789abcdef0", Count: 1, Last: renewed},
	}
	b, _ := json.Marshal(rec)
	n.Annotations = map[string]string{record.Annotation: string(b)}
	return n
}

func pod(name, node string, edit func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "img"}}}}
	if edit != nil {
		edit(p)
	}
	return p
}

// TestStatus: a node in an episode is reported with its notices, its deadline, each pod
// with what holds it (a budget allowing no disruption, named with its numbers; a
// do-not-disrupt mark with its turn; a policy), its attached volume and its pending lifecycle
// action; a node without an episode is not.
func TestStatus(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, _ := sandboxtest.Shared(t, sandbox.ClusterOptions{NoKwok: true})
	now := time.Now().Truncate(time.Second)
	deadline := now.Add(2 * time.Minute)
	const name = "ip-10-0-0-1.ec2.internal"
	for _, n := range []*corev1.Node{episodeNode(name, deadline, now.Add(-5*time.Second)), sandbox.NodeSpec{Name: "quiet"}.Node()} {
		if _, err := c.Client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.EnsureNamespace(ctx, "shop"); err != nil {
		t.Fatal(err)
	}
	pods := []*corev1.Pod{
		pod("web-0", name, func(p *corev1.Pod) { p.Labels = map[string]string{"app": "web"} }),
		pod("batch-0", name, func(p *corev1.Pod) {
			p.Annotations = map[string]string{drain.AnnotationDoNotDisrupt: "true"}
			p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](30)
		}),
		pod("logs-x", name, func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: appsv1.SchemeGroupVersion.String(), Kind: "DaemonSet", Name: "logs", UID: "u", Controller: ptr.To(true)}}
		}),
		pod("warm-0", name, func(p *corev1.Pod) {
			p.Annotations = map[string]string{drain.AnnotationDoNotDisrupt: "1m"} // from its start, set below
		}),
		pod("cart-0", name, nil),
		pod("lifeboat-0", name, nil), // the owner's own pod (its holder's host name)
		pod("elsewhere", "quiet", nil),
	}
	for _, p := range pods {
		created, err := c.Client.CoreV1().Pods("shop").Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if created.Name == "warm-0" { // started 30 s ago: protected for 30 s more
			created.Status.StartTime = &metav1.Time{Time: now.Add(-30 * time.Second)}
			if _, err := c.Client.CoreV1().Pods("shop").UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	pdb, err := c.Client.PolicyV1().PodDisruptionBudgets("shop").Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(2)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// What the disruption controller would compute for two healthy pods.
	pdb.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: pdb.Generation, DesiredHealthy: 2, CurrentHealthy: 2, ExpectedPods: 2, DisruptionsAllowed: 0}
	if _, err := c.Client.PolicyV1().PodDisruptionBudgets("shop").UpdateStatus(ctx, pdb, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	pv := "pv-db-0"
	if _, err := c.Client.StorageV1().VolumeAttachments().Create(ctx, &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: "csi-db-0"},
		Spec: storagev1.VolumeAttachmentSpec{Attacher: "ebs.csi.aws.com", NodeName: name, Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &pv}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The defaults, as on an operator's machine.
	loaded, err := config.Load(nil, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	// The instance is still in target group web (draining), and a pod IP the drain recorded
	// for the hand-back is still in group pods; another node's instance does not count.
	fake := sandboxtest.FakeAWS(t, "")
	web := fake.AddTargetGroup(fakeaws.TargetGroup{Name: "web", DeregistrationDelay: time.Hour})
	podGroup := fake.AddTargetGroup(fakeaws.TargetGroup{Name: "pods", TargetType: "ip"})
	for _, r := range [][2]string{{web, "i-0123456789abcdef0"}, {web, "i-0fffffffffffffff0"}, {podGroup, "10.0.0.7"}} {
		if err := fake.RegisterTarget(r[0], r[1], 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := fake.DeregisterTarget(web, "i-0123456789abcdef0"); err != nil {
		t.Fatal(err)
	}
	opts := status.Options{Targets: targets.New(cloud.NewAWSLoadBalancing(sandboxtest.AWSConfig(fake.URL())), targets.Options{})}
	report, err := status.Collect(ctx, sandboxtest.ClientWith(t, ctx, c, "oncall", deploy.ReaderPermissions), loaded.Config, now, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(report.Nodes) != 1 {
		t.Fatalf("%d nodes reported, want the one in an episode: %+v", len(report.Nodes), report.Nodes)
	}
	n := report.Nodes[0]
	if n.Name != name || n.Instance != "i-0123456789abcdef0" || n.Phase != "draining" || n.Left != "2m0s" || len(n.Notices) != 2 {
		t.Errorf("node: %+v", n)
	}
	want := map[string]status.Pod{
		"shop/web-0": {Name: "shop/web-0", State: status.StateHeld, Why: "PodDisruptionBudget web allows no disruption now (needs 2 healthy pods and has 2)"},
		"shop/batch-0": {Name: "shop/batch-0", State: status.StateLeavesLast,
			Why: "marked not to disrupt: evicted at " + deadline.Add(-32*time.Second).UTC().Format(time.RFC3339) + " (the deadline minus its 30 s grace period)"},
		"shop/warm-0": {Name: "shop/warm-0", State: status.StateLeavesLast,
			Why: "marked not to disrupt for a while: evicted at " + now.Add(30*time.Second).UTC().Format(time.RFC3339) + ", when its protection ends"},
		"shop/logs-x":     {Name: "shop/logs-x", State: status.StateStays, Why: string(drain.ReasonDaemonSet)},
		"shop/cart-0":     {Name: "shop/cart-0", State: status.StateToEvict},
		"shop/lifeboat-0": {Name: "shop/lifeboat-0", State: status.StateStays, Why: string(drain.ReasonOwnPod)},
	}
	if len(n.Pods) != len(want) {
		t.Errorf("pods %+v, want %d", n.Pods, len(want))
	}
	for _, p := range n.Pods {
		if p != want[p.Name] {
			t.Errorf("pod %+v, want %+v", p, want[p.Name])
		}
	}
	if len(n.Volumes) != 1 || n.Volumes[0] != "pv-db-0 (VolumeAttachment csi-db-0)" {
		t.Errorf("volumes %v", n.Volumes)
	}
	if len(n.Lifecycle) != 1 || n.Lifecycle[0].Group != "workers" || n.Lifecycle[0].Heartbeats != 1 {
		t.Errorf("lifecycle %+v", n.Lifecycle)
	}
	if want := []string{"10.0.0.7 in pods (healthy)", "i-0123456789abcdef0 in web (draining)"}; !slices.Equal(n.Targets, want) || n.TargetsUnknown != "" {
		t.Errorf("targets %q (%s), want %q", n.Targets, n.TargetsUnknown, want)
	}

	var table bytes.Buffer
	if err := status.Print(&table, report, status.FormatTable); err != nil {
		t.Fatal(err)
	}
	lineOf := func(key string) string {
		for _, l := range strings.Split(table.String(), "\n") {
			if strings.Contains(l, key) {
				return l
			}
		}
		return ""
	}
	for key, want := range map[string][]string{
		"drained by":    {"queue q (claimed by lifeboat-0/1), claimed or renewed 5s ago, another Lifeboat waiting since 25s ago"},
		"shop/web-0":    {"held", "PodDisruptionBudget web allows no disruption now (needs 2 healthy pods and has 2)"},
		"shop/batch-0":  {"leaves last"},
		"pv-db-0":       {"attached"},
		"workers/drain": {"1 heartbeat, last"},
		"in web":        {"target", "i-0123456789abcdef0 in web (draining)"},
	} {
		for _, w := range want {
			if !strings.Contains(lineOf(key), w) {
				t.Errorf("the table's line for %q lacks %q:\n%s", key, w, table.String())
			}
		}
	}
	var decoded status.Report
	var js bytes.Buffer
	if err := status.Print(&js, report, status.FormatJSON); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(js.Bytes(), &decoded); err != nil || len(decoded.Nodes) != 1 || len(decoded.Nodes[0].Pods) != 6 {
		t.Errorf("JSON does not round-trip (%v): %s", err, js.String())
	}
	var yml bytes.Buffer
	if err := status.Print(&yml, report, status.FormatYAML); err != nil || !strings.Contains(yml.String(), "state: held") {
		t.Errorf("YAML (%v): %s", err, yml.String())
	}
	if err := status.Print(&yml, report, "xml"); err == nil {
		t.Error("an unknown format was accepted")
	}
}
