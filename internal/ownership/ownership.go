// SPDX-License-Identifier: Apache-2.0

// Package ownership decides whether an instance named by a queue notice belongs to this
// cluster, before anything is done about it (docs/architecture.md, invariant 5).
//
// An instance is this cluster's when a Node here holds it: EC2's description of the instance
// names the Node (its private DNS name is the Node's name, or its private IP one of the
// Node's InternalIPs) and the Node's providerID names the instance (or, with UseProviderID
// off, the Node has none). A Node whose providerID names an instance EC2 describes as another
// node is a refused claim (see Claim): it never silences the notice, which is handled on the
// node EC2 describes. The instance also carries the managed tag when CheckManagedTag is on,
// and kubernetes.io/cluster/<ClusterName> = owned|shared when a cluster name is configured.
//
// Nodes are found through indexes on the node informer, never by listing. EC2 is asked
// through Instances: lookups that arrive together share one DescribeInstances call and
// answers are cached for a while, so a burst of notices costs a handful of EC2 calls.
package ownership

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"lifeboat.dev/lifeboat/internal/cloud"
)

// IndexInstanceID is the name of the node informer index added by NewResolver: the EC2
// instance id in each Node's spec.providerID.
const IndexInstanceID = "lifeboat.dev/instance-id"

// ClusterTagPrefix starts the tag that says which cluster an instance belongs to.
const ClusterTagPrefix = "kubernetes.io/cluster/"

// Options are the identity settings (NTH's environment names in the comments).
type Options struct {
	CheckManagedTag bool   // CHECK_TAG_BEFORE_DRAINING
	ManagedTag      string // MANAGED_TAG (key only; the value is ignored)
	ClusterName     string // CLUSTER_NAME; "" = no cluster-tag check
	UseProviderID   bool   // USE_PROVIDER_ID
	// Claims, when set, is told of every refused claim.
	Claims ClaimReporter
}

// Verdict is the answer for one instance.
type Verdict struct {
	InstanceID string
	// Node is this cluster's Node for the instance (a copy, free to change), or nil when
	// there is none.
	Node *corev1.Node
	// Owned says the instance is this cluster's and may be acted on.
	Owned bool
	// Reason says why it is not owned ("" when it is).
	Reason string
	// Refused are the Nodes whose claim to the instance EC2 does not bear out; each was
	// reported to Options.Claims.
	Refused []Claim
	// Untagged says the instance is this cluster's Node as EC2 describes it, but its tags (the
	// managed tag, or this cluster's tag) say not to act on it: a wiring problem of this
	// cluster, not another cluster's instance, and said as such.
	Untagged bool
	// ClaimRefused says the subject's Node (Subject.Node) is not the instance as EC2 describes
	// it: the reason it was read for is refused, which is not the same as another cluster's
	// instance.
	ClaimRefused bool
}

// Resolver answers Verdicts. It is safe for concurrent use.
type Resolver struct {
	nodes     cache.Indexer
	instances *Instances
	opts      Options
	warnings  []string
}

// NewResolver adds the instance-id and internal-IP indexes to the node informer, so it must
// be called before the informer starts. Lookups in instances also ask about the cluster's
// other nodes' instances from then on.
func NewResolver(nodes cache.SharedIndexInformer, instances *Instances, opts Options) (*Resolver, error) {
	if nodes == nil {
		return nil, errors.New("ownership: no node informer")
	}
	if instances == nil {
		return nil, errors.New("ownership: no EC2 instance descriptions to check nodes against")
	}
	opts.ManagedTag = strings.TrimSpace(opts.ManagedTag)
	opts.ClusterName = strings.TrimSpace(opts.ClusterName)
	if opts.CheckManagedTag && opts.ManagedTag == "" {
		return nil, errors.New("ownership: CHECK_TAG_BEFORE_DRAINING is on but MANAGED_TAG is empty")
	}
	indexers := cache.Indexers{}
	have := nodes.GetIndexer().GetIndexers()
	for name, f := range map[string]cache.IndexFunc{IndexInstanceID: indexByInstanceID, IndexInternalIP: indexByInternalIP} {
		if _, ok := have[name]; !ok {
			indexers[name] = f
		}
	}
	if len(indexers) > 0 {
		if err := nodes.AddIndexers(indexers); err != nil {
			return nil, fmt.Errorf("ownership: add node indexes: %w", err)
		}
	}
	r := &Resolver{nodes: nodes.GetIndexer(), instances: instances, opts: opts}
	instances.PrefetchFrom(func() []string { return r.nodes.ListIndexFuncValues(IndexInstanceID) })
	if opts.ClusterName == "" {
		r.warnings = append(r.warnings, "CLUSTER_NAME is unset: instances are not checked for the "+ClusterTagPrefix+"<name> tag, so notices from a queue shared with another cluster are trusted as long as a matching node exists here")
	}
	if !opts.CheckManagedTag {
		r.warnings = append(r.warnings, "CHECK_TAG_BEFORE_DRAINING is false: any instance with a matching node in this cluster is acted on, whatever its tags")
	}
	return r, nil
}

