// SPDX-License-Identifier: Apache-2.0

package episode

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/record"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

const (
	agentOrigin = "imds"
	queueOrigin = "queue https://sqs.us-east-1.amazonaws.com/123456789012/lifeboat"
)

// ownedNode is a cordoned node whose record holds the notices' intents (taken from
// queueOrigin) and an agent's rebalance recommendation, in the given phase, owned by owner.
func ownedNode(t *testing.T, phase record.Phase, owner *record.Owner, ns ...notice.Notice) *corev1.Node {
	t.Helper()
	rec := record.Record{Version: record.Version, BootID: "b1", Phase: phase, Owner: owner}
	for _, n := range ns {
		rec.Notices = append(rec.Notices, n.ID)
		rec.Intents = append(rec.Intents, record.IntentOf(n, queueOrigin))
	}
	rebalance := notice.Notice{ID: "rebalance-i-0123456789abcdef0", Kind: notice.Rebalance, Source: notice.SourceIMDS, InstanceID: "i-0123456789abcdef0"}
	rec.Notices = append(rec.Notices, rebalance.ID)
	rec.Intents = append(rec.Intents, record.IntentOf(rebalance, agentOrigin))
	if phase == record.PhaseDrained {
		rec.Finished = append(rec.Finished, rebalance.ID)
	}
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", ResourceVersion: "1", Annotations: map[string]string{record.Annotation: string(b)}},
		Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-0123456789abcdef0", Unschedulable: true}}
	node.Status.NodeInfo.BootID = "b1"
	return node
}

// queuedSpot is a Spot warning from the queue for ownedNode's instance, two minutes ahead.
func queuedSpot() notice.Notice {
	inst := "i-0123456789abcdef0"
	return notice.Notice{ID: notice.ID(notice.SpotInterruption, inst, "terminate"), Kind: notice.SpotInterruption, Source: notice.SourceQueue,
		InstanceID: inst, Deadline: time.Now().Add(2 * time.Minute)}
}

// One Lifeboat drains a node: a process waits while another origin's owner renews its claim,
// takes over a lapsed claim or its own origin's (a restarted process), and after another's
// drain only finishes its own notices.
func TestOwnership(t *testing.T) {
	spot := queuedSpot()
	now := time.Now().UTC().Truncate(time.Second)
	for _, tc := range []struct {
		name        string
		phase       record.Phase
		owner       *record.Owner
		wantWait    bool // Reconcile asks to be called again, having drained nothing
		wantContest bool // and it recorded that it waits (its only write)
		wantLists   int
	}{
		{"another origin drains, contested", record.PhaseDraining, &record.Owner{Origin: agentOrigin, Holder: "agent-x", Renewed: now.Add(-40 * time.Second), Contested: now.Add(-10 * time.Second)}, true, false, 0},
		// An owner that follows its node renews only once contested: a claim renewed long
		// ago holds a lease from the contest on.
		{"another origin drains, not contested yet", record.PhaseDraining, &record.Owner{Origin: agentOrigin, Holder: "agent-x", Renewed: now.Add(-10 * time.Minute)}, true, true, 0},
		{"another origin's claim lapsed after the contest", record.PhaseDraining, &record.Owner{Origin: agentOrigin, Holder: "agent-x", Renewed: now.Add(-10 * time.Minute), Contested: now.Add(-OwnerLease - time.Second)}, false, false, 1},
		{"another origin's claim lapsed after its renewal", record.PhaseDraining, &record.Owner{Origin: agentOrigin, Holder: "agent-x", Renewed: now.Add(-OwnerLease - time.Second), Contested: now.Add(-5 * time.Minute)}, false, false, 1},
		{"own origin's predecessor", record.PhaseDraining, &record.Owner{Origin: queueOrigin, Holder: "old-leader", Renewed: now}, false, false, 1},
		{"no owner", record.PhaseDraining, nil, false, false, 1},
		// A claim left by an origin none of whose notices is open holds nothing.
		{"an owner without open notices", record.PhaseDraining, &record.Owner{Origin: "queue https://sqs.eu-west-1.amazonaws.com/123456789012/other", Renewed: now}, false, false, 1},
		{"another origin drained it", record.PhaseDrained, nil, false, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			client := fake.NewSimpleClientset(ownedNode(t, tc.phase, tc.owner, spot))
			h := NewHandler(sandboxtest.Config(t, ""), client, slog.New(slog.DiscardHandler), Options{Origin: queueOrigin})
			node, _ := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
			wait, err := h.Reconcile(ctx, node)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
			r, _ := record.Read(got)
			if lists := podLists(client); lists != tc.wantLists {
				t.Errorf("%d drains, want %d", lists, tc.wantLists)
			}
			if tc.wantWait {
				if wait <= 0 || wait > ownerPoll {
					t.Errorf("wait %v, want a look again within %v", wait, ownerPoll)
				}
				want := *tc.owner
				if tc.wantContest {
					if r.Owner == nil || time.Since(r.Owner.Contested) > 2*time.Second {
						t.Fatalf("the claim was not contested: %+v", r.Owner)
					}
					want.Contested = r.Owner.Contested
				}
				// The test's two reads, and no request by Reconcile but the contest's read
				// and write: a wait is decided on the copy it was given.
				requests := len(client.Actions()) - 2
				if r.Owner == nil || *r.Owner != want || r.Phase != record.PhaseDraining || requests != map[bool]int{false: 0, true: 2}[tc.wantContest] {
					t.Errorf("the owner's episode was touched (%d requests): %+v, owner %+v", requests, r, r.Owner)
				}
				return
			}
			if wait != 0 || r.Phase != record.PhaseDrained || !r.WorkDone(spot.ID, true) || r.Owner != nil {
				t.Errorf("wait %v, record %+v: want the notice finished and the claim given up", wait, r)
			}
		})
	}
}

