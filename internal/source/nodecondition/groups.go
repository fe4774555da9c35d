// SPDX-License-Identifier: Apache-2.0

package nodecondition

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/instancegate"
	"lifeboat.dev/lifeboat/internal/ownership"
)

// GroupLabels name a node's group when EC2 does not place its instance in an Auto Scaling
// group (a Karpenter node, an instance launched alone, or EC2 could not be asked): the first
// of them the node carries.
var GroupLabels = []string{LabelEKSNodegroup, LabelKarpenterNodePool, "alpha.eksctl.io/nodegroup-name", "kops.k8s.io/instancegroup"}

// tagAutoScalingGroup is the tag Auto Scaling puts on every instance it launches.
const tagAutoScalingGroup = "aws:autoscaling:groupName"

// groupTTL is how long an instance's group is reused: an instance stays in its group while
// it runs, unless detached.
const groupTTL = 10 * time.Minute

// learnTimeout bounds one learning of the cluster's groups.
const learnTimeout = 30 * time.Second

// groups learns the node groups the breaker counts per group: a node's Auto Scaling group, as
// EC2 tags its instance (through the batched and cached descriptions the ownership checks
// share, so a repair's own checks find them cached), else its first GroupLabels label. Groups
// are learned only when a repair comes due and the cluster-wide breaker lets it through, so a
// healthy cluster costs no AWS call.
type groups struct {
	describe instancegate.Describer // nil: labels only
	now      func() time.Time

	mu    sync.Mutex
	known map[string]knownGroup // instance id -> its group
}

type knownGroup struct {
	name string // "" when EC2 places the instance in none
	at   time.Time
}

// learn asks EC2 about the instances of the nodes whose group is not known yet, all at once
// (the describer batches them). An instance EC2 could not be asked about is left to its
// labels this time.
func (g *groups) learn(ctx context.Context, all []*corev1.Node) {
	if g.describe == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, learnTimeout)
	defer cancel()
	now := g.now()
	var wg sync.WaitGroup
	g.mu.Lock()
	for _, n := range all {
		id := ownership.InstanceIDFromProviderID(n.Spec.ProviderID)
		if k, ok := g.known[id]; id == "" || ok && now.Sub(k.at) < groupTTL {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			inst, found, err := g.describe.Describe(ctx, id)
			if err != nil {
				return
			}
			g.mu.Lock()
			defer g.mu.Unlock()
			k := knownGroup{at: now}
			if found {
				k.name = inst.Tags[tagAutoScalingGroup]
			}
			g.known[id] = k
		}()
	}
	g.mu.Unlock()
	wg.Wait()
	g.prune(now)
}

// prune forgets groups past their time.
func (g *groups) prune(now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for id, k := range g.known {
		if now.Sub(k.at) >= groupTTL {
			delete(g.known, id)
		}
	}
}

// of names the node's group: "Auto Scaling group <name>", or "<label>=<value>"; "" when it
// has none.
func (g *groups) of(n *corev1.Node) string {
	g.mu.Lock()
	k := g.known[ownership.InstanceIDFromProviderID(n.Spec.ProviderID)]
	g.mu.Unlock()
	if k.name != "" {
		return "Auto Scaling group " + k.name
	}
	for _, l := range GroupLabels {
		if v := n.Labels[l]; v != "" {
			return l + "=" + v
		}
	}
	return ""
}
