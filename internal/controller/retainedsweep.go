// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/events"
	"lifeboat.dev/lifeboat/internal/instancegate"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/ownership"
	"lifeboat.dev/lifeboat/internal/panics"
	"lifeboat.dev/lifeboat/internal/record"
)

// Auto Scaling retains an instance whose termination hook is abandoned or times out (heartbeat
// or global timeout) when its group's instance lifecycle policy says TerminateHookAbandon:
// retain. Lifeboat terminates the instances it abandoned itself through their episode
// (episode/retain.go); the sweep finds the others, which nothing else would: in the groups of
// this cluster's nodes, an instance in Terminating:Retained whose Node is drained or gone is
// terminated, one whose Node still runs pods is reported.
//
// Cost: one pass every five minutes while this replica leads, with ABANDON_LIFECYCLE_-
// ACTION_ON_INCOMPLETE_DRAIN on (the setting that grants the calls). A pass makes one
// DescribeAutoScalingGroups per 100 groups (paged) and nothing more unless an instance is
// retained: then, per retained instance, the ownership lookup (DescribeInstances, cached), a
// list of its Node's pods, and the instance gate's DescribeAutoScalingInstances (cached)
// before TerminateInstanceInAutoScalingGroup.

// retainedSweepEvery is the default pause between two passes (Options.RetainedSweepEvery).
const retainedSweepEvery = 5 * time.Minute

// sweepGroupMemory is how long a group the gate once knew is still swept.
const sweepGroupMemory = 24 * time.Hour

// retainedSweep is the sweep's state, kept across passes while this replica leads.
type retainedSweep struct {
	c        *Controller
	resolver *ownership.Resolver
	lister   cloud.RetainedLister
	api      cloud.Retention
	log      *slog.Logger

	groups   map[string]time.Time // group → when the gate last knew it
	reported map[string]bool      // busy instances already reported (once each while retained)
}

// newRetainedSweep is the sweep when ABANDON_LIFECYCLE_ACTION_ON_INCOMPLETE_DRAIN turns it on
// and the Auto Scaling client can list and terminate retained instances, else nil.
func newRetainedSweep(c *Controller, resolver *ownership.Resolver) sideLoop {
	lister, okList := c.asg.(cloud.RetainedLister)
	api, okTerm := c.asg.(cloud.Retention)
	if !c.cfg.AbandonOnIncompleteDrain || !okList || !okTerm {
		return nil
	}
	return &retainedSweep{c: c, resolver: resolver, lister: lister, api: api, log: c.log.With("sweep", "retained instances"),
		groups: map[string]time.Time{}, reported: map[string]bool{}}
}

// Start sweeps every retainedSweepEvery until ctx ends; stop ends the sweep and waits for it.
func (s *retainedSweep) Start(ctx context.Context) (stop func()) {
	c := s.c
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(c.retainedSweepEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				// Retained instances and their Nodes are input: a panic ends this pass only.
				_ = panics.Do(panics.RetainedSweep, s.log, c.metrics, func() { s.pass(ctx) })
			}
		}
	})
	return func() { cancel(); wg.Wait() }
}

// pass sweeps once: the groups the gate knows (and knew within sweepGroupMemory), their
// retained instances, each handled on its own.
func (s *retainedSweep) pass(ctx context.Context) {
	now := time.Now()
	for _, g := range s.c.gate.KnownGroups() {
		s.groups[g] = now
	}
	maps.DeleteFunc(s.groups, func(_ string, seen time.Time) bool { return now.Sub(seen) > sweepGroupMemory })
	if len(s.groups) == 0 {
		return
	}
	retained, requests, err := s.lister.RetainedInstances(ctx, slices.Sorted(maps.Keys(s.groups)))
	for i := range requests {
		s.c.metrics.AWSCall("DescribeAutoScalingGroups", errIfLast(err, i, requests), nil)
	}
	if err != nil {
		s.log.Warn("cannot list the groups' retained instances; the next pass tries again", "groups", len(s.groups), "err", err)
		return
	}
	still := map[string]bool{}
	for _, r := range retained {
		still[r.ID] = true
		s.one(ctx, r)
	}
	maps.DeleteFunc(s.reported, func(id string, _ bool) bool { return !still[id] })
	s.log.Debug("retained instances swept", "groups", len(s.groups), "requests", requests, "retained", len(retained))
}

func errIfLast(err error, i, n int) error {
	if i == n-1 {
		return err
	}
	return nil
}

