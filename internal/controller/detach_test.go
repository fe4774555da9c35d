// SPDX-License-Identifier: Apache-2.0

package controller_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/controller"
	"lifeboat.dev/lifeboat/internal/daemon"
	"lifeboat.dev/lifeboat/internal/events"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/record"
	"lifeboat.dev/lifeboat/test/sandbox"
	"lifeboat.dev/lifeboat/test/sandbox/fakeaws"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// statefulPod adds pod db-0 on the node with claim data-db-0 bound to volume pv-db-0, and the
// VolumeAttachment of that volume to the node (the CSI attacher's), and returns the pod once
// it has an IP.
func statefulPod(t *testing.T, ctx context.Context, w *operateWorld) *corev1.Pod {
	t.Helper()
	client := w.c.Client
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-db-0"}, Spec: corev1.PersistentVolumeSpec{
		Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
		AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data"}},
		ClaimRef:               &corev1.ObjectReference{Namespace: "shop", Name: "data-db-0"},
	}}
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "data-db-0"}, Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, VolumeName: "pv-db-0",
		Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
	}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "db-0"}, Spec: corev1.PodSpec{
		NodeName:   w.node.Name,
		Containers: []corev1.Container{{Name: "c", Image: "img"}},
		Volumes:    []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-db-0"}}}},
	}}
	pvName := "pv-db-0"
	va := &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: "csi-db-0"}, Spec: storagev1.VolumeAttachmentSpec{
		Attacher: "ebs.csi.aws.com", NodeName: w.node.Name, Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &pvName},
	}}
	if _, err := client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().PersistentVolumeClaims("shop").Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.StorageV1().VolumeAttachments().Create(ctx, va, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Pods("shop").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		pod, _ = client.CoreV1().Pods("shop").Get(ctx, "db-0", metav1.GetOptions{})
		return pod != nil && pod.Status.PodIP != "", nil
	})
	if err != nil {
		t.Fatalf("pod db-0 got no IP: %v", err)
	}
	return pod
}

// detachWhenGone deletes the VolumeAttachment csi-db-0 after the pod db-0 is gone, and
// deregisters its IP from the group, as the attach/detach controller and the AWS Load
// Balancer Controller would; it returns when each happened.
func detachWhenGone(t *testing.T, ctx context.Context, w *operateWorld, podIP, ipGroup string, after time.Duration) (detached, deregistered func() time.Time) {
	var mu sync.Mutex
	var detachedAt, deregisteredAt time.Time
	go func() {
		err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			_, err := w.c.Client.CoreV1().Pods("shop").Get(ctx, "db-0", metav1.GetOptions{})
			return err != nil, nil
		})
		if err != nil {
			return
		}
		w.fake.DeregisterTarget(ipGroup, podIP)
		mu.Lock()
		deregisteredAt = time.Now()
		mu.Unlock()
		time.Sleep(after)
		if err := w.c.Client.StorageV1().VolumeAttachments().Delete(ctx, "csi-db-0", metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete the VolumeAttachment: %v", err)
		}
		mu.Lock()
		detachedAt = time.Now()
		mu.Unlock()
	}()
	get := func(at *time.Time) func() time.Time {
		return func() time.Time { mu.Lock(); defer mu.Unlock(); return *at }
	}
	return get(&detachedAt), get(&deregisteredAt)
}

// runWithDetachWaits runs a controller whose handler has the waits the configuration turns on,
// built as the binary builds them.
func runWithDetachWaits(t *testing.T, ctx context.Context, w *operateWorld, cfg *config.Config, m *metrics.Metrics) {
	w.run(t, ctx, cfg, "lifeboat", m, func(o *controller.Options) {
		o.Handler.DetachWaits = daemon.DetachWaits(ctx, cfg, config.ModeController, w.c.Client, m, slog.New(slog.NewTextHandler(w.logs, nil)))
	})
}

