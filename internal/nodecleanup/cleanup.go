// SPDX-License-Identifier: Apache-2.0

// Package nodecleanup deletes the Node of a terminated instance (DELETE_NODE_AFTER_TERMINATION,
// controller mode, off by default), for clusters without a cloud controller manager that
// would (k3s, some kOps): their Nodes outlive their instances. Only a Node whose kubelet has
// stopped (Ready not True) is looked at, and EC2 is asked about those alone, in one batched
// DescribeInstances each pass. A Node is deleted once EC2 says its instance is terminated, or,
// once EC2 no longer describes the instance (it forgets terminated ones after a while), when
// an earlier sighting of it shutting down or terminated was recorded on the Node. Never a
// Node whose name or addresses EC2 did not give for that instance: the sighting is recorded
// only after that check, and a refusal is reported.
package nodecleanup

import (
	"cmp"
	"context"
	"log/slog"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilcache "k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/ownership"
	"lifeboat.dev/lifeboat/internal/panics"
)

// AnnotationGone records, on a Node, the instance EC2 was seen shutting down or terminating
// while it described it as this Node: "<instance-id> <state> <RFC 3339 time>".
const AnnotationGone = nodes.AnnotationPrefix + "instance-gone"

// Reporter makes each deletion and refusal visible.
type Reporter interface {
	Deleted(node *corev1.Node, instanceID, why string)
	// Refused says the node is not deleted: EC2 does not describe the instance it names as
	// the node (the node-cleanup path's gate refused its claim).
	Refused(node *corev1.Node, instanceID string, claim ownership.Claim)
}

// refusalRepeat is how long a refusal is not said again for the same node and instance: a
// refusal stands pass after pass, and is repeated at this rate rather than every pass or once.
const refusalRepeat = time.Hour

// refusalsKept bounds the refusals remembered (one per node and instance).
const refusalsKept = 4096

// Cleaner deletes the Nodes of terminated instances.
type Cleaner struct {
	Client   kubernetes.Interface
	EC2      cloud.EC2
	Nodes    cache.Store // the controller's node informer
	Interval time.Duration
	Log      *slog.Logger
	Report   Reporter
	Panics   panics.Counter
	// Repeat is how long a refusal is not said again; default an hour.
	Repeat time.Duration
	// Clock times Repeat; default the real clock.
	Clock   clock.PassiveClock
	refused *utilcache.LRUExpireCache // node/instance pairs reported refused lately
}

// Run makes a pass every Interval until ctx ends. A pass that panics (a Node's content is
// input) is recovered and counted; the next pass goes on.
func (c *Cleaner) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(c.Interval):
		}
		_ = panics.Do(panics.NodeCleanup, c.Log, c.Panics, func() {
			if err := c.Pass(ctx); err != nil && ctx.Err() == nil {
				c.Log.Warn("node clean-up pass incomplete; the next pass asks again", "err", err)
			}
		})
	}
}

// Pass looks once at every Node whose kubelet stopped. Every Node that names an instance is
// looked at, whatever the order the informer lists them in: a Node that claims another
// Node's instance is refused, and never hides the Node EC2 describes.
func (c *Cleaner) Pass(ctx context.Context) error {
	if c.refused == nil {
		var clk clock.PassiveClock = clock.RealClock{}
		if c.Clock != nil {
			clk = c.Clock
		}
		c.refused = utilcache.NewLRUExpireCacheWithClock(refusalsKept, clk)
	}
	byInstance := map[string][]*corev1.Node{}
	for _, o := range c.Nodes.List() {
		n, ok := o.(*corev1.Node)
		if !ok || readyTrue(n) {
			continue
		}
		if id := ownership.InstanceIDFromProviderID(n.Spec.ProviderID); id != "" {
			byInstance[id] = append(byInstance[id], n)
		}
	}
	if len(byInstance) == 0 {
		return nil
	}
	ids := slices.Sorted(maps.Keys(byInstance))
	described, err := c.EC2.DescribeInstances(ctx, ids)
	if err != nil {
		return err
	}
	for _, id := range ids {
		inst, found := described[id]
		for _, n := range byInstance[id] {
			c.decide(ctx, n, id, inst, found)
		}
	}
	return nil
}

// decide deletes the node, records a sighting, refuses, or leaves it.
func (c *Cleaner) decide(ctx context.Context, n *corev1.Node, id string, inst cloud.Instance, found bool) {
	switch {
	case !found && sighted(n, id):
		c.delete(ctx, n, id, "EC2 no longer describes instance "+id+", recorded earlier as "+n.Annotations[AnnotationGone])
	case !found:
	case inst.State != "terminated" && inst.State != "shutting-down":
	case inst.State == "terminated" && sighted(n, id): // a terminated instance may no longer name its addresses
		c.delete(ctx, n, id, "EC2 says instance "+id+" is terminated, recorded earlier as "+n.Annotations[AnnotationGone])
	case ownership.Confirm(ownership.PathNodeCleanup, n, inst, found) != nil:
		c.refuse(n, id, *ownership.Confirm(ownership.PathNodeCleanup, n, inst, found))
	case inst.State == "terminated":
		c.delete(ctx, n, id, "EC2 says instance "+id+" is terminated")
	case !sighted(n, id):
		c.sight(ctx, n, id, inst.State)
	}
}

// refuse says, at most once per Repeat for a node and instance, that the node is not deleted.
func (c *Cleaner) refuse(n *corev1.Node, id string, claim ownership.Claim) {
	key := n.Name + "/" + string(n.UID) + "/" + id
	if _, said := c.refused.Get(key); said {
		return
	}
	c.refused.Add(key, struct{}{}, cmp.Or(c.Repeat, refusalRepeat))
	c.Report.Refused(n, id, claim)
}

func (c *Cleaner) sight(ctx context.Context, n *corev1.Node, id, state string) {
	value := id + " " + state + " " + time.Now().UTC().Format(time.RFC3339)
	_, err := nodes.NewWriter(c.Client).Apply(ctx, n.Name, n, "record the instance going away", func(node *corev1.Node) {
		if node.Annotations == nil {
			node.Annotations = map[string]string{}
		}
		node.Annotations[AnnotationGone] = value
	})
	if err != nil {
		c.Log.Warn("could not record that the node's instance is going away", "node", n.Name, "instance", id, "err", err)
	}
}

func (c *Cleaner) delete(ctx context.Context, n *corev1.Node, id, why string) {
	uid := n.UID
	err := c.Client.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	switch {
	case err == nil:
		c.Report.Deleted(n, id, why)
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
	default:
		c.Log.Warn("could not delete the node of a terminated instance", "node", n.Name, "instance", id, "err", err)
	}
}

// sighted reports whether the node records its instance id going away.
func sighted(n *corev1.Node, id string) bool {
	v := n.Annotations[AnnotationGone]
	return len(v) > len(id) && v[:len(id)+1] == id+" "
}

func readyTrue(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