// The write that takes a notice whose drain follows at once claims the drain (no write more);
// a notice taken by another origin meanwhile leaves the claim as it is, and a scheduled
// drain days ahead claims nothing yet.
func TestIntakeClaims(t *testing.T) {
	ctx := context.Background()
	inst := "i-0123456789abcdef0"
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", ResourceVersion: "1"},
		Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/" + inst}}
	client := fake.NewSimpleClientset(node)
	newHandler := func(origin string) *Handler {
		return NewHandler(sandboxtest.Config(t, ""), client, slog.New(slog.DiscardHandler), Options{Origin: origin})
	}
	agent, controller := newHandler(agentOrigin), newHandler(queueOrigin)
	owner := func() *record.Owner {
		got, _ := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
		r, _ := record.Read(got)
		return r.Owner
	}

	scheduled := notice.Notice{ID: notice.ID(notice.ScheduledMaintenance, inst, "e1"), Kind: notice.ScheduledMaintenance, Source: notice.SourceQueue,
		InstanceID: inst, Deadline: time.Now().Add(72 * time.Hour), StartTime: time.Now().Add(72 * time.Hour)}
	if err := controller.Intake(ctx, scheduled, "n1", nil); err != nil {
		t.Fatal(err)
	}
	if o := owner(); o != nil {
		t.Errorf("a drain days ahead claimed: %+v", o)
	}
	rebalance := notice.Notice{ID: notice.ID(notice.Rebalance, inst, ""), Kind: notice.Rebalance, Source: notice.SourceIMDS,
		InstanceID: inst, Deadline: time.Now().Add(10 * time.Minute)}
	agent.cfg.EnableRebalanceDraining = true
	if err := agent.Intake(ctx, rebalance, "n1", nil); err != nil {
		t.Fatal(err)
	}
	if o := owner(); o == nil || o.Origin != agentOrigin || o.Holder == "" || time.Since(o.Renewed) > 2*time.Second {
		t.Fatalf("owner after the agent's rebalance %+v, want the agent, just now", o)
	}
	spot := notice.Notice{ID: notice.ID(notice.SpotInterruption, inst, "terminate"), Kind: notice.SpotInterruption, Source: notice.SourceQueue,
		InstanceID: inst, Deadline: time.Now().Add(2 * time.Minute)}
	if err := controller.Intake(ctx, spot, "n1", nil); err != nil {
		t.Fatal(err)
	}
	if o := owner(); o == nil || o.Origin != agentOrigin {
		t.Errorf("owner after the controller's Spot notice %+v, want the agent's claim kept", o)
	}
	writes := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == "patch" && a.GetSubresource() == "" { // the condition's writes go on the status, in the background
			writes++
		}
	}
	if writes != 3 {
		t.Errorf("%d writes for three notices, want one each", writes)
	}
}