// TestDetachWhenSafe: a terminate hook on a node whose stateful pod uses a volume, whose
// instance is in an instance target group and whose pod's IP is in an IP target group. The
// lifecycle action is completed once, and only after the volume is detached and both targets
// have left "draining".
func TestDetachWhenSafe(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := newOperateWorld(t, ctx, sandbox.ClusterOptions{})
	pod := statefulPod(t, ctx, w)
	web := w.fake.AddTargetGroup(fakeaws.TargetGroup{Name: "web", DeregistrationDelay: 20 * time.Second})
	pods := w.fake.AddTargetGroup(fakeaws.TargetGroup{Name: "db", TargetType: "ip", DeregistrationDelay: 10 * time.Second})
	if err := w.fake.RegisterTarget(web, w.instance, 80); err != nil {
		t.Fatal(err)
	}
	if err := w.fake.RegisterTarget(pods, pod.Status.PodIP, 5432); err != nil {
		t.Fatal(err)
	}
	detached, podDeregistered := detachWhenGone(t, ctx, w, pod.Status.PodIP, pods, 3*time.Second)

	cfg := sandboxtest.Config(t, config.ModeController, "ENABLE_SQS_TERMINATION_DRAINING", "true", "QUEUE_URL", w.queueURL,
		"AWS_REGION", "us-east-1", "AWS_ENDPOINT", w.fake.URL(), "CLUSTER_NAME", "sandbox", "SQS_MSG_VISIBILITY_TIMEOUT_SEC", "5",
		"EMIT_KUBERNETES_EVENTS", "true")
	m := metrics.New()
	// The Auto Scaling group deregisters the instance from its target group as it begins
	// terminating it.
	w.fake.DeregisterTarget(web, w.instance)
	instanceDeregistered := time.Now()
	w.send(t, ctx, hookMessage(w.instance, "token-1"))
	runWithDetachWaits(t, ctx, w, cfg, m)

	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 90*time.Second, true, func(context.Context) (bool, error) {
		_, completed, _, _ := w.fake.LifecycleAction("token-1")
		return completed, nil
	})
	if err != nil {
		t.Fatalf("lifecycle action not completed: %v", err)
	}
	var completedAt time.Time
	for _, c := range w.fake.Calls() {
		if c.Action == "CompleteLifecycleAction" {
			completedAt = c.At
		}
	}
	time.Sleep(2 * time.Second) // a second completion would show by now
	if n := w.fake.CallCount("autoscaling", "CompleteLifecycleAction"); n != 1 {
		t.Errorf("%d CompleteLifecycleAction calls, want 1", n)
	}
	if d := detached(); d.IsZero() || completedAt.Before(d) {
		t.Errorf("completed at %s, before the volume was detached (%s)", completedAt.Format(time.StampMilli), d.Format(time.StampMilli))
	}
	if gone := instanceDeregistered.Add(20 * time.Second); completedAt.Before(gone) {
		t.Errorf("completed %s after the instance's deregistration, before its 20 s delay ended", completedAt.Sub(instanceDeregistered))
	}
	if d := podDeregistered(); d.IsZero() || completedAt.Before(d.Add(10*time.Second)) {
		t.Errorf("completed at %s, before the pod IP's 10 s deregistration delay (from %s) ended", completedAt.Format(time.StampMilli), d.Format(time.StampMilli))
	}
	t.Logf("completed %.1f s after the instance's deregistration (delay 20 s), %.1f s after the volume detached",
		completedAt.Sub(instanceDeregistered).Seconds(), completedAt.Sub(detached()).Seconds())
	for _, wait := range []string{"volumes", "targets"} {
		if n := m.Value("lifeboat_handback_wait_seconds", "wait", wait, "outcome", "released"); n != 1 {
			t.Errorf("lifeboat_handback_wait_seconds{wait=%q,outcome=released} counts %v, want 1", wait, n)
		}
	}
	if got := w.nodeEvents(t, ctx); got[events.ReasonDetachWaited] != 2 || got[events.ReasonDetachWaitCut] != 0 {
		t.Errorf("Events: %v; want 2 %s (volumes, targets) and no %s", got, events.ReasonDetachWaited, events.ReasonDetachWaitCut)
	}
	// `kubectl describe node` tells the episode in the order it happened.
	story, err := sandbox.NodeEvents(ctx, w.c.Client, w.node.Name)
	if err != nil {
		t.Fatal(err)
	}
	var reasons []string
	for _, e := range story {
		if e.Source.Component == events.Component {
			reasons = append(reasons, e.Reason)
		}
	}
	want := []string{events.ReasonASGLifecycle, events.ReasonCordon, events.ReasonDrainStarted, events.ReasonDrained,
		events.ReasonDetachWaited, events.ReasonDetachWaited, events.ReasonLifecycleCompleted}
	if !slices.Equal(reasons, want) {
		t.Errorf("the node's Events, oldest first: %v; want %v", reasons, want)
	}
}