// Warnings lists the risky identity settings, to be logged at start.
func (r *Resolver) Warnings() []string {
	return append([]string(nil), r.warnings...)
}

// InstanceIDFromProviderID returns the instance id in an aws:///<zone>/<instance-id>
// providerID, or "" when providerID names no EC2 instance.
func InstanceIDFromProviderID(providerID string) string {
	rest, ok := strings.CutPrefix(providerID, "aws://")
	if !ok {
		return ""
	}
	id := rest[strings.LastIndexByte(rest, '/')+1:]
	if !strings.HasPrefix(id, "i-") || len(id) == len("i-") {
		return ""
	}
	return id
}

func indexByInstanceID(obj any) ([]string, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return nil, nil
	}
	if id := InstanceIDFromProviderID(n.Spec.ProviderID); id != "" {
		return []string{id}, nil
	}
	return nil, nil
}

// Resolve decides whether the subject's instance is this cluster's and which Node holds it.
// When the path read its reason from a Node (s.Node), the instance is acted on only if that
// Node holds it. An error means the answer is not known yet (EC2 failed, ctx ended): the
// caller should retry later, the notice is not foreign.
func (r *Resolver) Resolve(ctx context.Context, s Subject) (Verdict, error) {
	v, err := r.resolve(ctx, s)
	if err != nil || s.Node == "" || (v.Node != nil && v.Node.Name == s.Node) {
		return v, err
	}
	// The reason was read from a Node that is not the instance as EC2 describes it.
	v.ClaimRefused, v.Owned = true, false
	holder := "no node of this cluster"
	if v.Node != nil {
		holder = "node " + v.Node.Name
	}
	v.Reason = fmt.Sprintf("the %s reason was read from node %s, but EC2 describes instance %s as %s", s.Path, s.Node, s.InstanceID, holder)
	v.Node = nil
	if !slices.ContainsFunc(v.Refused, func(c Claim) bool { return c.Claimant.Name == s.Node }) {
		if obj, exists, _ := r.nodes.GetByKey(s.Node); exists {
			c := Claim{Path: s.Path, Claimant: obj.(*corev1.Node).DeepCopy(), InstanceID: s.InstanceID, Described: v.Reason}
			v.Refused = append(v.Refused, c)
			r.report(c)
		}
	}
	return v, nil
}

func (r *Resolver) report(c Claim) {
	if r.opts.Claims != nil {
		r.opts.Claims.ClaimRefused(c)
	}
}

func (r *Resolver) resolve(ctx context.Context, s Subject) (Verdict, error) {
	instanceID := s.InstanceID
	v := Verdict{InstanceID: instanceID}
	if instanceID == "" {
		v.Reason = "the notice names no instance"
		return v, nil
	}
	claimants, err := r.claimants(instanceID)
	if err != nil {
		return v, err
	}
	inst, found, err := r.instances.Describe(ctx, instanceID)
	if err != nil {
		return v, fmt.Errorf("ownership of %s: %w", instanceID, err)
	}
	if !found {
		v.Reason = unknownToEC2(instanceID, claimants)
		return v, nil
	}
	if inst.PrivateDNSName == "" && len(inst.PrivateIPs) == 0 {
		// A terminated instance has neither any more: no claim can be checked, and there is
		// nothing left on it to drain.
		v.Reason = fmt.Sprintf("EC2 describes instance %s (state %q) without a private DNS name or IP, so which node it is cannot be checked", instanceID, inst.State)
		return v, nil
	}
	described, err := r.described(inst)
	if err != nil {
		return v, err
	}
	v.Refused = r.falseClaims(s.Path, inst, claimants, described)
	node, reason, misnamed := r.holder(s.Path, inst, described, len(v.Refused) > 0)
	v.Refused = append(v.Refused, misnamed...)
	for i := range v.Refused {
		if node != nil {
			v.Refused[i].Holder = node.Name
		}
		r.report(v.Refused[i])
	}
	if node == nil {
		v.Reason = reason
		return v, nil
	}
	v.Node = node.DeepCopy()
	v.Reason = r.tagsRefuse(instanceID, inst.Tags)
	v.Owned = v.Reason == ""
	v.Untagged = !v.Owned
	return v, nil
}

