// SPDX-License-Identifier: Apache-2.0

package episode

import (
	"context"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/kube"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/panics"
	"lifeboat.dev/lifeboat/internal/record"
)

// claims is the claim phase: one Lifeboat drains a node. A drain claims the episode first,
// keeps its claim while it runs (renewed, or followed through the node informer), and gives
// it up in the write that finishes its notices.
type claims struct {
	origin string
	// holder names this process in the claims it writes, for people reading the record; a
	// claim its origin's previous process wrote keeps that one's name (ownedFresh).
	holder string
	// renewEvery is how often a contested drain renews its claim (OwnerRenew; tests shorten it).
	renewEvery time.Duration
	cfg        *config.Config
	writer     *nodes.Writer
	metrics    *metrics.Metrics
	log        *slog.Logger

	mu     sync.Mutex
	owning map[string]*renewals // the claim of each drain running in this process
	// followed is the node informer's store once follow was called; nil when the process
	// does not follow the nodes' updates.
	followed cache.Store
}

// Ownership timing: a contested drain renews every OwnerRenew and is taken over when not
// renewed for OwnerLease after the later of its last renewal and the contest. A renewal that
// fails is tried again every ownerRetry, so the lease outlasts a few failures without
// renewals more often than twice a lease (each one is a write that every node watcher
// receives). A waiting process looks again every ownerPoll, so it finishes its own notices
// soon after the owner's drain.
const (
	OwnerLease = 60 * time.Second
	OwnerRenew = 30 * time.Second
	ownerRetry = 5 * time.Second
	ownerPoll  = 5 * time.Second
)

// heldElsewhere reports until when another origin's owner holds the episode, if it does. An
// owner none of whose notices is still open holds nothing: it has no drain to run. A claim
// nobody contested yet holds for a whole lease from now: the owner may not have renewed since
// it claimed, and it is told to by the contest the caller's claim writes (edit).
func heldElsewhere(r record.Record, origin string, now time.Time) (time.Time, bool) {
	if r.Owner == nil || r.Owner.Origin == origin || !r.OpenFrom(r.Owner.Origin) {
		return time.Time{}, false
	}
	if r.Owner.Contested.IsZero() {
		return now.Add(OwnerLease), true
	}
	until := r.Owner.LeaseStart().Add(OwnerLease)
	return until, now.Before(until)
}

// waitsForOwner reports whether this origin waits for another origin's owner, decided
// without a write: the claim is held and already contested (an uncontested one is contested
// by the caller's claim first).
func waitsForOwner(r record.Record, origin string, now time.Time) (time.Time, bool) {
	until, held := heldElsewhere(r, origin, now)
	return until, held && !r.Owner.Contested.IsZero()
}

// ownedFresh reports whether this origin owns the episode and a claim would only rewrite
// the time: nobody contests it, or it was renewed within OwnerRenew. Which process of the
// origin wrote the claim does not matter: one process of an origin works at a time (the
// controller's Lease, the agent's one node), so a new leader or a restarted process goes on
// under the claim its predecessor left. Rewriting it only to name the new process cost a
// node write per draining node, every one sent to each node watcher, in the middle of the
// evictions a new leader takes over; its renewals name it once another origin contests.
func ownedFresh(r record.Record, origin string, now time.Time) bool {
	return r.Owner != nil && r.Owner.Origin == origin &&
		(r.Owner.Contested.IsZero() || now.Sub(r.Owner.Renewed) < OwnerRenew)
}

// ownerWait is how long to wait before looking again at an episode another origin owns.
func ownerWait(until time.Time) time.Duration {
	return min(max(time.Until(until), time.Second), ownerPoll)
}

// edit makes this process the episode's owner, renewing the time, unless another
// origin holds it; a claim of another origin nobody contested yet is contested instead. A
// claim of this origin's that is fresh (ownedFresh) is left as it is (copies of a notice
// write nothing), unless renew says to write the time anyway (the running drain's
// renewals). It sets *claimed (when not nil) to whether the node is ours after the edit; it
// is decided on the node being written, so a retry after a conflict decides afresh.
func (c *claims) edit(claimed *bool, renew bool) nodes.Edit {
	return record.Edit(func(r *record.Record) {
		now := time.Now()
		_, held := heldElsewhere(*r, c.origin, now)
		if claimed != nil {
			*claimed = !held
		}
		if held {
			if r.Owner.Contested.IsZero() {
				r.Owner.Contested = now.UTC().Truncate(time.Second)
			}
			return
		}
		if !renew && ownedFresh(*r, c.origin, now) {
			return
		}
		var contested time.Time // a contest stands for this origin's later processes too
		if r.Owner != nil && r.Owner.Origin == c.origin {
			contested = r.Owner.Contested
		}
		r.Owner = &record.Owner{Origin: c.origin, Holder: c.holder, Renewed: now.UTC().Truncate(time.Second), Contested: contested}
	})
}

