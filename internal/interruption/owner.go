package interruption

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/kube"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/notice"
)

// Owner is the Lifeboat that drains the node's episode, and when it last said so. Two
// Lifeboats of different origins (an agent and a controller, or controllers reading their
// own queues) can each hold notices for one node; the owner drains, the others wait for the
// drain and then only finish their own notices. An owner that stops renewing (its process
// died) is taken over once its lease runs out. Processes of one origin follow each other
// (a restarted agent, a new leader) and take over from their predecessor at once.
type Owner struct {
	Origin  string    `json:"origin"`
	Holder  string    `json:"holder,omitempty"`
	Renewed time.Time `json:"renewed"`
}

// Ownership timing: a drain renews every OwnerRenew and is taken over when not renewed for
// OwnerLease. A renewal that fails is tried again every ownerRetry, so the lease outlasts a
// few failures without renewals more often than twice a lease (each one is a write that every
// node watcher receives, and an Availability Zone reclaimed at once drains a thousand nodes
// for minutes). A waiting process looks again every ownerPoll, so it finishes its own
// notices soon after the owner's drain.
const (
	OwnerLease = 60 * time.Second
	OwnerRenew = 30 * time.Second
	ownerRetry = 5 * time.Second
	ownerPoll  = 5 * time.Second
)

// heldElsewhere reports until when another origin's owner holds the episode, if it does. An
// owner none of whose notices is still open holds nothing: it has no drain to run.
func (r Record) heldElsewhere(origin string, now time.Time) (time.Time, bool) {
	if r.Owner == nil || r.Owner.Origin == origin || !r.openFrom(r.Owner.Origin) {
		return time.Time{}, false
	}
	until := r.Owner.Renewed.Add(OwnerLease)
	return until, now.Before(until)
}

// openFrom reports whether a notice taken from origin is open in the episode: recorded,
// neither finished nor released.
func (r Record) openFrom(origin string) bool {
	for _, i := range r.Intents {
		if i.Origin == origin && r.Has(i.ID) && !slices.Contains(r.Finished, i.ID) && !slices.Contains(r.Released, i.ID) {
			return true
		}
	}
	return false
}

// ownedFresh reports whether this origin owns the episode, renewed within OwnerRenew: a
// claim would only rewrite the time.
func (r Record) ownedFresh(origin string, now time.Time) bool {
	return r.Owner != nil && r.Owner.Origin == origin && now.Sub(r.Owner.Renewed) < OwnerRenew
}

// ownerWait is how long to wait before looking again at an episode another origin owns.
func ownerWait(until time.Time) time.Duration {
	return min(max(time.Until(until), time.Second), ownerPoll)
}

// claimEdit makes this process the episode's owner, renewing the time, unless another
// origin holds it. A claim of this origin's renewed within OwnerRenew is left as it is
// (copies of a notice write nothing), unless renew says to write the time anyway (the
// running drain's renewals). It sets *claimed (when not nil) to whether the node is ours
// after the edit; it is decided on the node being written, so a retry after a conflict
// decides afresh.
func (h *Handler) claimEdit(claimed *bool, renew bool) nodes.Edit {
	return editRecord(func(r *Record) {
		now := time.Now()
		_, held := r.heldElsewhere(h.Origin, now)
		if claimed != nil {
			*claimed = !held
		}
		if held || (!renew && r.ownedFresh(h.Origin, now)) {
			return
		}
		r.Owner = &Owner{Origin: h.Origin, Holder: h.holder, Renewed: now.UTC().Truncate(time.Second)}
	})
}

// intakeClaimEdit is claimEdit in the write that takes the notice n, whose drain follows at
// once: it claims only while the node is not drained yet and the notice's intent is this
// origin's (a copy of a notice another origin took first, or one taken after the drain, has
// no drain of this process's to claim for).
func (h *Handler) intakeClaimEdit(n notice.Notice) nodes.Edit {
	claim := h.claimEdit(nil, false)
	return func(nd *corev1.Node) {
		r, _ := ReadRecord(nd)
		if i, ok := r.intent(n.ID); ok && i.Origin == h.Origin && r.Phase < PhaseDrained {
			claim(nd)
		}
	}
}

// disownEdit gives up this origin's ownership: its drain is over.
func (h *Handler) disownEdit() nodes.Edit {
	return editRecord(func(r *Record) {
		if r.Owner != nil && r.Owner.Origin == h.Origin {
			r.Owner = nil
		}
	})
}

// claim makes this process the owner of the node's episode before it drains, writing only
// when the record does not already say so freshly. It returns the node as written and
// whether the claim holds; when another origin owns the episode, the caller waits.
func (h *Handler) claim(ctx context.Context, node *corev1.Node) (*corev1.Node, bool, error) {
	rec, _ := ReadRecord(node)
	if rec.ownedFresh(h.Origin, time.Now()) {
		return node, true, nil
	}
	var claimed bool
	res, err := h.writer.Apply(ctx, node.Name, node, "claim the node's drain", h.claimEdit(&claimed, false))
	if err != nil {
		return nil, false, err
	}
	return keptByDrain(res.Node), claimed, nil
}

