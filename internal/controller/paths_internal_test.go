// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/cloud/controlleronly"
	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/episode"
	"lifeboat.dev/lifeboat/internal/events"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/nodecleanup"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/ownership"
	"lifeboat.dev/lifeboat/internal/record"
	"lifeboat.dev/lifeboat/internal/source/nodecondition"
	"lifeboat.dev/lifeboat/internal/wiring"
	"lifeboat.dev/lifeboat/test/sandbox"
	"lifeboat.dev/lifeboat/test/sandbox/fakeaws"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// gateWorld is the attack every path faces: a claimant Node, registered without a providerID,
// sets it with its own kubelet credential to the victim's instance. EC2 describes each
// instance as its own Node. Each path is then given a reason on the claimant's side (its
// condition, its Ready status, its own instance's notice, ...), and must act on neither Node
// for it, and say so.
type gateWorld struct {
	c                       *sandbox.Cluster
	fake                    *fakeaws.Server
	ctl                     *Controller
	warm                    *warm
	metrics                 *metrics.Metrics
	victim, claimant        *corev1.Node
	victimID, claimantOwnID string
	claimantClient          kubernetes.Interface
	logs                    *sandboxtest.LogBuffer
}

var gateTags = map[string]string{"aws-node-termination-handler/managed": "", "kubernetes.io/cluster/sandbox": "owned"}

func newGateWorld(t *testing.T, ctx context.Context, victimHasProviderID bool) *gateWorld {
	t.Helper()
	c, _ := sandboxtest.Shared(t, sandbox.ClusterOptions{})
	w := &gateWorld{c: c, fake: sandboxtest.FakeAWS(t, ""), metrics: metrics.New(), logs: &sandboxtest.LogBuffer{}}
	victimSpec, claimantSpec := sandbox.NodeSpec{Index: 1, NoProviderID: !victimHasProviderID}, sandbox.NodeSpec{Index: 2, NoProviderID: true}
	added, err := c.AddNodes(ctx, victimSpec, claimantSpec)
	if err != nil {
		t.Fatal(err)
	}
	w.victim, w.claimant = added[0], added[1]
	w.victimID = ownership.InstanceIDFromProviderID(victimSpec.ProviderID())
	w.claimantOwnID = ownership.InstanceIDFromProviderID(sandbox.NodeSpec{Index: 2}.ProviderID())
	w.fake.AddInstance(fakeaws.Instance{ID: w.victimID, PrivateDNSName: w.victim.Name, PrivateIP: "10.0.0.1", AutoScalingGroup: "workers", Tags: gateTags})
	w.fake.AddInstance(fakeaws.Instance{ID: w.claimantOwnID, PrivateDNSName: w.claimant.Name, PrivateIP: "10.0.0.2", AutoScalingGroup: "workers", Tags: gateTags})
	if err := c.EnsureNamespace(ctx, "shop"); err != nil {
		t.Fatal(err)
	}
	for _, n := range added {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "app-" + n.Name},
			Spec: corev1.PodSpec{NodeName: n.Name, Containers: []corev1.Container{{Name: "c", Image: "img"}}}}
		if _, err := c.Client.CoreV1().Pods("shop").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	rc, err := c.UserConfig("system:node:"+w.claimant.Name, "system:nodes")
	if err != nil {
		t.Fatal(err)
	}
	w.claimantClient = kubernetes.NewForConfigOrDie(rc)
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"providerID": "aws:///us-east-1a/" + w.victimID}})
	if _, err := w.claimantClient.CoreV1().Nodes().Patch(ctx, w.claimant.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("the claimant's node credential could not set its own providerID: %v", err)
	}

	useProviderID := "true"
	if !victimHasProviderID {
		useProviderID = "false"
	}
	cfg := sandboxtest.Config(t, config.ModeController, "ENABLE_SQS_TERMINATION_DRAINING", "true",
		"QUEUE_URL", "http://127.0.0.1:1/000000000000/lifeboat", "AWS_REGION", "us-east-1", "AWS_ENDPOINT", w.fake.URL(),
		"CLUSTER_NAME", "sandbox", "USE_PROVIDER_ID", useProviderID, "EMIT_KUBERNETES_EVENTS", "true",
		"ENABLE_NODE_REPAIR", "true", "NODE_REPAIR_CONDITIONS", "KernelReady=False:1s", "NODE_REPAIR_MAX_UNHEALTHY_PERCENT", "100",
		"DEAD_INSTANCE_FAST_PATH", "true", "DELETE_NODE_AFTER_TERMINATION", "true", "ABANDON_LIFECYCLE_ACTION_ON_INCOMPLETE_DRAIN", "true")
	recorder, stopEvents, err := events.New(c.Client, wiring.Events(cfg, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stopEvents)
	awsCfg := sandboxtest.AWSConfig(w.fake.URL())
	w.ctl = New(Options{Config: cfg, Client: c.Client, EC2: controlleronly.NewAWSEC2(awsCfg), AutoScaling: cloud.NewAWSAutoScaling(awsCfg),
		Logger: slog.New(slog.NewTextHandler(w.logs, nil)), Metrics: w.metrics, Handler: episode.Options{Events: recorder}})
	if w.warm, err = w.ctl.warmUp(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.warm.stop)
	w.waitInformer(t, ctx, func(n *corev1.Node) bool { return n.Name == w.claimant.Name && n.Spec.ProviderID != "" })
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("controller log:\n%s", w.logs.String())
		}
	})
	return w
}