// intakeEdit is edit in the write that takes the notice n, whose drain follows at
// once: it claims only while the node is not drained yet and the notice's intent is this
// origin's (a copy of a notice another origin took first, or one taken after the drain, has
// no drain of this process's to claim for).
func (c *claims) intakeEdit(n notice.Notice) nodes.Edit {
	claim := c.edit(nil, false)
	return func(nd *corev1.Node) {
		r, _ := record.Read(nd)
		if i, ok := r.Intent(n.ID); ok && i.Origin == c.origin && r.Phase < record.PhaseDrained {
			claim(nd)
		}
	}
}

// disownEdit gives up this origin's ownership: its drain is over.
func (c *claims) disownEdit() nodes.Edit {
	return record.Edit(func(r *record.Record) {
		if r.Owner != nil && r.Owner.Origin == c.origin {
			r.Owner = nil
		}
	})
}

// take claims the node's episode (rec, as read on node) for this process's drain. It returns
// the node as written, or nil and how long to wait when another Lifeboat drains it (told that
// this one waits, when nobody had contested its claim yet).
func (c *claims) take(ctx context.Context, node *corev1.Node, rec record.Record, log *slog.Logger) (*corev1.Node, time.Duration, error) {
	if until, waits := waitsForOwner(rec, c.origin, time.Now()); waits {
		c.metrics.DrainClaim(metrics.ClaimWaited)
		log.Debug("another Lifeboat drains the node; waiting for it", "owner", rec.Owner.Origin, "holder", rec.Owner.Holder)
		return nil, ownerWait(until), nil
	}
	claimed, owned, err := c.write(ctx, node)
	if err != nil {
		return nil, 0, err
	}
	if !owned {
		c.metrics.DrainClaim(metrics.ClaimWaited)
		log.Info("another Lifeboat drains the node; told it this one waits, and waiting for it")
		return nil, ownerPoll, nil
	}
	c.metrics.DrainClaim(metrics.ClaimClaimed)
	return claimed, 0, nil
}

// write makes this process the owner of the node's episode before it drains, writing only
// when the record does not already say so freshly. It returns the node as written and
// whether the claim holds.
func (c *claims) write(ctx context.Context, node *corev1.Node) (*corev1.Node, bool, error) {
	rec, _ := record.Read(node)
	if ownedFresh(rec, c.origin, time.Now()) {
		return node, true, nil
	}
	var claimed bool
	res, err := c.writer.Apply(ctx, node.Name, node, "claim the node's drain", c.edit(&claimed, false))
	if err != nil {
		return nil, false, err
	}
	return keptByDrain(res.Node), claimed, nil
}

// keptByDrain trims a node this process read or wrote (never an informer's copy) to what a
// drain keeps for the rest of its run, as the next write's hint and its Events' subject: the
// metadata without managed fields, the spec, and of the status only the boot ID (an episode's
// end), the Ready condition (the fast path for a dead instance) and Lifeboat's own condition
// (a leader that takes over a drain finds it already says so, and writes nothing); nothing
// else of the status is read, and no write sends the status. The merge patch a
// write computes from it is the same, since no edit touches what is dropped. A whole node is
// mostly its status (capacity, conditions), kept by every drain at once otherwise.
func keptByDrain(n *corev1.Node) *corev1.Node {
	trimmed, _ := kube.TrimNode(n)
	kept := trimmed.(*corev1.Node)
	var conditions []corev1.NodeCondition
	for _, c := range kept.Status.Conditions {
		if c.Type == corev1.NodeReady || c.Type == nodes.ConditionInterruption {
			conditions = append(conditions, c)
		}
	}
	kept.Status = corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{BootID: kept.Status.NodeInfo.BootID}, Conditions: conditions}
	return kept
}

