// SPDX-License-Identifier: Apache-2.0

// Package instancegate decides whether Lifeboat may make an AWS call that acts on an instance
// (complete or heartbeat its lifecycle action, terminate a retained instance)
// for a node's episode.
//
// The episode's record lives in the Node's annotations, which any credential that may write
// the Node (its kubelet, the agent's token) can write too, and so may its providerID be, once.
// So the instance and the Auto Scaling group a call names are never taken from the record
// alone: the Node, read fresh, must hold the instance (in controller mode its providerID names
// the instance or is empty, and EC2 describes the instance as the Node: see
// ownership.DescribedAs; in agent mode it is the instance the process runs on), and Auto
// Scaling must report it in the named group. A refusal is final for that call: retrying cannot
// make a forged record true.
package instancegate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/client-go/kubernetes"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/ownership"
	"lifeboat.dev/lifeboat/internal/text"
)

// Calls the gate guards, as they are named in logs, Events and metrics.
const (
	CallCompleteLifecycleAction = "CompleteLifecycleAction"
	CallLifecycleHeartbeat      = "RecordLifecycleActionHeartbeat"
	CallTerminateInstance       = "TerminateInstanceInAutoScalingGroup"
	// CallSetInstanceHealth marks an impaired instance Unhealthy in its group, which then
	// terminates and replaces it.
	CallSetInstanceHealth = "SetInstanceHealth"
	// CallTerminateInstances terminates a repaired node's instance (NODE_REPAIR_ACTION=terminate).
	CallTerminateInstances = "TerminateInstances"
	// CallRebootInstances reboots a repaired node's instance (a policy's reboot step).
	CallRebootInstances = "RebootInstances"
)

// Request is one call about to be made for a node's episode.
type Request struct {
	Call       string // what would be called (CallCompleteLifecycleAction, ...)
	Node       string // the Node whose episode asks for it
	InstanceID string // the instance the call would name
	Group      string // the Auto Scaling group the call would name; "" when it names none
}

// Refusal is a call the gate refused. It names both instances: the one asked for and the one
// the Node names ("" when the Node names none).
type Refusal struct {
	Request
	NodeInstance string
	Reason       string
}

func (r *Refusal) Error() string {
	return fmt.Sprintf("%s for instance %s refused: node %s is instance %s: %s", r.Call, r.InstanceID, r.Node, orNone(r.NodeInstance), r.Reason)
}

func orNone(s string) string {
	if s == "" {
		return "(unknown)"
	}
	return s
}

// IsRefusal reports whether err is (or wraps) a Refusal, and returns it.
func IsRefusal(err error) (*Refusal, bool) {
	var r *Refusal
	ok := errors.As(err, &r)
	return r, ok
}

// Groups tells an instance's Auto Scaling group ("" when it is in none); cloud.AutoScaling
// implements it with DescribeAutoScalingInstances.
type Groups interface {
	GroupOf(ctx context.Context, instanceID string) (string, error)
}

// Options configure a Gate.
type Options struct {
	// Nodes reads the Node fresh from the API server.
	Nodes kubernetes.Interface
	// Groups answers which group an instance is in.
	Groups Groups
	// Instances, in controller mode, is EC2's description of instances: the Node must be the
	// instance as EC2 describes it. Without it (and without LocalInstance) only the Node's
	// providerID is checked.
	Instances Describer
	// LocalInstance, in agent mode, is the instance the process runs on, from instance
	// metadata: the only instance the Node can be.
	LocalInstance string
	// GroupTTL is how long an instance's group is remembered; an instance does not change
	// group while it runs, but may be detached. Zero means DefaultGroupTTL.
	GroupTTL time.Duration
	// Refused, when set, is told of each refusal (for metrics).
	Refused func(call string)
}

// Describer is EC2's description of an instance (ownership.Instances, cached and batched).
type Describer interface {
	Describe(ctx context.Context, instanceID string) (inst cloud.Instance, found bool, err error)
}

// DefaultGroupTTL bounds how long an instance's group answer is reused.
const DefaultGroupTTL = 10 * time.Minute

// groupCacheSize bounds the remembered groups: one per instance acted on recently.
const groupCacheSize = 4096

// Gate checks calls before they are made. It is safe for concurrent use.
type Gate struct {
	opts   Options
	groups *cache.LRUExpireCache
}

// New builds a Gate.
func New(opts Options) *Gate {
	if opts.GroupTTL <= 0 {
		opts.GroupTTL = DefaultGroupTTL
	}
	return &Gate{opts: opts, groups: cache.NewLRUExpireCache(groupCacheSize)}
}

// Check returns nil when the call may be made, a *Refusal when it must not be (ever, for this
// request), or another error when it cannot be decided yet (the API server or AWS failed: try
// again).
func (g *Gate) Check(ctx context.Context, req Request) error {
	if err := g.check(ctx, req); err != nil {
		if r, ok := IsRefusal(err); ok && g.opts.Refused != nil {
			g.opts.Refused(r.Call)
		}
		return err
	}
	return nil
}

