// SPDX-License-Identifier: Apache-2.0

package cloud

import (
	"context"
	"errors"
	"sync"
	"time"
)

// EKS is what Lifeboat needs from the EKS API; its AWS implementation is
// controlleronly.AWSEKS.
type EKS interface {
	// NodegroupAutoRepaired reports whether the cluster's managed node group has node auto
	// repair on (DescribeNodegroup's nodeRepairConfig.enabled); an error wrapping
	// ErrNoSuchNodegroup when EKS knows no such node group in that cluster.
	NodegroupAutoRepaired(ctx context.Context, cluster, nodegroup string) (bool, error)
}

// ErrNoSuchNodegroup means EKS knows no managed node group of that name in the cluster: the
// node group was deleted, or CLUSTER_NAME is not the EKS cluster's name.
var ErrNoSuchNodegroup = errors.New("no such managed node group")

// Nodegroup repair cache limits.
const (
	// NodegroupRepairTTL is how long an answer is reused: the setting changes rarely, and a
	// node group turned to auto repair is left to EKS within this long.
	NodegroupRepairTTL = 5 * time.Minute
	// NodegroupRepairFailTTL is how long a failure is reused: the permission may be granted,
	// the throttling end.
	NodegroupRepairFailTTL = time.Minute
	// maxNodegroups bounds the cache: node group names come from node labels.
	maxNodegroups = 1024
)

// NodegroupRepairs says whether the managed node groups of one cluster have node auto repair
// on, asking EKS once per node group and NodegroupRepairTTL (a failure, once per
// NodegroupRepairFailTTL), however many of its nodes ask; callers that ask about a node group
// while it is being asked wait for that answer. It asks only when called: node repair calls
// it for a node whose repair came due, so a healthy cluster costs no EKS call.
type NodegroupRepairs struct {
	src     EKS
	cluster string
	now     func() time.Time

	mu     sync.Mutex
	known  map[string]nodegroupAnswer
	asking map[string]chan struct{} // node group -> closed once its call answered
}

type nodegroupAnswer struct {
	on    bool
	err   error
	until time.Time
}

// NewNodegroupRepairs asks src about the node groups of cluster.
func NewNodegroupRepairs(src EKS, cluster string) *NodegroupRepairs {
	return newNodegroupRepairs(src, cluster, time.Now)
}

func newNodegroupRepairs(src EKS, cluster string, now func() time.Time) *NodegroupRepairs {
	return &NodegroupRepairs{src: src, cluster: cluster, now: now, known: map[string]nodegroupAnswer{}, asking: map[string]chan struct{}{}}
}

// AutoRepaired reports whether the node group has node auto repair on. An error means it is
// not known (see EKS.NodegroupAutoRepaired): the caller must not take it for off.
func (c *NodegroupRepairs) AutoRepaired(ctx context.Context, nodegroup string) (bool, error) {
	if c.cluster == "" {
		return false, errors.New("the EKS cluster's name is not known (CLUSTER_NAME)")
	}
	for {
		c.mu.Lock()
		if a, ok := c.known[nodegroup]; ok && c.now().Before(a.until) {
			c.mu.Unlock()
			return a.on, a.err
		}
		wait, busy := c.asking[nodegroup]
		if !busy {
			done := make(chan struct{})
			c.asking[nodegroup] = done
			c.mu.Unlock()
			return c.ask(ctx, nodegroup, done)
		}
		c.mu.Unlock()
		select {
		case <-wait: // answered, or given up on by a caller whose context ended: look again
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}

// ask makes the call and keeps its answer, but not a failure of the caller's own context
// (the next caller asks again).
func (c *NodegroupRepairs) ask(ctx context.Context, nodegroup string, done chan struct{}) (bool, error) {
	on, err := c.src.NodegroupAutoRepaired(ctx, c.cluster, nodegroup)
	c.mu.Lock()
	defer c.mu.Unlock()
	defer close(done)
	delete(c.asking, nodegroup)
	if err != nil && ctx.Err() != nil {
		return on, err
	}
	now := c.now()
	ttl := NodegroupRepairTTL
	if err != nil {
		ttl = NodegroupRepairFailTTL
	}
	for g, a := range c.known {
		if !now.Before(a.until) {
			delete(c.known, g)
		}
	}
	if len(c.known) < maxNodegroups {
		c.known[nodegroup] = nodegroupAnswer{on: on, err: err, until: now.Add(ttl)}
	}
	return on, err
}