// follow has the claims of the drains this process runs follow the informer's updates
// of their nodes, instead of being renewed every OwnerRenew whether or not anyone waits: a
// drain then renews only once another origin contests its claim (its renewals come at the
// same pace from then on), and it brings itself forward to an earlier deadline another
// origin recorded as soon as the informer shows it. An Availability Zone reclaimed at once
// keeps a thousand drains running for minutes, and each renewal is a write every node watcher
// receives. Call it before the informer starts; without it (the agent, which reads its one
// node without a watch) drains renew all along.
func (c *claims) follow(informer cache.SharedIndexInformer) error {
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) {
			if n, ok := obj.(*corev1.Node); ok {
				// The informer's goroutine: a panic on this node's record drops this event only.
				defer panics.Recover(panics.NodeEvent, c.log, c.metrics, nil, "node", n.Name)
				c.observe(n)
			}
		},
	})
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.followed = informer.GetStore()
	c.mu.Unlock()
	return nil
}

// observe hands an informer's update of a node to the claim of the drain running on it, if
// any.
func (c *claims) observe(n *corev1.Node) {
	c.mu.Lock()
	r := c.owning[n.Name]
	c.mu.Unlock()
	if r != nil {
		r.follow(n)
	}
}

// keep keeps the drain's claim while the drain runs, and brings the drain forward
// when another Lifeboat recorded an earlier deadline for the node meanwhile. The claim is
// renewed every OwnerRenew (renewEvery; a failed renewal every ownerRetry): from the start
// when this process does not follow the node's updates, else once another origin contests
// it (follow). The returned context ends when the claim is lost (another origin took
// over, or no renewal got through for OwnerLease while it counted): the drain stops rather
// than run twice. node is the node as claimed: each renewal patches from the node the last
// one wrote, so that a renewal costs one request unless someone else wrote the node since (a
// conflict re-reads it). Between renewals nothing waits: a timer starts each one (a thousand
// drains at once would otherwise park a thousand goroutines).
func (c *claims) keep(ctx context.Context, node *corev1.Node, deadline *drain.Deadline, log *slog.Logger) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	c.mu.Lock()
	followed := c.followed
	c.mu.Unlock()
	r := &renewals{c: c, deadline: deadline, ctx: ctx, cancel: cancel, nodeName: node.Name, log: log, always: followed == nil, last: node, heard: time.Now()}
	// The first renewal is due OwnerRenew after the claim's time, which a fresh claim
	// left as it was (a drain tried again soon after the last one), or after its contest.
	if rec, _ := record.Read(node); rec.Owner != nil && rec.Owner.Origin == c.origin {
		r.heard, r.contested = rec.Owner.LeaseStart(), !rec.Owner.Contested.IsZero()
	}
	if r.always || r.contested {
		r.schedule(r.heard.Add(c.renewEvery))
	}
	if followed != nil {
		c.mu.Lock()
		c.owning[node.Name] = r
		c.mu.Unlock()
		// An update delivered before the line above is in the store already.
		if obj, ok, _ := followed.GetByKey(node.Name); ok {
			r.follow(obj.(*corev1.Node))
		}
	}
	return ctx, func() {
		c.mu.Lock()
		if c.owning[node.Name] == r {
			delete(c.owning, node.Name)
		}
		c.mu.Unlock()
		r.stop()
	}
}

// renewals are one drain's claim renewals (keep).
type renewals struct {
	c *claims
	// deadline is the drain's: an earlier deadline another origin recorded brings it forward.
	deadline *drain.Deadline
	ctx      context.Context
	cancel   context.CancelFunc
	nodeName string
	log      *slog.Logger
	// always renews every period, contested or not: the process does not follow the node.
	always bool

	mu      sync.Mutex
	timer   *time.Timer // nil until a renewal is first due
	due     time.Time   // when the timer fires; zero when it is not set
	stopped bool
	seen    string         // the record follow last looked at
	running sync.WaitGroup // the renewals under way, which stop waits for

	// renewing lets one renewal at a time read and write what follows it.
	renewing  sync.Mutex
	last      *corev1.Node // the node the last renewal wrote: the next one's hint
	heard     time.Time    // when the lease last started (record.Owner.Heard), by this process's account
	contested bool
}

// schedule makes a renewal due at t, unless one is due earlier already.
func (r *renewals) schedule(t time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped || (!r.due.IsZero() && !t.Before(r.due)) {
		return
	}
	r.due = t
	if r.timer == nil {
		r.timer = time.AfterFunc(time.Until(t), r.renew)
	} else {
		r.timer.Reset(time.Until(t))
	}
}