// keptByDrain trims a node this process read or wrote (never an informer's copy) to what a
// drain keeps for the rest of its run, as the next write's hint and its Events' subject: the
// metadata without managed fields, the spec, and of the status only the boot ID (an episode's
// end; nothing else of the status is read, and no write sends the status). The merge patch a
// write computes from it is the same, since no edit touches what is dropped. A thousand drains
// at once otherwise held 16 MiB of nodes, mostly their status (capacity, conditions).
func keptByDrain(n *corev1.Node) *corev1.Node {
	trimmed, _ := kube.TrimNode(n)
	kept := trimmed.(*corev1.Node)
	kept.Status = corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{BootID: kept.Status.NodeInfo.BootID}}
	return kept
}

// keepOwnership renews the claim every OwnerRenew (h.ownerRenew; a failed renewal every
// ownerRetry) while the drain runs, and brings the drain forward when another Lifeboat
// recorded an earlier deadline for the node meanwhile. The returned context ends when the
// claim is lost (another origin took over, or no renewal got through for OwnerLease): the
// drain stops rather than run twice. node is the node as claimed: each renewal patches from
// the node the last one wrote, so that a renewal costs one request unless someone else wrote
// the node since (a conflict re-reads it). Between renewals nothing waits: a timer starts
// each one (a thousand drains at once would otherwise park a thousand goroutines).
func (h *Handler) keepOwnership(ctx context.Context, node *corev1.Node, log *slog.Logger) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	r := &renewals{h: h, ctx: ctx, cancel: cancel, nodeName: node.Name, last: node, renewed: time.Now(), log: log}
	// The first renewal is due OwnerRenew after the claim's time, which a fresh claim
	// left as it was (a drain tried again soon after the last one).
	first := h.ownerRenew
	if rec, _ := ReadRecord(node); rec.Owner != nil && rec.Owner.Origin == h.Origin {
		r.renewed = rec.Owner.Renewed
		first = max(time.Until(rec.Owner.Renewed.Add(h.ownerRenew)), 0)
	}
	r.mu.Lock()
	r.timer = time.AfterFunc(first, r.renew)
	r.mu.Unlock()
	return ctx, r.stop
}

// renewals are one drain's claim renewals (keepOwnership).
type renewals struct {
	h        *Handler
	ctx      context.Context
	cancel   context.CancelFunc
	nodeName string
	log      *slog.Logger

	mu      sync.Mutex
	timer   *time.Timer
	stopped bool
	running sync.WaitGroup // the renewal under way, which stop waits for

	// Read and written by the renewals alone, one at a time.
	last    *corev1.Node // the node the last renewal wrote: the next one's hint
	renewed time.Time
}

// renew renews the claim once and sets the timer for the next renewal, unless the claim was
// lost or the drain is over.
func (r *renewals) renew() {
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return
	}
	r.running.Add(1)
	r.mu.Unlock()
	defer r.running.Done()
	started := time.Now()
	holds, failed := r.renewOnce()
	if !holds {
		r.cancel()
		return
	}
	next := r.h.ownerRenew - time.Since(started) // the renewal's own time is part of the period
	if failed {
		next = min(ownerRetry, r.h.ownerRenew)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.stopped {
		r.timer.Reset(next)
	}
}

// renewOnce sends one renewal, and reports whether the claim still holds (false once another
// origin took the drain over or no renewal got through for OwnerLease), and whether this
// renewal failed, to be tried again soon.
func (r *renewals) renewOnce() (holds, failed bool) {
	h, log := r.h, r.log
	var claimed bool
	res, err := h.writer.Apply(r.ctx, r.nodeName, r.last, "renew the node's drain", h.claimEdit(&claimed, true))
	switch {
	case r.ctx.Err() != nil:
		return false, false
	case err != nil:
		log.Warn("could not renew the claim on the node's drain", "err", err, "since", time.Since(r.renewed).Round(time.Second))
		if time.Since(r.renewed) >= OwnerLease {
			h.Metrics.DrainClaim(metrics.ClaimLost)
			log.Error("the claim on the node's drain lapsed; stopping the drain so another Lifeboat can take it over")
			return false, true
		}
		return true, true
	case !claimed:
		h.Metrics.DrainClaim(metrics.ClaimLost)
		log.Warn("another Lifeboat took over the node's drain; stopping this one")
		return false, false
	}
	r.renewed, r.last = time.Now(), keptByDrain(res.Node)
	h.Metrics.DrainClaim(metrics.ClaimRenewed)
	rec, _ := ReadRecord(res.Node)
	if pending := rec.Pending(h.cfg, ""); len(pending) > 0 && h.TightenDrain(r.nodeName, drainDeadline(pending...)) {
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
	r.timer.Stop()
	r.mu.Unlock()
	r.running.Wait()
}