// A renewal keeps the claim and brings the running drain forward to an earlier deadline
// another Lifeboat recorded; one that finds the claim taken stops the drain.
func TestKeepOwnership(t *testing.T) {
	inst := "i-0123456789abcdef0"
	spot := notice.Notice{ID: notice.ID(notice.SpotInterruption, inst, "terminate"), Kind: notice.SpotInterruption, Source: notice.SourceQueue,
		InstanceID: inst, Deadline: time.Now().Add(90 * time.Second)}
	ctx := context.Background()
	client := fake.NewSimpleClientset(ownedNode(t, record.PhaseDraining, &record.Owner{Origin: queueOrigin, Renewed: time.Now().UTC()}, spot))
	h := NewHandler(sandboxtest.Config(t, ""), client, slog.New(slog.DiscardHandler), Options{Origin: queueOrigin})
	h.claims.renewEvery = 50 * time.Millisecond
	running := drain.NewDeadline(time.Now().Add(time.Hour))
	start, _ := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	client.ClearActions()
	owning, stop := h.claims.keep(ctx, start, running, h.log)
	defer stop()

	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return !running.Time().After(spot.Deadline), nil
	})
	if err != nil {
		t.Errorf("the running drain ends at %v, want the recorded %v", running.Time(), spot.Deadline)
	}
	if owning.Err() != nil {
		t.Fatal("the claim was lost on a renewal")
	}
	// A renewal writes the time even when the claim is fresh: another origin measures the
	// lease from it.
	// Each renewal patches from the node the last one wrote: no read while nobody else
	// writes the node.
	patches, reads := 0, 0
	for _, a := range client.Actions() {
		switch a.GetVerb() {
		case "patch":
			patches++
		case "get":
			reads++
		}
	}
	if patches == 0 {
		t.Error("the renewals wrote nothing")
	}
	if reads > 0 {
		t.Errorf("the renewals read the node %d times on %d patches, want no read", reads, patches)
	}

	// Another origin takes the claim over (this process looked dead to it).
	got, _ := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	r, _ := record.Read(got)
	r.Owner = &record.Owner{Origin: agentOrigin, Renewed: time.Now().UTC()}
	record.Write(got, r)
	if _, err := client.CoreV1().Nodes().Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-owning.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the drain goes on after another Lifeboat took the claim over")
	}
	got, _ = client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if r, _ := record.Read(got); r.Owner == nil || r.Owner.Origin != agentOrigin {
		t.Errorf("the other's claim was overwritten: %+v", r.Owner)
	}
}