// waitInformer waits until the controller's node informer holds a node cond accepts.
func (w *gateWorld) waitInformer(t *testing.T, ctx context.Context, cond func(*corev1.Node) bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		for _, o := range w.warm.nodes.GetStore().List() {
			if cond(o.(*corev1.Node)) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatal("the controller's node informer never saw the change")
	}
}

// claimantGoesDark stops the fake kubelet's reports for the claimant, which then reports
// Ready Unknown itself (as the node lifecycle controller would for a silent kubelet).
func (w *gateWorld) claimantGoesDark(t *testing.T, ctx context.Context) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		got, err := w.c.Client.CoreV1().Nodes().Get(ctx, w.claimant.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		delete(got.Annotations, sandbox.KwokNodeAnnotation)
		_, err = w.c.Client.CoreV1().Nodes().Update(ctx, got, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	w.updateClaimantStatus(t, ctx, func(n *corev1.Node) {
		setCondition(n, corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Reason: "NodeStatusUnknown",
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()})
	})
}

// updateClaimantStatus changes the claimant's status with its own kubelet credential.
func (w *gateWorld) updateClaimantStatus(t *testing.T, ctx context.Context, change func(*corev1.Node)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		got, err := w.claimantClient.CoreV1().Nodes().Get(ctx, w.claimant.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(got)
		_, err = w.claimantClient.CoreV1().Nodes().UpdateStatus(ctx, got, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func setCondition(n *corev1.Node, c corev1.NodeCondition) {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == c.Type {
			n.Status.Conditions[i] = c
			return
		}
	}
	n.Status.Conditions = append(n.Status.Conditions, c)
}

// cached is the node as the controller's informer holds it.
func (w *gateWorld) cached(t *testing.T, name string) *corev1.Node {
	t.Helper()
	obj, ok, err := w.warm.nodes.GetStore().GetByKey(name)
	if err != nil || !ok {
		t.Fatalf("node %s is not in the informer: %v", name, err)
	}
	return obj.(*corev1.Node)
}

// untouched fails the test when anything was done on n or its instance for the attack.
func (w *gateWorld) untouched(t *testing.T, ctx context.Context, n *corev1.Node, instance string) {
	t.Helper()
	got, err := w.c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		t.Errorf("node %s was deleted", n.Name)
		return
	} else if err != nil {
		t.Fatal(err)
	}
	if got.Spec.Unschedulable || got.Annotations[record.Annotation] != "" {
		t.Errorf("node %s was acted on: unschedulable %v, record %q", n.Name, got.Spec.Unschedulable, got.Annotations[record.Annotation])
	}
	if _, err := w.c.Client.CoreV1().Pods("shop").Get(ctx, "app-"+n.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("node %s's pod: %v", n.Name, err)
	}
	if marks, ends := w.fake.UnhealthyMarks(instance), w.fake.Terminations(instance); marks+ends > 0 {
		t.Errorf("instance %s of node %s: %d Unhealthy marks, %d terminations", instance, n.Name, marks, ends)
	}
}

// said waits for the refusal's Warning Event on the claimant and its count on path.
func (w *gateWorld) said(t *testing.T, ctx context.Context, path ownership.Path, reason string) {
	t.Helper()
	check := metrics.ClaimCheckEC2
	if path == ownership.PathInstanceMetadata {
		check = metrics.ClaimCheckInstanceMetadata
	}
	var events int
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 15*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := w.c.Client.CoreV1().Events("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		events = 0
		for _, e := range list.Items {
			if e.InvolvedObject.Name == w.claimant.Name && e.Reason == reason && e.Type == corev1.EventTypeWarning {
				events++
			}
		}
		return events > 0 && w.metrics.Value("lifeboat_instance_claims_refused_total", "check", check, "path", string(path)) > 0, nil
	})
	if err != nil {
		t.Errorf("the refusal on path %s was not said: %d %s Events on the claimant, lifeboat_instance_claims_refused_total{check=%s,path=%s} = %v",
			path, events, reason, check, path, w.metrics.Value("lifeboat_instance_claims_refused_total", "check", check, "path", string(path)))
	}
}

