// SPDX-License-Identifier: Apache-2.0

package episode

import (
	"context"
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/record"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// followingHandler is a Handler of queueOrigin whose drains' claims follow a node informer
// on client (FollowNodes), renewing every period once contested, with a drain running on n1
// until the deadline.
func followingHandler(t *testing.T, ctx context.Context, client kubernetes.Interface, period time.Duration, deadline time.Time) (*Handler, *drain.Deadline) {
	t.Helper()
	h := NewHandler(sandboxtest.Config(t, ""), client, slog.New(slog.DiscardHandler), Options{Origin: queueOrigin})
	h.claims.renewEvery = period
	factory := informers.NewSharedInformerFactory(client, 0)
	informer := factory.Core().V1().Nodes().Informer()
	if err := h.FollowNodes(informer); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	t.Cleanup(factory.Shutdown)
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		t.Fatal("the node informer did not sync")
	}
	running := drain.NewDeadline(deadline)
	t.Cleanup(h.drains.track("n1", running))
	return h, running
}

// rewrite applies f to the record of node n1 as another Lifeboat's write would.
func rewrite(t *testing.T, ctx context.Context, client kubernetes.Interface, f func(*record.Record)) {
	t.Helper()
	n, err := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	record.Edit(f)(n)
	if _, err := client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func ownerOf(t *testing.T, ctx context.Context, client kubernetes.Interface) *record.Owner {
	t.Helper()
	n, err := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, _ := record.Read(n)
	return r.Owner
}

// A process that follows its nodes' updates writes no renewal while nobody waits for its
// drain. Once another origin contests the claim it renews every period, keeping the contest;
// an earlier deadline another origin records brings the drain forward at once; a claim taken
// over stops the drain.
func TestFollowedClaimRenewsOnceContested(t *testing.T) {
	spot := spotInTenMinutes()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	claimed := time.Now().UTC().Truncate(time.Second)
	client := fake.NewSimpleClientset(ownedNode(t, record.PhaseDraining, &record.Owner{Origin: queueOrigin, Holder: holderName(), Renewed: claimed}, spot))
	const period = 100 * time.Millisecond
	h, running := followingHandler(t, ctx, client, period, spot.Deadline.UTC().Truncate(time.Second))
	start, _ := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	client.ClearActions()
	owning, stop := h.claims.keep(ctx, start, running, h.log)
	defer stop()

	time.Sleep(5 * period)
	if n := len(client.Actions()); n > 0 {
		t.Fatalf("%d requests while nobody contested the claim, want none", n)
	}

	// The agent's rebalance drain (an open notice of another origin) contests the claim, as
	// its Reconcile does.
	agent := NewHandler(sandboxtest.Config(t, ""), client, slog.New(slog.DiscardHandler), Options{Origin: agentOrigin})
	var agentOwns bool
	if _, err := agent.claims.writer.Apply(ctx, "n1", nil, "contest", agent.claims.edit(&agentOwns, false)); err != nil || agentOwns {
		t.Fatalf("the contest: owns %v, err %v", agentOwns, err)
	}
	contested := ownerOf(t, ctx, client).Contested
	if contested.IsZero() {
		t.Fatal("the contest was not recorded")
	}
	waitFor(t, func() bool { return countVerb(client.Actions(), "patch") >= 4 }) // the contest and three renewals
	o := ownerOf(t, ctx, client)
	if o.Origin != queueOrigin || !o.Renewed.After(claimed) && !o.Renewed.Equal(contested) || !o.Contested.Equal(contested) {
		t.Errorf("owner after the renewals %+v; want this origin's, renewed, the contest kept (%v)", o, contested)
	}
	if owning.Err() != nil {
		t.Fatal("the claim was lost on a renewal")
	}

	// Another origin records a notice due sooner than the drain's deadline.
	soon := time.Now().Add(time.Minute).UTC().Truncate(time.Second)
	rewrite(t, ctx, client, func(r *record.Record) {
		for i := range r.Intents {
			if r.Intents[i].Origin == agentOrigin {
				r.Intents[i].Kind, r.Intents[i].Deadline = string(notice.SpotInterruption), soon
			}
		}
	})
	waitFor(t, func() bool { return running.Time().Equal(soon) })

	// The agent takes the claim over (this process looked dead to it).
	rewrite(t, ctx, client, func(r *record.Record) { r.Owner = &record.Owner{Origin: agentOrigin, Renewed: time.Now().UTC()} })
	select {
	case <-owning.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the drain goes on after another Lifeboat took the claim over")
	}
	if o := ownerOf(t, ctx, client); o == nil || o.Origin != agentOrigin {
		t.Errorf("the other's claim was overwritten: %+v", o)
	}
}

// A contest the informer delivered before the drain began to follow its node is found in the
// informer's store: the claim still renews.
func TestFollowedClaimFindsAnEarlierContest(t *testing.T) {
	spot := spotInTenMinutes()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewSimpleClientset(ownedNode(t, record.PhaseDraining, &record.Owner{Origin: queueOrigin, Holder: holderName(), Renewed: time.Now().UTC()}, spot))
	const period = 100 * time.Millisecond
	h, running := followingHandler(t, ctx, client, period, spot.Deadline.UTC().Truncate(time.Second))
	claim, _ := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{}) // as the claim wrote it
	rewrite(t, ctx, client, func(r *record.Record) { r.Owner.Contested = time.Now().UTC().Truncate(time.Second) })
	waitFor(t, func() bool {
		n, _, _ := h.claims.followed.GetByKey("n1")
		r, _ := record.Read(n.(*corev1.Node))
		return !r.Owner.Contested.IsZero()
	})
	client.ClearActions()
	owning, stop := h.claims.keep(ctx, claim, running, h.log)
	defer stop()
	waitFor(t, func() bool { return countVerb(client.Actions(), "patch") >= 2 })
	if owning.Err() != nil {
		t.Fatal("the claim was lost on a renewal")
	}
}

// spotInTenMinutes is a Spot warning from the queue for the instance of ownedNode's node.
func spotInTenMinutes() notice.Notice {
	inst := "i-0123456789abcdef0"
	return notice.Notice{ID: notice.ID(notice.SpotInterruption, inst, "terminate"), Kind: notice.SpotInterruption, Source: notice.SourceQueue,
		InstanceID: inst, Deadline: time.Now().Add(10 * time.Minute)}
}

// waitFor polls cond until it holds, failing the test after 5 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatal("condition not met within 5 s")
	}
}
