// SPDX-License-Identifier: Apache-2.0

package episode

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/events"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/record"
	"lifeboat.dev/lifeboat/internal/wiring"
)

// drains is the drain phase: it drains a node by its deadline under the terms its notices
// give, counts the drain and its evictions, reports the pods it leaves, and keeps the deadline
// of each drain running in this process, which a more urgent notice brings forward.
type drains struct {
	drainer atomic.Pointer[drain.Drainer]
	metrics *metrics.Metrics
	events  *events.Recorder
	log     *slog.Logger

	mu      sync.Mutex
	running map[string]*drain.Deadline // the deadline of each drain running in this process
}

// newDrains builds the drain phase around the drainer the composition root built.
func newDrains(drainer *drain.Drainer, m *metrics.Metrics, e *events.Recorder, log *slog.Logger) *drains {
	d := &drains{metrics: m, events: e, log: log, running: map[string]*drain.Deadline{}}
	d.drainer.Store(drainer)
	return d
}

// NewDrainer builds the drainer the configuration asks for, whose drains report what holds
// them (drain.Reporter) and count their panics. The composition root calls it; so does
// NewHandler for options that bring none (tests).
func NewDrainer(c *config.Config, client kubernetes.Interface, m *metrics.Metrics, e *events.Recorder, log *slog.Logger) *drain.Drainer {
	opts := wiring.Drain(c, client, log)
	opts.Observer = drain.NewReporter(e, m, log)
	opts.Panics = m
	return drain.New(client, opts)
}

// useNodePods makes the drains that start from now on list and follow their pods from one
// shared pod informer.
func (d *drains) useNodePods(p *drain.NodePods) {
	d.drainer.Store(d.drainer.Load().WithNodePods(p))
}

// drain drains the node by the deadline, which tighten may bring forward meanwhile, under
// the notices' terms. Pods it leaves because they are marked not to disrupt are reported.
func (d *drains) run(ctx context.Context, node *corev1.Node, deadline *drain.Deadline, terms drain.Terms, log *slog.Logger) (drainOutcome, error) {
	nodeName := node.Name
	res, err := d.drainer.Load().DrainUntil(ctx, nodeName, deadline, terms)
	d.count(res, deadline.Time(), err)
	log.Info("drain finished", "selected", len(res.Pods), "skipped", len(res.Skipped), "remaining", len(res.Remaining()),
		"seconds", res.Finished.Sub(res.Started).Seconds(), "dryRun", res.DryRun, "err", err)
	for _, s := range res.Skipped {
		log.Debug("pod left on the node", "pod", s.Pod.String(), "reason", s.Reason)
	}
	held := res.Held()
	if len(held) > 0 && !res.DryRun {
		names := make([]string, len(held))
		for i, s := range held {
			names[i] = s.Pod.String()
		}
		log.Warn("pods marked not to disrupt stay on the node: no notice is a reclaim", "pods", names)
		d.events.PodsHeld(events.NodeOf(node), names)
		for _, s := range held {
			d.events.PodHeld(events.Pod{Namespace: s.Pod.Namespace, Name: s.Pod.Name, UID: s.UID}, nodeName)
		}
	}
	if err != nil {
		return drainOutcome{}, fmt.Errorf("drain node %s: %w", nodeName, err)
	}
	out := drainOutcome{ran: true, took: res.Finished.Sub(res.Started)}
	for _, s := range held {
		out.held = append(out.held, s.Pod.String())
	}
	for _, p := range res.Pods {
		if !p.EvictedAt.IsZero() {
			out.evicted = append(out.evicted, p.Pod.String())
			out.claims = append(out.claims, p.Claims...)
			if p.IP != "" {
				out.podIPs = append(out.podIPs, p.IP)
			}
		}
	}
	return out, nil
}

// tighten brings the drain running on node in this process forward for an instance that now
// goes at t (see drain.Deadline.InstanceGoesAt). It reports whether a drain was running and its
// deadline moved.
func (d *drains) tighten(node string, t time.Time) bool {
	d.mu.Lock()
	deadline := d.running[node]
	d.mu.Unlock()
	return deadline != nil && deadline.InstanceGoesAt(t)
}

// track makes the node's drain deadline the one tighten moves, until untrack.
func (d *drains) track(nodeName string, deadline *drain.Deadline) (untrack func()) {
	d.mu.Lock()
	d.running[nodeName] = deadline
	d.mu.Unlock()
	return func() {
		d.mu.Lock()
		delete(d.running, nodeName)
		d.mu.Unlock()
	}
}