// The first renewal is due a renewal period after the claim's recorded time, not after the
// drain began: a drain tried again soon after the last one left a fresh claim unwritten, and
// waiting a whole period from there would let the lease run out. A failed renewal is tried
// again, and does not stop the drain while the lease holds.
func TestRenewalsFollowTheClaimsTime(t *testing.T) {
	inst := "i-0123456789abcdef0"
	spot := notice.Notice{ID: notice.ID(notice.SpotInterruption, inst, "terminate"), Kind: notice.SpotInterruption, Source: notice.SourceQueue,
		InstanceID: inst, Deadline: time.Now().Add(90 * time.Second)}
	ctx := context.Background()
	const period = 400 * time.Millisecond
	for _, tc := range []struct {
		name     string
		renewed  time.Duration // the claim's age when the drain begins
		earliest time.Duration // no renewal sooner than this after the drain began
		latest   time.Duration // nor later
	}{
		{name: "a claim as old as the period", renewed: period, earliest: 0, latest: period / 2},
		{name: "a claim made just now", renewed: 0, earliest: period * 3 / 4, latest: 3 * period},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewSimpleClientset(ownedNode(t, record.PhaseDraining, &record.Owner{Origin: queueOrigin, Renewed: time.Now().Add(-tc.renewed).UTC()}, spot))
			h := NewHandler(sandboxtest.Config(t, ""), client, slog.New(slog.DiscardHandler), Options{Origin: queueOrigin})
			h.claims.renewEvery = period
			node, _ := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
			client.ClearActions()
			began := time.Now()
			owning, stop := h.claims.keep(ctx, node, drain.NewDeadline(time.Now().Add(time.Hour)), h.log)
			defer stop()
			var first time.Duration
			err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
				for _, a := range client.Actions() {
					if a.GetVerb() == "patch" {
						first = time.Since(began)
						return true, nil
					}
				}
				return false, nil
			})
			if err != nil {
				t.Fatal("no renewal within 5 s")
			}
			if first < tc.earliest || first > tc.latest {
				t.Errorf("first renewal %v after the drain began, want between %v and %v", first, tc.earliest, tc.latest)
			}
			if owning.Err() != nil {
				t.Error("the claim was lost")
			}
		})
	}

	t.Run("a failed renewal", func(t *testing.T) {
		client := fake.NewSimpleClientset(ownedNode(t, record.PhaseDraining, &record.Owner{Origin: queueOrigin, Renewed: time.Now().UTC()}, spot))
		var failures atomic.Int32
		failures.Store(2)
		client.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
			if failures.Add(-1) >= 0 {
				return true, nil, errors.New("the API server is busy")
			}
			return false, nil, nil
		})
		h := NewHandler(sandboxtest.Config(t, ""), client, slog.New(slog.DiscardHandler), Options{Origin: queueOrigin})
		h.claims.renewEvery = 50 * time.Millisecond
		node, _ := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
		owning, stop := h.claims.keep(ctx, node, drain.NewDeadline(time.Now().Add(time.Hour)), h.log)
		defer stop()
		// Two failed patches, then one that gets through.
		err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
			return countVerb(client.Actions(), "patch") >= 3, nil
		})
		if err != nil {
			t.Fatalf("no renewal got through after two failures: %d patches", countVerb(client.Actions(), "patch"))
		}
		if owning.Err() != nil {
			t.Error("two failed renewals inside the lease stopped the drain")
		}
	})
}

func countVerb(actions []k8stesting.Action, verb string) int {
	n := 0
	for _, a := range actions {
		if a.GetVerb() == verb {
			n++
		}
	}
	return n
}

// A renewal that panics (on the timer's goroutine) gives the claim up as a lost one is: the
// drain's context ends, so the drain stops and is tried again rather than run on unclaimed;
// the panic is counted under site drain_claim, and the process goes on.
func TestRenewalPanicStopsThatDrain(t *testing.T) {
	inst := "i-0123456789abcdef0"
	spot := notice.Notice{ID: notice.ID(notice.SpotInterruption, inst, "terminate"), Kind: notice.SpotInterruption, Source: notice.SourceQueue,
		InstanceID: inst, Deadline: time.Now().Add(90 * time.Second)}
	ctx := context.Background()
	client := fake.NewSimpleClientset(ownedNode(t, record.PhaseDraining, &record.Owner{Origin: queueOrigin, Renewed: time.Now().UTC()}, spot))
	client.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		var nodes map[string]*corev1.Node
		return true, nodes["n1"].DeepCopy(), nil // a nil node: the renewal's reading of it panics
	})
	m := metrics.New()
	h := NewHandler(sandboxtest.Config(t, ""), client, slog.New(slog.DiscardHandler), Options{Origin: queueOrigin, Metrics: m})
	h.claims.renewEvery = 20 * time.Millisecond
	node, _ := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	owning, stop := h.claims.keep(ctx, node, drain.NewDeadline(time.Now().Add(time.Hour)), h.log)
	defer stop()
	select {
	case <-owning.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the drain goes on after its renewal panicked")
	}
	if got := m.Value("lifeboat_reconcile_panics_total", "site", "drain_claim"); got != 1 {
		t.Errorf("lifeboat_reconcile_panics_total{site=drain_claim} = %v, want 1", got)
	}
}

