// SPDX-License-Identifier: Apache-2.0

package episode

import (
	"context"
	"log/slog"

	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/events"
	"lifeboat.dev/lifeboat/internal/metrics"
)

// DeadCheck tells whether a node's instance is dead: nothing runs its pods any more (the
// node lifecycle controller holds the Node's Ready condition Unknown, and EC2 says the
// instance is stopped, stopping, shutting down or terminated). It returns why ("" when it is
// not dead, or when that cannot be told for certain).
type DeadCheck interface {
	Dead(ctx context.Context, node *corev1.Node) (why string)
}

// deadPath is the fast path's phase of a drain.
type deadPath struct {
	check   DeadCheck
	dryRun  bool
	events  *events.Recorder
	metrics *metrics.Metrics
}

// terms are the drain's terms for a node whose instance may be dead: with the fast path,
// its pods are deleted with grace 0 (every pod, even one marked not to disrupt: nothing runs
// it) and the hand-back's volume waits are skipped. Every use is reported loudly.
func (p *deadPath) terms(ctx context.Context, node *corev1.Node, terms drain.Terms, log *slog.Logger) drain.Terms {
	if p == nil || p.check == nil || p.dryRun {
		return terms
	}
	why := p.check.Dead(ctx, node)
	if why == "" {
		return terms
	}
	terms.Dead, terms.Reclaim = why, true
	log.Warn("fast path for a dead instance: pods deleted with grace 0, no eviction, no budget wait, no volume wait", "why", why)
	p.events.DeadInstance(events.NodeOf(node), why)
	p.metrics.DeadInstance()
	return terms
}