// attacks are the rows: each path given the claimant's reason. A path added to
// ownership.Paths without a row here fails the test.
var attacks = map[ownership.Path]func(t *testing.T, ctx context.Context, w *gateWorld) (eventReason string){
	// A Spot warning for the claimant's own instance: EC2 describes it as the claimant, whose
	// providerID names the victim's.
	ownership.PathQueue: func(t *testing.T, ctx context.Context, w *gateWorld) string {
		n := notice.Notice{ID: notice.ID(notice.SpotInterruption, w.claimantOwnID, ""), Kind: notice.SpotInterruption, Source: notice.SourceQueue,
			InstanceID: w.claimantOwnID, Deadline: time.Now().Add(2 * time.Minute)}
		if fate := w.ctl.notices.handleNotice(ctx, w.warm.resolver, n, w.ctl.log); fate == noticeRetry {
			t.Errorf("queue notice fate %v", fate)
		}
		return events.ReasonClaimRefused
	},
	// The claimant's agent: its instance metadata names its own instance.
	ownership.PathInstanceMetadata: func(t *testing.T, ctx context.Context, w *gateWorld) string {
		n := notice.Notice{ID: notice.ID(notice.SpotInterruption, w.claimantOwnID, ""), Kind: notice.SpotInterruption, Source: notice.SourceIMDS,
			InstanceID: w.claimantOwnID, Deadline: time.Now().Add(2 * time.Minute)}
		if err := w.ctl.handler.Intake(ctx, n, w.claimant.Name, nil); !errors.Is(err, episode.ErrNotOurs) {
			t.Errorf("the agent's intake on the claimant: %v, want ErrNotOurs", err)
		}
		return events.ReasonClaimRefused
	},
	// The status poll finds the claimant's own instance impaired.
	ownership.PathStatusPoll: func(t *testing.T, ctx context.Context, w *gateWorld) string {
		n := notice.Notice{ID: notice.ID(notice.InstanceImpaired, w.claimantOwnID, ""), Kind: notice.InstanceImpaired, Source: notice.SourceEC2Status,
			InstanceID: w.claimantOwnID}
		w.ctl.notices.handleNotice(ctx, w.warm.resolver, n, w.ctl.log)
		return events.ReasonClaimRefused
	},
	// The claimant reports KernelReady=False for an hour on its own status (no veto anywhere:
	// the gate alone protects the victim).
	ownership.PathNodeCondition: func(t *testing.T, ctx context.Context, w *gateWorld) string {
		w.updateClaimantStatus(t, ctx, func(n *corev1.Node) {
			setCondition(n, corev1.NodeCondition{Type: "KernelReady", Status: corev1.ConditionFalse, Reason: "Forged",
				LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.NewTime(time.Now().Add(-time.Hour))})
		})
		w.waitInformer(t, ctx, func(n *corev1.Node) bool {
			return n.Name == w.claimant.Name && nodecondition.Unhealthy(n, w.ctl.cfg.RepairPolicies())
		})
		watcher, err := nodecondition.New(nodecondition.Options{Nodes: w.warm.nodes, Policies: w.ctl.cfg.RepairPolicies(), DrainTimeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		n, due, _ := watcher.Evaluate(w.cached(t, w.claimant.Name))
		if !due || n.Node != w.claimant.Name {
			t.Fatalf("the claimant's condition made no repair notice read from it: %+v, due %v", n, due)
		}
		w.ctl.notices.handleNotice(ctx, w.warm.resolver, n, w.ctl.log)
		return events.ReasonClaimRefused
	},
	// The claimant goes Ready Unknown, and the instance it names is stopped.
	ownership.PathDeadInstance: func(t *testing.T, ctx context.Context, w *gateWorld) string {
		w.fake.SetInstanceState(w.victimID, "stopped")
		w.claimantGoesDark(t, ctx)
		fresh, err := w.c.Client.CoreV1().Nodes().Get(ctx, w.claimant.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		dead := deadInstances{ec2: w.ctl.ec2, claims: w.ctl.claimReports(), log: w.ctl.log}
		if why := dead.Dead(ctx, fresh); why != "" {
			t.Errorf("the claimant was taken for dead: %s", why)
		}
		return events.ReasonClaimRefused
	},
	// The claimant's kubelet stops, and the instance it names is terminated. The victim's
	// kubelet still runs: clean-up has no reason to look at it.
	ownership.PathNodeCleanup: func(t *testing.T, ctx context.Context, w *gateWorld) string {
		w.fake.SetInstanceState(w.victimID, "terminated")
		w.claimantGoesDark(t, ctx)
		w.waitInformer(t, ctx, func(n *corev1.Node) bool {
			return n.Name == w.claimant.Name && readyStatus(n) == corev1.ConditionUnknown
		})
		cl := &nodecleanup.Cleaner{Client: w.c.Client, EC2: w.ctl.ec2, Nodes: w.warm.nodes.GetStore(), Log: w.ctl.log, Report: cleanupReports{c: w.ctl}}
		if err := cl.Pass(ctx); err != nil {
			t.Fatal(err)
		}
		return events.ReasonNodeDeleteRefused
	},
	// Auto Scaling retains the claimant's own instance: its Node still runs a pod.
	ownership.PathRetainedSweep: func(t *testing.T, ctx context.Context, w *gateWorld) string {
		s := &retainedSweep{c: w.ctl, resolver: w.warm.resolver, api: w.ctl.asg.(cloud.Retention), log: w.ctl.log, reported: map[string]bool{}}
		s.one(ctx, cloud.RetainedInstance{ID: w.claimantOwnID, Group: "workers"})
		if got := w.fake.CallCount("autoscaling", "TerminateInstanceInAutoScalingGroup"); got != 0 {
			t.Errorf("the retained instance was terminated (%d calls) while its node runs a pod", got)
		}
		return events.ReasonClaimRefused
	},
	// A Capacity Block that holds the claimant's own instance ends.
	ownership.PathCapacityBlock: func(t *testing.T, ctx context.Context, w *gateWorld) string {
		w.fake.RemoveInstance(w.claimantOwnID)
		w.fake.AddInstance(fakeaws.Instance{ID: w.claimantOwnID, PrivateDNSName: w.claimant.Name, PrivateIP: "10.0.0.2", AutoScalingGroup: "workers",
			Tags: gateTags, CapacityReservationID: "cr-0123456789abcdef0"})
		mine, ok := w.ctl.messages.blockInstances(ctx, w.warm.resolver, "cr-0123456789abcdef0", w.ctl.log)
		if !ok || len(mine.instances) != 0 {
			t.Errorf("the block's instances taken as this cluster's: %+v (ok %v)", mine, ok)
		}
		return events.ReasonClaimRefused
	},
}

// forgedState are attacks through what Lifeboat writes on a Node itself, which the node's own
// credential can write too: each travels a path of ownership.Paths, and faces its gate.
var forgedState = map[string]struct {
	path   ownership.Path
	attack func(t *testing.T, ctx context.Context, w *gateWorld) (eventReason string)
}{
	// The claimant's repair state says a reboot of its instance failed (so that the repair
	// replaces at once, skipping the reboot) and that its repair started a day from now (so
	// that NODE_REPAIR_MAX_PER_HOUR would hold every other node's repair for ever). The
	// replacement it asks for meets the gate; the start is not counted.
	"node-repair-state": {ownership.PathNodeCondition, func(t *testing.T, ctx context.Context, w *gateWorld) string {
		taken := w.runRepairWatch(t, ctx, func(n *corev1.Node) {
			n.Annotations[record.AnnotationRepair] = fmt.Sprintf(`{"started":%q,"reboot":{"condition":"KernelReady","taken":%q,"failed":"forged"}}`,
				time.Now().Add(24*time.Hour).UTC().Format(time.RFC3339), time.Now().Add(-time.Hour).UTC().Format(time.RFC3339))
		})
		if len(taken) == 0 || taken[0].Action != config.PolicyReplace {
			t.Errorf("repair offered %+v, want the claimant's replacement (its forged failed reboot)", taken)
		}
		if got := w.metrics.Value("lifeboat_node_repair_breaker_open", "cause", nodecondition.CauseMaxPerHour); got != 0 {
			t.Errorf("a start forged a day ahead holds the repairs: lifeboat_node_repair_breaker_open{cause=max_per_hour} = %v", got)
		}
		return events.ReasonClaimRefused
	}},
}

// runRepairWatch writes forge on the claimant with its own credential, with KernelReady
// False for an hour under a policy that reboots first, and runs node repair's watch (one
// repair an hour at most) until the claimant's repair has been offered and taken; it returns
// what was offered.
func (w *gateWorld) runRepairWatch(t *testing.T, ctx context.Context, forge func(*corev1.Node)) []notice.Notice {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		got, err := w.claimantClient.CoreV1().Nodes().Get(ctx, w.claimant.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		forge(got)
		_, err = w.claimantClient.CoreV1().Nodes().Update(ctx, got, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("the claimant's credential could not write its own annotations: %v", err)
	}
	w.updateClaimantStatus(t, ctx, func(n *corev1.Node) {
		setCondition(n, corev1.NodeCondition{Type: "KernelReady", Status: corev1.ConditionFalse, Reason: "Forged",
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.NewTime(time.Now().Add(-time.Hour))})
	})
	policies := config.RepairPolicies{{Condition: "KernelReady", Status: "False", Wait: time.Second, Action: config.PolicyReboot}}
	w.waitInformer(t, ctx, func(n *corev1.Node) bool {
		return n.Name == w.claimant.Name && nodecondition.Unhealthy(n, policies) && n.Annotations[record.AnnotationRepair] != ""
	})
	watcher, err := nodecondition.New(nodecondition.Options{Nodes: w.warm.nodes, Policies: policies, DrainTimeout: time.Minute, Logger: w.ctl.log,
		Limits: nodecondition.Limits{MaxUnhealthyPercent: 100, MaxPerHour: 1}, Report: &repairReports{c: w.ctl, log: w.ctl.log}, RebootWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var offered []notice.Notice
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- watcher.Run(runCtx, func(ctx context.Context, ns []notice.Notice) []nodecondition.Fate {
			fates := takeRepairNotices(ctx, w.ctl, w.warm.resolver, ns, w.ctl.log)
			mu.Lock()
			offered = append(offered, ns...)
			mu.Unlock()
			return fates
		})
	}()
	defer func() { stop(); <-done }()
	_ = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 15*time.Second, true, func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return len(offered) > 0, nil
	})
	mu.Lock()
	defer mu.Unlock()
	return slices.Clone(offered)
}

// TestEveryPathRefusesAForgedClaim: every path that acts on an instance or a Node passes the
// one gate. Given the claimant's reason, none acts on the victim or on the claimant, and each
// refusal is said: a Warning Event on the claimant, the metric by path, a log line.
func TestEveryPathRefusesAForgedClaim(t *testing.T) {
	for _, p := range ownership.Paths {
		if attacks[p] == nil {
			t.Errorf("path %s (ownership.Paths) has no row here: every path faces the forged claim", p)
		}
	}
	for p := range attacks {
		if !slices.Contains(ownership.Paths, p) {
			t.Errorf("row %s is not a path of ownership.Paths", p)
		}
	}
	for _, victimHasProviderID := range []bool{true, false} {
		name := "victim names its instance"
		if !victimHasProviderID {
			name = "victim has no providerID"
		}
		t.Run(name, func(t *testing.T) {
			for _, p := range ownership.Paths {
				if attacks[p] == nil {
					continue
				}
				t.Run(string(p), func(t *testing.T) {
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					defer cancel()
					w := newGateWorld(t, ctx, victimHasProviderID)
					reason := attacks[p](t, ctx, w)
					w.said(t, ctx, p, reason)
					w.untouched(t, ctx, w.victim, w.victimID)
					w.untouched(t, ctx, w.claimant, w.claimantOwnID)
				})
			}
			for name, f := range forgedState {
				t.Run(name, func(t *testing.T) {
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					defer cancel()
					w := newGateWorld(t, ctx, victimHasProviderID)
					reason := f.attack(t, ctx, w)
					w.said(t, ctx, f.path, reason)
					w.untouched(t, ctx, w.victim, w.victimID)
					w.untouched(t, ctx, w.claimant, w.claimantOwnID)
				})
			}
		})
	}
}
