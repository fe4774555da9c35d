package interruption

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/events"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/record"
)

// EndBootedEpisode closes the node's episode if the instance has booted again since it
// opened (a Spot stop or hibernation, a scheduled stop or reboot, started again): the instance
// runs, so Lifeboat takes back its own cordon, taints and labels; a new interruption comes as
// a new notice. It reports whether it ended the episode.
func (h *Handler) EndBootedEpisode(ctx context.Context, node *corev1.Node) (bool, error) {
	booted := func(n *corev1.Node, r record.Record) string {
		if record.BootedAgain(n, r) {
			return record.EpisodeEnded(n, r)
		}
		return ""
	}
	why, _, err := h.endEpisode(ctx, node, booted)
	return why != "", err
}

// endEpisode closes the node's episode when ended says it is over, deciding again on the node
// being written: Lifeboat's own cordon, taints and labels of the episode are taken back (an
// operator who uncordoned the node took it back; an instance that booted again runs), and the
// record keeps only what outlives episodes (see nextEpisode). It returns why the episode
// ended ("" when it had not) and the node as written.
func (h *Handler) endEpisode(ctx context.Context, node *corev1.Node, ended func(*corev1.Node, record.Record) string) (string, *corev1.Node, error) {
	if rec, err := record.Read(node); err != nil || !rec.Known() || ended(node, rec) == "" {
		return "", nil, nil
	}
	var (
		why      string
		previous []string
	)
	edit := func(nd *corev1.Node) {
		r, _ := record.Read(nd)
		if !r.Known() {
			why = ""
			return
		}
		if why = ended(nd, r); why == "" {
			return
		}
		previous = r.Notices
		for _, e := range h.undo(r) {
			e(nd)
		}
		record.Write(nd, r.NextEpisode(record.BootedAgain(nd, r)))
	}
	res, err := h.writer.Apply(ctx, node.Name, node, "end the node's interruption episode", edit)
	if err != nil {
		return "", nil, err
	}
	if why != "" {
		h.done.forget(previous...)
		h.log.Info("the node's interruption episode is over: Lifeboat's cordon and taints taken back", "node", node.Name, "why", why, "notices", previous)
		if !h.cfg.DryRun {
			h.metrics.Action(metrics.ActionUncordon, metrics.ResultOK)
			h.events.Uncordoned(events.NodeOf(node), "the interruption episode is over: "+why)
		}
	}
	return why, res.Node, nil
}