// unknownToEC2 is why an instance EC2 does not describe is not acted on.
func unknownToEC2(instanceID string, claimants []*corev1.Node) string {
	if len(claimants) == 0 {
		return fmt.Sprintf("no node in this cluster names %s, and the instance is unknown to EC2", instanceID)
	}
	return fmt.Sprintf("instance %s is unknown to EC2, so the claim of node %s to it cannot be checked", instanceID, nodeNames(claimants))
}

// falseClaims are the claimants EC2 does not describe as the instance.
func (r *Resolver) falseClaims(path Path, inst cloud.Instance, claimants, described []*corev1.Node) []Claim {
	var out []Claim
	for _, c := range claimants {
		if slices.ContainsFunc(described, func(d *corev1.Node) bool { return d.Name == c.Name }) {
			continue
		}
		out = append(out, Claim{Path: path, Claimant: c.DeepCopy(), InstanceID: inst.ID, Described: Describe(inst)})
	}
	return out
}

// TagsRefusal is why EC2's description of the instance says it is not this cluster's to act
// on ("" when its tags say it is), for an instance no Node may name any more (a retained
// instance whose Node is gone). Stricter than for a notice: without CLUSTER_NAME there is no
// cluster tag to rest on, and the answer is a refusal.
func (r *Resolver) TagsRefusal(ctx context.Context, instanceID string) (string, error) {
	if r.opts.ClusterName == "" {
		return "CLUSTER_NAME is unset, so the instance's cluster tag cannot be checked", nil
	}
	inst, found, err := r.instances.Describe(ctx, instanceID)
	switch {
	case err != nil:
		return "", fmt.Errorf("ownership of %s: %w", instanceID, err)
	case !found:
		return fmt.Sprintf("instance %s is unknown to EC2", instanceID), nil
	}
	return r.tagsRefuse(instanceID, inst.Tags), nil
}

// tagsRefuse is why the instance's tags say it is not this cluster's to act on, or "".
func (r *Resolver) tagsRefuse(instanceID string, tags map[string]string) string {
	if r.opts.CheckManagedTag {
		if _, ok := tags[r.opts.ManagedTag]; !ok {
			return fmt.Sprintf("instance %s is missing the managed tag %s", instanceID, r.opts.ManagedTag)
		}
	}
	if r.opts.ClusterName != "" {
		key := ClusterTagPrefix + r.opts.ClusterName
		switch val, ok := tags[key]; {
		case !ok:
			return fmt.Sprintf("instance %s is missing the cluster tag %s", instanceID, key)
		case val != "owned" && val != "shared":
			return fmt.Sprintf("instance %s has cluster tag %s=%q, neither owned nor shared", instanceID, key, val)
		}
	}
	return ""
}

// NodesNaming are the Nodes whose providerID names the instance (copies): whose claim it is,
// not which Node EC2 describes (for saying what a failed lookup holds up, never for acting).
func (r *Resolver) NodesNaming(instanceID string) []*corev1.Node {
	nodes, _ := r.claimants(instanceID)
	out := make([]*corev1.Node, len(nodes))
	for i, n := range nodes {
		out[i] = n.DeepCopy()
	}
	return out
}

// claimants are the Nodes whose providerID names the instance.
func (r *Resolver) claimants(instanceID string) ([]*corev1.Node, error) {
	objs, err := r.nodes.ByIndex(IndexInstanceID, instanceID)
	if err != nil {
		return nil, fmt.Errorf("ownership of %s: node index: %w", instanceID, err)
	}
	var found []*corev1.Node
	for _, o := range objs {
		if n, ok := o.(*corev1.Node); ok {
			found = append(found, n)
		}
	}
	return found, nil
}

func nodeNames(nodes []*corev1.Node) string {
	names := make([]string, len(nodes))
	for i, n := range nodes {
		names[i] = n.Name
	}
	return strings.Join(names, ", ")
}