// follow looks at an informer's copy of the node. It only asks for a renewal: a copy may be
// older than the claim, so what it shows is decided on the renewal's write. A contest makes
// the claim renew from then on; another origin's claim (taken over?) or an earlier deadline
// another origin recorded asks for a renewal at once.
func (r *renewals) follow(n *corev1.Node) {
	text := n.Annotations[record.Annotation]
	r.mu.Lock()
	if r.stopped || text == r.seen {
		r.mu.Unlock()
		return
	}
	r.seen = text
	r.mu.Unlock()
	rec, err := record.Read(n)
	if err != nil || rec.Owner == nil { // no claim: given up, or a copy from before it
		return
	}
	now := time.Now()
	switch {
	case rec.Owner.Origin != r.c.origin:
		r.schedule(now)
	case !rec.Owner.Contested.IsZero():
		r.schedule(rec.Owner.LeaseStart().Add(r.c.renewEvery))
	}
	if pending := unabandoned(rec, Pending(rec, r.c.cfg, "")); len(pending) > 0 && drainDeadline(pending...).Before(r.deadline.Time()) {
		r.schedule(now)
	}
}

// renew renews the claim once and sets the timer for the next renewal, unless the claim was
// lost, the drain is over, or nobody needs the renewals.
func (r *renewals) renew() {
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return
	}
	r.due = time.Time{}
	r.running.Add(1)
	r.mu.Unlock()
	defer r.running.Done()
	r.renewing.Lock()
	defer r.renewing.Unlock()
	if r.ctx.Err() != nil {
		return
	}
	started := time.Now()
	holds, failed := r.renewOnceSafely()
	switch {
	case !holds:
		r.cancel()
	case failed:
		r.schedule(time.Now().Add(min(ownerRetry, r.c.renewEvery)))
	case r.always || r.contested:
		r.schedule(started.Add(r.c.renewEvery)) // the renewal's own time is part of the period
	}
}

// renewOnceSafely is renewOnce on the timer's goroutine, with its panic recovered: a claim
// that cannot be renewed is given up as a lost one is, so the drain stops and is tried again
// rather than run on unclaimed.
func (r *renewals) renewOnceSafely() (holds, failed bool) {
	if panics.Do(panics.DrainClaim, r.log, r.c.metrics, func() { holds, failed = r.renewOnce() }) != nil {
		return false, false
	}
	return holds, failed
}

// renewOnce sends one renewal, and reports whether the claim still holds (false once another
// origin took the drain over, or no renewal got through for OwnerLease while someone could
// be waiting), and whether this renewal failed, to be tried again soon. A claim nobody
// contests is not rewritten: the write (or, with nothing to write, the fresh read) only
// checks it.
func (r *renewals) renewOnce() (holds, failed bool) {
	c, log := r.c, r.log
	var claimed bool
	res, err := c.writer.Apply(r.ctx, r.nodeName, r.last, "renew the node's drain", c.edit(&claimed, r.always || r.contested))
	switch {
	case r.ctx.Err() != nil:
		return false, false
	case err != nil:
		log.Warn("could not renew the claim on the node's drain", "err", err, "since", time.Since(r.heard).Round(time.Second))
		if (r.always || r.contested) && time.Since(r.heard) >= OwnerLease {
			c.metrics.DrainClaim(metrics.ClaimLost)
			log.Error("the claim on the node's drain lapsed; stopping the drain so another Lifeboat can take it over")
			return false, true
		}
		return true, true
	case !claimed:
		c.metrics.DrainClaim(metrics.ClaimLost)
		log.Warn("another Lifeboat took over the node's drain; stopping this one")
		return false, false
	}
	r.last = keptByDrain(res.Node)
	rec, _ := record.Read(res.Node)
	if o := rec.Owner; o != nil {
		if o.Renewed.After(r.heard) {
			c.metrics.DrainClaim(metrics.ClaimRenewed)
		}
		r.heard, r.contested = o.LeaseStart(), !o.Contested.IsZero()
	}
	if pending := unabandoned(rec, Pending(rec, c.cfg, "")); len(pending) > 0 && r.deadline.InstanceGoesAt(drainDeadline(pending...)) {
		log.Info("the drain now ends by an earlier deadline another Lifeboat recorded", "deadline", drainDeadline(pending...))
	}
	return true, false
}

// stop ends the renewals. It waits for a renewal under way, so none lands after the caller
// gives the claim up.
func (r *renewals) stop() {
	r.cancel()
	r.mu.Lock()
	r.stopped = true
	if r.timer != nil {
		r.timer.Stop()
	}
	r.mu.Unlock()
	r.running.Wait()
}