// TestDetachWaitCutByTheDeadline: a Spot warning that leaves no time for a 300 s
// deregistration delay: the wait ends at the deadline and says so (log, Event, metric).
func TestDetachWaitCutByTheDeadline(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := newOperateWorld(t, ctx, sandbox.ClusterOptions{})
	web := w.fake.AddTargetGroup(fakeaws.TargetGroup{Name: "web"}) // 300 s, AWS's default
	if err := w.fake.RegisterTarget(web, w.instance, 80); err != nil {
		t.Fatal(err)
	}
	w.fake.DeregisterTarget(web, w.instance)
	cfg := sandboxtest.Config(t, config.ModeController, "ENABLE_SQS_TERMINATION_DRAINING", "true", "QUEUE_URL", w.queueURL,
		"AWS_REGION", "us-east-1", "AWS_ENDPOINT", w.fake.URL(), "CLUSTER_NAME", "sandbox", "SQS_MSG_VISIBILITY_TIMEOUT_SEC", "5",
		"EMIT_KUBERNETES_EVENTS", "true")
	m := metrics.New()
	// Sent 100 s after the warning: 20 s of its two minutes are left (the drain takes at
	// least 30 s from now as its budget).
	sent := time.Now()
	w.send(t, ctx, fmt.Sprintf(`{"version":"0","id":"e-late","detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","account":"000000000000","time":"%s","region":"us-east-1","resources":[],"detail":{"instance-id":"%s","instance-action":"terminate"}}`,
		sent.Add(-100*time.Second).UTC().Format(time.RFC3339), w.instance))
	runWithDetachWaits(t, ctx, w, cfg, m)

	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		return m.Value("lifeboat_handback_wait_seconds", "wait", "targets", "outcome", "cut") == 1, nil
	})
	if err != nil {
		t.Fatalf("the target wait was not cut: %v", err)
	}
	if took := time.Since(sent); took > 40*time.Second {
		t.Errorf("the wait ended %s after the notice, past its deadline (about 30 s)", took)
	}
	if state, _ := w.fake.TargetState(web, w.instance); state != "draining" {
		t.Errorf("target state %q; the test expects it still draining", state)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return w.nodeEvents(t, ctx)[events.ReasonDetachWaitCut] == 1, nil
	})
	if err != nil {
		t.Errorf("no %s Event: %v (Events %v)", events.ReasonDetachWaitCut, err, w.nodeEvents(t, ctx))
	}
	if !strings.Contains(w.logs.String(), "handback wait cut by the deadline") {
		t.Errorf("the log does not say the wait was cut")
	}
}

// TestDetachWaitsSurviveARestart: the controller stops while the hand-back waits for a
// volume; the next one (whose own drain finds the node empty) waits for that volume too,
// from the node's record, and completes the lifecycle action once, after it detached.
func TestDetachWaitsSurviveARestart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := newOperateWorld(t, ctx, sandbox.ClusterOptions{})
	statefulPod(t, ctx, w)
	cfg := sandboxtest.Config(t, config.ModeController, "ENABLE_SQS_TERMINATION_DRAINING", "true", "QUEUE_URL", w.queueURL,
		"AWS_REGION", "us-east-1", "AWS_ENDPOINT", w.fake.URL(), "CLUSTER_NAME", "sandbox", "SQS_MSG_VISIBILITY_TIMEOUT_SEC", "5",
		"EMIT_KUBERNETES_EVENTS", "true")
	start := func(m *metrics.Metrics) (stop func()) {
		return startController(t, ctx, w.c, w.awsCfg, w.queue, cfg, "lifeboat", m, w.logs, func(o *controller.Options) {
			o.Handler.DetachWaits = daemon.DetachWaits(ctx, cfg, config.ModeController, w.c.Client, m, slog.New(slog.NewTextHandler(w.logs, nil)))
		})
	}
	w.send(t, ctx, hookMessage(w.instance, "token-1"))
	stopFirst := start(metrics.New())
	recorded := func() *record.Detach {
		n, err := w.c.Client.CoreV1().Nodes().Get(ctx, w.node.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		r, _ := record.Read(n)
		return r.Detach
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return recorded() != nil, nil
	})
	if err != nil {
		t.Fatalf("the hand-back's claims were never recorded: %v", err)
	}
	if got := recorded().Claims; len(got) != 1 || got[0] != "shop/data-db-0" {
		t.Errorf("recorded claims %v, want [shop/data-db-0]", got)
	}
	stopFirst()
	if _, completed, _, _ := w.fake.LifecycleAction("token-1"); completed {
		t.Fatal("the lifecycle action was completed while the volume was still attached")
	}

	m := metrics.New()
	start(m)
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return m.Value("lifeboat_drain_claims_total", "event", metrics.ClaimClaimed) >= 1 && recorded() != nil, nil
	})
	if err != nil {
		t.Fatal("the second controller never took the episode over")
	}
	if _, completed, _, _ := w.fake.LifecycleAction("token-1"); completed {
		t.Fatal("after the restart the lifecycle action was completed while the volume was still attached")
	}
	detachedAt := time.Now()
	if err := w.c.Client.StorageV1().VolumeAttachments().Delete(ctx, "csi-db-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		_, completed, _, _ := w.fake.LifecycleAction("token-1")
		return completed, nil
	})
	if err != nil {
		t.Fatalf("lifecycle action not completed after the volume detached: %v", err)
	}
	for _, c := range w.fake.Calls() {
		if c.Action == "CompleteLifecycleAction" && c.At.Before(detachedAt) {
			t.Errorf("completed at %s, before the volume detached (%s)", c.At.Format(time.StampMilli), detachedAt.Format(time.StampMilli))
		}
	}
	if n := w.fake.CallCount("autoscaling", "CompleteLifecycleAction"); n != 1 {
		t.Errorf("%d CompleteLifecycleAction calls, want 1", n)
	}
	if n := m.Value("lifeboat_handback_wait_seconds", "wait", "volumes", "outcome", "released"); n != 1 {
		t.Errorf("the second controller's volume wait: released %v times, want 1", n)
	}
	// The record is written once the action is completed: wait for that write.
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return recorded() == nil, nil
	}); err != nil {
		t.Errorf("the record still holds %+v after the hand-back", recorded())
	}
}
