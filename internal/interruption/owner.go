package interruption

import (
	"context"
	"log/slog"
	"slices"
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
// OwnerLease. The lease outlasts a few failed renewals; a waiting process looks again every
// ownerPoll, so it finishes its own notices soon after the owner's drain.
const (
	OwnerLease = 60 * time.Second
	OwnerRenew = 20 * time.Second
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
	return res.Node, claimed, nil
}

// keepOwnership renews the claim every OwnerRenew (h.ownerRenew) while the drain runs, and brings the drain
// forward when another Lifeboat recorded an earlier deadline for the node meanwhile. The
// returned context ends when the claim is lost (another origin took over, or no renewal
// got through for OwnerLease): the drain stops rather than run twice. node is the node as
// claimed: each renewal patches from the node the last one wrote, so that a renewal costs one
// request unless someone else wrote the node since (a conflict re-reads it).
func (h *Handler) keepOwnership(ctx context.Context, node *corev1.Node, log *slog.Logger) (context.Context, func()) {
	nodeName, last := node.Name, node
	ctx, cancel := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		defer cancel()
		ticker := time.NewTicker(h.ownerRenew)
		defer ticker.Stop()
		renewed := time.Now()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
			var claimed bool
			res, err := h.writer.Apply(ctx, nodeName, last, "renew the node's drain", h.claimEdit(&claimed, true))
			switch {
			case ctx.Err() != nil:
				return
			case err != nil:
				log.Warn("could not renew the claim on the node's drain", "err", err, "since", time.Since(renewed).Round(time.Second))
				if time.Since(renewed) >= OwnerLease {
					h.Metrics.DrainClaim(metrics.ClaimLost)
					log.Error("the claim on the node's drain lapsed; stopping the drain so another Lifeboat can take it over")
					return
				}
				continue
			case !claimed:
				h.Metrics.DrainClaim(metrics.ClaimLost)
				log.Warn("another Lifeboat took over the node's drain; stopping this one")
				return
			}
			// Kept for 20 s per draining node: without its managed fields and image list, a
			// thousand of them are a few MiB rather than ten. The merge patch the next
			// renewal sends is the same, since no edit touches what is dropped.
			trimmed, _ := kube.TrimNode(res.Node)
			renewed, last = time.Now(), trimmed.(*corev1.Node)
			h.Metrics.DrainClaim(metrics.ClaimRenewed)
			rec, _ := ReadRecord(res.Node)
			if pending := rec.Pending(h.cfg, ""); len(pending) > 0 && h.TightenDrain(nodeName, drainDeadline(pending...)) {
				log.Info("the drain now ends by an earlier deadline another Lifeboat recorded", "deadline", drainDeadline(pending...))
			}
		}
	}()
	// Stopping waits for a renewal under way, so none lands after the caller gives the
	// claim up.
	return ctx, func() { cancel(); <-stopped }
}