// What a drain keeps of a node it wrote: the Ready condition and Lifeboat's own, the boot ID,
// nothing else of the status.
func TestKeptByDrain(t *testing.T) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", ResourceVersion: "7"}, Status: corev1.NodeStatus{
		Capacity: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("110")},
		NodeInfo: corev1.NodeSystemInfo{BootID: "boot-1", KernelVersion: "6.1"},
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue},
			{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
			{Type: nodes.ConditionInterruption, Status: corev1.ConditionTrue, Reason: ConditionDraining}}}}
	kept := keptByDrain(n)
	var types []corev1.NodeConditionType
	for _, c := range kept.Status.Conditions {
		types = append(types, c.Type)
	}
	if len(types) != 2 || types[0] != corev1.NodeReady || types[1] != nodes.ConditionInterruption {
		t.Errorf("conditions kept %v, want Ready and %s", types, nodes.ConditionInterruption)
	}
	if kept.Status.NodeInfo.BootID != "boot-1" || kept.Status.NodeInfo.KernelVersion != "" || len(kept.Status.Capacity) != 0 {
		t.Errorf("status kept %+v, want the boot ID only besides the conditions", kept.Status)
	}
	if kept.ResourceVersion != "7" {
		t.Errorf("resourceVersion %q kept, want 7: the next write patches from it", kept.ResourceVersion)
	}
}

// A new leader (or a restarted process) goes on under the claim its origin's predecessor
// wrote: nobody contests it, so renaming it would only cost a node write per draining node in
// the middle of the evictions it takes over. A contested claim its predecessor stopped
// renewing is renewed, and so names the new process.
func TestPredecessorsClaimTakenAsItIs(t *testing.T) {
	spot := queuedSpot()
	now := time.Now().UTC().Truncate(time.Second)
	for _, tc := range []struct {
		name        string
		owner       record.Owner
		wantPatches int // the claim's, if any, and the one that finishes the notice
	}{
		// Renewed lately: this handler follows no informer, so it renews every OwnerRenew
		// from the claim's time, as the agent does.
		{"uncontested", record.Owner{Origin: queueOrigin, Holder: "old-leader/1", Renewed: now.Add(-5 * time.Second)}, 1},
		{"contested, renewed lately", record.Owner{Origin: queueOrigin, Holder: "old-leader/1", Renewed: now.Add(-5 * time.Second), Contested: now.Add(-20 * time.Second)}, 1},
		{"contested, renewal due", record.Owner{Origin: queueOrigin, Holder: "old-leader/1", Renewed: now.Add(-OwnerRenew - time.Second), Contested: now.Add(-2 * time.Minute)}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			owner := tc.owner
			client := fake.NewSimpleClientset(ownedNode(t, record.PhaseDraining, &owner, spot))
			h := NewHandler(sandboxtest.Config(t, ""), client, slog.New(slog.DiscardHandler), Options{Origin: queueOrigin})
			node, _ := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
			renamed := false // a patch names this process as the claim's holder
			client.PrependReactor("patch", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if p, ok := a.(k8stesting.PatchAction); ok && strings.Contains(string(p.GetPatch()), holderName()) {
					renamed = true
				}
				return false, nil, nil
			})
			if _, err := h.Reconcile(ctx, node); err != nil {
				t.Fatal(err)
			}
			patches := 0
			for _, a := range client.Actions() {
				if a.GetVerb() == "patch" && a.GetResource().Resource == "nodes" && a.GetSubresource() == "" {
					patches++
				}
			}
			if patches != tc.wantPatches {
				t.Errorf("%d node patches, want %d", patches, tc.wantPatches)
			}
			if renamed != (tc.wantPatches == 2) {
				t.Errorf("the claim renamed to this process: %v, want %v", renamed, tc.wantPatches == 2)
			}
			got, _ := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
			if r, _ := record.Read(got); r.Phase != record.PhaseDrained || !r.WorkDone(spot.ID, true) || r.Owner != nil {
				t.Errorf("record %+v: want the notice finished and the claim given up", r)
			}
		})
	}
}