// one handles a retained instance: left to its episode when Lifeboat abandoned it itself,
// reported when its Node still runs pods, terminated through the instance gate when its Node
// is drained (or gone, and the instance carries this cluster's tags).
func (s *retainedSweep) one(ctx context.Context, r cloud.RetainedInstance) {
	log := s.log.With("instance", r.ID, "group", r.Group)
	v, err := s.resolver.Resolve(ctx, ownership.Subject{Path: ownership.PathRetainedSweep, InstanceID: r.ID})
	if err != nil {
		log.Warn("cannot tell whether the retained instance is this cluster's; the next pass tries again", "err", err)
		return
	}
	req := instancegate.Request{Call: instancegate.CallTerminateInstance, InstanceID: r.ID, Group: r.Group}
	if v.Node == nil && len(v.Refused) > 0 {
		// A Node names the instance, or is it as EC2 describes it, but its claim was refused:
		// the Node is not gone, and whether its pods are still running cannot be told.
		s.terminate(ctx, r, "", &instancegate.Refusal{Request: req, Reason: "a node's claim to it was refused: " + v.Refused[0].String()}, log)
		return
	}
	if v.Node == nil {
		refusal, err := s.resolver.TagsRefusal(ctx, r.ID)
		if err == nil {
			err = s.c.gate.CheckNodeless(ctx, req, refusal)
		}
		s.terminate(ctx, r, "", err, log)
		return
	}
	log = log.With("node", v.Node.Name)
	if !v.Owned {
		s.terminate(ctx, r, v.Node.Name, &instancegate.Refusal{Request: req, NodeInstance: r.ID, Reason: v.Reason}, log)
		return
	}
	if rec, _ := record.Read(v.Node); rec.Retained != nil {
		return // Lifeboat abandoned it: its episode drains and terminates it
	}
	if busy, ok := s.busy(ctx, v.Node.Name, log); !ok || busy > 0 {
		if ok && !s.reported[r.ID] {
			s.reported[r.ID] = true
			log.Warn("Auto Scaling retains the instance (its termination hook timed out or was abandoned), and its node still runs pods: not terminated", "pods", busy)
			s.c.metrics.Retained(metrics.RetainedBusy)
			s.c.events.RetainedInstanceBusy(events.NodeOf(v.Node), "Auto Scaling group "+r.Group+" retains instance "+r.ID+
				" (its termination hook timed out or was abandoned) while the node still runs pods: Lifeboat does not terminate it. Drain the node, or terminate the instance yourself.")
		}
		return
	}
	req.Node = v.Node.Name
	s.terminate(ctx, r, v.Node.Name, s.c.gate.Check(ctx, req), log)
}

// busy counts the pods on the node that terminating the instance would kill: those a drain
// would evict, and those it leaves for a reason other than being gone or the node's own
// (mirror pods, finished pods, DaemonSet pods with IGNORE_DAEMON_SETS). ok is false when the
// pods could not be listed.
func (s *retainedSweep) busy(ctx context.Context, node string, log *slog.Logger) (int, bool) {
	list, err := s.c.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String()})
	if err != nil {
		log.Warn("cannot list the node's pods; the next pass tries again", "err", err)
		return 0, false
	}
	pods := make([]*drain.Pod, 0, len(list.Items))
	for i := range list.Items {
		pods = append(pods, drain.NewPod(&list.Items[i]))
	}
	cfg := s.c.cfg
	evict, skipped := drain.Select(pods, drain.Policy{IgnoreDaemonSets: cfg.IgnoreDaemonSets, DeleteLocalData: true,
		OwnPod: types.NamespacedName{Namespace: cfg.PodNamespace, Name: cfg.PodName}}, drain.Terms{Reclaim: true})
	busy := len(evict)
	for _, sk := range skipped {
		switch sk.Reason {
		case drain.ReasonMirror, drain.ReasonFinished, drain.ReasonDaemonSet, drain.ReasonOwnPod:
		default:
			busy++
		}
	}
	return busy, true
}

// terminate makes the call the gate allowed (checkErr nil), once; DRY_RUN only says so.
func (s *retainedSweep) terminate(ctx context.Context, r cloud.RetainedInstance, node string, checkErr error, log *slog.Logger) {
	if refused, ok := instancegate.IsRefusal(checkErr); ok {
		if !s.reported[r.ID] {
			s.reported[r.ID] = true
			log.Info("retained instance left alone: it is not shown to be this cluster's", "why", refused.Reason)
		}
		return
	}
	if checkErr != nil {
		log.Warn("cannot check the retained instance yet; the next pass tries again", "err", checkErr)
		return
	}
	if s.c.cfg.DryRun {
		log.Info("DRY_RUN: would terminate the retained instance (its node is drained or gone)")
		return
	}
	err := s.api.TerminateRetainedInstance(ctx, r.Group, r.ID)
	s.c.metrics.AWSCall("TerminateInstanceInAutoScalingGroup", err, nil)
	if err != nil {
		log.Warn("terminating the retained instance failed; the next pass tries again", "err", err)
		return
	}
	s.c.metrics.Retained(metrics.RetainedSwept)
	log.Info("terminated an instance Auto Scaling retained (its termination hook timed out or was abandoned): its node is drained or gone", "nodeGone", node == "")
}
