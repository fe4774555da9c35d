// SPDX-License-Identifier: Apache-2.0

package episode

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/detach"
	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/events"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/record"
)

// detachMargin is kept between the end of the waits and the episode's deadline, so that
// the lifecycle action is completed while it is still open.
const detachMargin = 5 * time.Second

// detachPhase is the hand-back phase: the waits between a drained node and the hand-back of
// its instance (its volumes detached, its load-balancer targets drained).
type detachPhase struct {
	waits   []detach.Wait
	cfg     *config.Config
	writer  *nodes.Writer
	metrics *metrics.Metrics
	events  *events.Recorder
	// conditions is told what the waits still find held.
	conditions *conditions
}

// waitDone says, for the Event, what a wait that ended in time waited for.
var waitDone = map[string]string{
	"volumes": "volumes detached",
	"targets": "load-balancer targets drained",
}

// run runs the waits between a drained node and the hand-back of its instance (its
// lifecycle action completed), by the deadline, which may still move earlier. Each wait that
// took time, was cut short by the deadline or could not be checked is logged and counted at
// once; the Events for those that matter to an operator are returned, to be recorded after
// the drain's own Event and before the lifecycle completion's, so that the node's Events read
// in the order things happened. The instance is handed back in any case: the waits make it
// safer, they never keep it past its deadline. recorded is what an earlier process's
// hand-back for this episode waited for (from the node's record): a drain after a restart
// moves nothing, and would otherwise wait for nothing.
//
// It reports whether every wait ended with nothing held (a wait that could not be checked
// counts as nothing held, as it does for the hand-back).
func (b *detachPhase) run(ctx context.Context, node *corev1.Node, pending []notice.Notice, deadline *drain.Deadline, done drainOutcome, recorded *record.Detach, log *slog.Logger) (notes []func(), safe bool) {
	if len(b.waits) == 0 || b.cfg.DryRun {
		return nil, true
	}
	safe = true
	subject := detach.Subject{Node: node.Name, InstanceID: instanceOf(node, pending), Claims: done.claims, PodIPs: done.podIPs}
	if recorded != nil {
		subject.Claims = union(subject.Claims, recorded.Claims)
		subject.PodIPs = union(subject.PodIPs, recorded.PodIPs)
	}
	waits := b.waits
	if len(subject.Claims)+len(subject.PodIPs) > 0 && !covers(recorded, subject) {
		waits = b.recordWhenHeld(ctx, node.Name, subject, log)
	}
	waits = b.showingHeld(node, waits)
	bounded, cancel := deadline.Bound(ctx, detachMargin)
	defer cancel()
	results := detach.Run(bounded, deadline.Time().Add(-detachMargin), subject, waits...)
	for _, r := range results {
		b.metrics.DetachWait(r.Wait, string(r.Outcome), r.Took)
		what := waitDone[r.Wait]
		if what == "" {
			what = r.Wait
		}
		switch r.Outcome {
		case detach.Released:
			if r.Took >= time.Second {
				log.Info("handback wait over: "+what, "wait", r.Wait, "seconds", r.Took.Seconds())
				notes = append(notes, func() { b.events.DetachWaited(events.NodeOf(node), what, r.Took) })
			} else {
				log.Debug("handback wait over: nothing held", "wait", r.Wait)
			}
		case detach.Cut:
			safe = false
			if ctx.Err() != nil {
				return notes, false // stopping (shutdown, or the claim was lost): not the deadline's doing
			}
			log.Warn("handback wait cut by the deadline: handing the instance back anyway", "wait", r.Wait, "seconds", r.Took.Seconds(),
				"held", strings.Join(r.Held, ", "), "err", r.Err)
			notes = append(notes, func() { b.events.DetachWaitCut(events.NodeOf(node), what, r.Took, r.Held) })
		case detach.Skipped:
			log.Debug("handback wait skipped", "wait", r.Wait, "err", r.Err)
		}
	}
	return notes, safe
}

// waitReasons are the condition's reasons while a wait finds something held, in the order
// they are shown when several do.
var waitReasons = []struct{ wait, reason string }{
	{"volumes", ConditionWaitingForVolumes},
	{"targets", ConditionWaitingForTargets},
}