// terminationPoll is how often a node left alone by onlyTerminating is looked at again:
// in memory, without a request.
const terminationPoll = 5 * time.Second

// onlyTerminating reports whether the node's drain is left alone for now because, run
// again, it would only wait for pods already terminating: every pending notice's instance was
// taken at its deadline whatever Lifeboat did (a Spot or capacity-reservation warning; no
// lifecycle heartbeat extends it), that deadline has passed, and the shared pod informer shows
// nothing left to evict. The drain that met the deadline said so (its DrainFailed Event);
// running it again every half minute would only cost a read, a claim and two Events per node
// (an Availability Zone reclaimed at once counts a thousand nodes, whose pods leave only when
// the node object is deleted). The node's notices finish once its pods are gone, or it is
// drained again as soon as something is left to evict. Without a shared pod informer (the
// agent, USE_APISERVER_CACHE=false) the drain is retried as before.
func (d *drains) onlyTerminating(node *corev1.Node, rec record.Record, pending []notice.Notice) bool {
	now := time.Now()
	if !drainWanted(rec, pending) || slices.ContainsFunc(pending, func(n notice.Notice) bool {
		return !n.Kind.GoesAtDeadline() || n.Deadline.IsZero() || now.Before(n.Deadline)
	}) {
		return false
	}
	left, ok := d.drainer.Load().Outstanding(node.Name, TermsOf(node, pending))
	if !ok || left.Evict > 0 || left.Terminating == 0 {
		return false
	}
	d.log.Debug("past the deadline, only terminating pods are left on the node; waiting for them without draining again",
		"node", node.Name, "terminating", left.Terminating, "notices", ids(pending))
	return true
}

// countDrain records a drain's duration, against the time it had until the deadline, and its
// pods' evictions.
func (d *drains) count(res *drain.Result, deadline time.Time, err error) {
	if d.metrics == nil || res == nil {
		return
	}
	if res.DryRun {
		d.metrics.Action(metrics.ActionDrain, metrics.ResultDryRun)
		return
	}
	var allowed time.Duration
	if !deadline.IsZero() {
		allowed = deadline.Sub(res.Started)
	}
	d.metrics.Drain(res.Finished.Sub(res.Started), allowed, err)
	counts := map[string]int{}
	for _, p := range res.Pods {
		switch {
		case p.Forced:
			counts[metrics.EvictionForced]++
		case !p.EvictedAt.IsZero():
			counts[metrics.EvictionEvicted]++
		case p.Error != "":
			counts[metrics.EvictionFailed]++
		}
		// Every request but an accepted or failed last one was refused and retried: by a
		// disruption budget, or else by throttling or a transient error.
		refused := p.Attempts
		if !p.Forced && (!p.EvictedAt.IsZero() || p.Error != "") {
			refused = max(p.Attempts-1, 0)
		}
		budget := min(p.BudgetRefusals, refused)
		counts[metrics.EvictionRefused] += budget
		counts[metrics.EvictionRetried] += refused - budget
	}
	for r, n := range counts {
		d.metrics.Evictions(r, n)
	}
	for _, s := range res.Skipped {
		d.metrics.PodLeft(s.Reason.Label())
	}
}

// drainOutcome is what a drain by this process did, for the Event, the webhook, the record and
// the waits before the hand-back.
type drainOutcome struct {
	ran     bool // this process drained the node (the rest is empty when not)
	evicted []string
	took    time.Duration
	claims  []string // the evicted pods' PersistentVolumeClaims
	podIPs  []string // and their IPs
	held    []string // pods left because they are marked not to disrupt (see record.Record.Held)
	// abandoned are the notices whose lifecycle actions were completed with ABANDON: none is
	// completed again.
	abandoned []string
	// notes are the hand-back's Events, told once, after the drain's own (see detachPhase.run).
	notes []func()
}

// tell records the hand-back's Events, once.
func (d *drainOutcome) tell() {
	for _, note := range d.notes {
		note()
	}
	d.notes = nil
}

// TermsOf are the terms the pending notices give the node's drain: whether one of them is a
// reclaim, and the interruption taints on the node.
func TermsOf(node *corev1.Node, pending []notice.Notice) drain.Terms {
	var terms drain.Terms
	for _, n := range pending {
		terms.Reclaim = terms.Reclaim || n.Kind.Reclaims()
	}
	for _, t := range node.Spec.Taints {
		if slices.Contains(interruptionTaints, t.Key) {
			terms.Taints = append(terms.Taints, t)
		}
	}
	return terms
}