func (g *Gate) check(ctx context.Context, req Request) error {
	refuse := func(nodeInstance, reason string, args ...any) error {
		return &Refusal{Request: req, NodeInstance: nodeInstance, Reason: fmt.Sprintf(reason, args...)}
	}
	if !notice.ValidInstanceID(req.InstanceID) {
		return refuse("", "%q is not an EC2 instance id", clip(req.InstanceID))
	}
	node, err := g.opts.Nodes.CoreV1().Nodes().Get(ctx, req.Node, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return refuse("", "the node no longer exists, so its instance cannot be confirmed")
	case err != nil:
		return fmt.Errorf("%s for instance %s: read node %s: %w", req.Call, req.InstanceID, req.Node, err)
	}
	nodeInstance, why, err := g.nodeInstance(ctx, node, req.InstanceID)
	if err != nil {
		return fmt.Errorf("%s for instance %s: %w", req.Call, req.InstanceID, err)
	}
	if why != "" {
		return refuse(nodeInstance, "%s", why)
	}
	if req.Group == "" {
		return nil
	}
	group, err := g.groupOf(ctx, req.InstanceID)
	if err != nil {
		return fmt.Errorf("%s for instance %s: %w", req.Call, req.InstanceID, err)
	}
	if group != req.Group {
		if group == "" {
			return refuse(nodeInstance, "Auto Scaling reports the instance in no group, not in group %q", clip(req.Group))
		}
		return refuse(nodeInstance, "Auto Scaling reports the instance in group %q, not in group %q", group, clip(req.Group))
	}
	return nil
}

// nodeInstance is the instance the Node names (its providerID's, "" when it has none) and,
// when the Node does not hold want, why not.
func (g *Gate) nodeInstance(ctx context.Context, node *corev1.Node, want string) (string, string, error) {
	named := ownership.InstanceIDFromProviderID(node.Spec.ProviderID)
	switch {
	case node.Spec.ProviderID != "" && named != want:
		return named, fmt.Sprintf("the node's providerID %q names another instance", clip(node.Spec.ProviderID)), nil
	case g.opts.LocalInstance != "":
		if want != g.opts.LocalInstance {
			return g.opts.LocalInstance, fmt.Sprintf("instance metadata says this node is instance %s", g.opts.LocalInstance), nil
		}
		return want, "", nil
	case g.opts.Instances == nil && node.Spec.ProviderID == "":
		return "", "the node does not name the instance: it has no providerID", nil
	case g.opts.Instances == nil:
		return named, "", nil
	}
	inst, found, err := g.opts.Instances.Describe(ctx, want)
	switch {
	case err != nil:
		return named, "", fmt.Errorf("check node %s against EC2: %w", node.Name, err)
	case !found:
		return named, "EC2 does not know the instance, so the node's claim to it cannot be checked", nil
	case inst.PrivateDNSName == "" && len(inst.PrivateIPs) == 0:
		return named, fmt.Sprintf("EC2 describes the instance (state %q) without a private DNS name or IP, so the node's claim to it cannot be checked", inst.State), nil
	case ownership.DescribedAs(inst, node) == "":
		return named, fmt.Sprintf("EC2 describes the instance (%s) as another node", ownership.Describe(inst)), nil
	}
	return want, "", nil
}

// KnownGroups are the Auto Scaling groups of the instances the gate has checked within
// GroupTTL, sorted: the groups of this cluster's nodes that had lifecycle work.
func (g *Gate) KnownGroups() []string {
	var out []string
	for _, k := range g.groups.Keys() {
		if v, ok := g.groups.Get(k); ok {
			if group := v.(string); group != "" && !slices.Contains(out, group) {
				out = append(out, group)
			}
		}
	}
	slices.Sort(out)
	return out
}

// CheckNodeless is Check for a call about an instance no Node of this cluster names any more
// (a retained instance whose Node is gone): there is no Node to hold it, so the call rests on
// the instance's ownership tags (tagsRefusal: why they say it is not this cluster's, "" when
// they say it is, decided from EC2's description) and on Auto Scaling reporting the instance
// in req.Group. req.Node is ignored.
func (g *Gate) CheckNodeless(ctx context.Context, req Request, tagsRefusal string) error {
	req.Node = "(none)"
	err := g.checkNodeless(ctx, req, tagsRefusal)
	if r, ok := IsRefusal(err); ok && g.opts.Refused != nil {
		g.opts.Refused(r.Call)
	}
	return err
}

func (g *Gate) checkNodeless(ctx context.Context, req Request, tagsRefusal string) error {
	refuse := func(reason string, args ...any) error {
		return &Refusal{Request: req, Reason: fmt.Sprintf(reason, args...)}
	}
	switch {
	case !notice.ValidInstanceID(req.InstanceID):
		return refuse("%q is not an EC2 instance id", clip(req.InstanceID))
	case tagsRefusal != "":
		return refuse("%s", tagsRefusal)
	case req.Group == "":
		return refuse("the call names no Auto Scaling group")
	}
	group, err := g.groupOf(ctx, req.InstanceID)
	if err != nil {
		return fmt.Errorf("%s for instance %s: %w", req.Call, req.InstanceID, err)
	}
	if group != req.Group {
		return refuse("Auto Scaling reports the instance in group %q, not in group %q", group, clip(req.Group))
	}
	return nil
}

// GroupOf is the instance's Auto Scaling group ("" when it is in none), as the gate knows it:
// a call that names no group of its own (SetInstanceHealth) is checked against it.
func (g *Gate) GroupOf(ctx context.Context, instanceID string) (string, error) {
	return g.groupOf(ctx, instanceID)
}

// groupOf asks Auto Scaling once per instance within GroupTTL.
func (g *Gate) groupOf(ctx context.Context, instanceID string) (string, error) {
	if v, ok := g.groups.Get(instanceID); ok {
		return v.(string), nil
	}
	group, err := g.opts.Groups.GroupOf(ctx, instanceID)
	if err != nil {
		return "", err
	}
	g.groups.Add(instanceID, group, g.opts.GroupTTL)
	return group, nil
}

// clip keeps a value read from a record short in messages.
func clip(s string) string {
	return text.Clip(s, 80, "…")
}