// showingHeld wraps the waits so that the node's condition says what they still find held:
// the reason of the first wait (in waitReasons' order) that holds something, and everything
// held in its message.
func (b *detachPhase) showingHeld(node *corev1.Node, waits []detach.Wait) []detach.Wait {
	if b.conditions == nil || b.conditions.writer == nil {
		return waits
	}
	var (
		mu   sync.Mutex
		held = map[string][]string{}
	)
	show := func(wait string, items []string) {
		mu.Lock()
		defer mu.Unlock()
		if len(items) == 0 && len(held[wait]) == 0 {
			return
		}
		held[wait] = items
		reason, parts := "", []string{}
		for _, w := range waitReasons {
			if len(held[w.wait]) > 0 {
				if reason == "" {
					reason = w.reason
				}
				parts = append(parts, waitDone[w.wait]+": "+strings.Join(held[w.wait], ", "))
			}
		}
		if reason != "" {
			b.conditions.set(node, reason, "Drained; waiting before the instance is handed back until "+strings.Join(parts, "; "))
		}
	}
	out := make([]detach.Wait, len(waits))
	for i, w := range waits {
		out[i] = showingWait{Wait: w, show: show}
	}
	return out
}

// showingWait is a Wait that shows what it finds held.
type showingWait struct {
	detach.Wait
	show func(wait string, held []string)
}

func (w showingWait) Held(ctx context.Context, s detach.Subject) ([]string, error) {
	held, err := w.Wait.Held(ctx, s)
	if err == nil {
		w.show(w.Name(), held)
	}
	return held, err
}

// guarded is waits, each with its panics recovered: a wait that panics is skipped.
func guarded(waits []detach.Wait, log *slog.Logger, m *metrics.Metrics) []detach.Wait {
	out := make([]detach.Wait, len(waits))
	for i, w := range waits {
		out[i] = detach.Guarded(w, log, m)
	}
	return out
}

// instanceOf is the node's EC2 instance id: from its notices, or else its provider id.
func instanceOf(node *corev1.Node, pending []notice.Notice) string {
	for _, n := range pending {
		if n.InstanceID != "" {
			return n.InstanceID
		}
	}
	id := node.Spec.ProviderID
	return id[strings.LastIndex(id, "/")+1:]
}

// recordWhenHeld wraps the waits so that the first one to find something held that only the
// drain knows of (a volume, a pod's IP: not the instance, which a restarted process knows by
// itself) records the subject's claims and IPs on the node: one write, and none in the
// common case.
func (b *detachPhase) recordWhenHeld(ctx context.Context, nodeName string, s detach.Subject, log *slog.Logger) []detach.Wait {
	var once sync.Once
	note := func() {
		once.Do(func() {
			edit := record.Edit(func(r *record.Record) { r.Detach = &record.Detach{Claims: s.Claims, PodIPs: s.PodIPs} })
			if _, err := b.writer.Apply(ctx, nodeName, nil, "record what the hand-back waits for", edit); err != nil && ctx.Err() == nil {
				log.Warn("could not record what the hand-back waits for; a restart now would not wait for it", "err", err)
			}
		})
	}
	out := make([]detach.Wait, len(b.waits))
	for i, w := range b.waits {
		out[i] = recordingWait{Wait: w, held: note}
	}
	return out
}

// recordingWait is a Wait that calls held the first time it finds something held.
type recordingWait struct {
	detach.Wait
	held func()
}

func (w recordingWait) Held(ctx context.Context, s detach.Subject) ([]string, error) {
	held, err := w.Wait.Held(ctx, s)
	if err == nil && slices.ContainsFunc(held, func(item string) bool { return !strings.HasPrefix(item, s.InstanceID+" ") }) {
		w.held()
	}
	return held, err
}

// covers reports whether the record already holds every claim and IP of s.
func covers(r *record.Detach, s detach.Subject) bool {
	if r == nil {
		return false
	}
	return len(union(r.Claims, s.Claims)) == len(r.Claims) && len(union(r.PodIPs, s.PodIPs)) == len(r.PodIPs)
}

// union is a and the items of b not in a.
func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, x := range b {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}
