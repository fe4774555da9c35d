// Package ownership decides whether an instance named by a queue notice belongs to this
// cluster, before anything is done about it (docs/architecture.md, invariant 5).
//
// An instance is this cluster's when a Node here names it in spec.providerID (or, only with
// UseProviderID off, a Node named after the instance's private DNS name that names no other
// instance), it carries the managed tag when CheckManagedTag is on, and it carries
// kubernetes.io/cluster/<ClusterName> = owned|shared when a cluster name is configured.
//
// Nodes are found through an index on the node informer, never by listing. EC2 is asked only
// when a check needs it; lookups that arrive together share one DescribeInstances call and
// answers are cached for a while, so a burst of notices costs a handful of EC2 calls.
package ownership

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/panics"
)

// IndexInstanceID is the name of the node informer index added by NewResolver: the EC2
// instance id in each Node's spec.providerID.
const IndexInstanceID = "lifeboat.dev/instance-id"

// ClusterTagPrefix starts the tag that says which cluster an instance belongs to.
const ClusterTagPrefix = "kubernetes.io/cluster/"

// Defaults for the zero Options fields.
const (
	DefaultCacheTTL    = time.Minute
	DefaultBatchWindow = 50 * time.Millisecond
)

// lookupTimeout bounds one batched DescribeInstances. The call is shared by every notice in
// the batch, so it runs under its own context rather than any single caller's.
const lookupTimeout = 30 * time.Second

// Options are the identity settings (NTH's environment names in the comments).
type Options struct {
	CheckManagedTag bool          // CHECK_TAG_BEFORE_DRAINING
	ManagedTag      string        // MANAGED_TAG (key only; the value is ignored)
	ClusterName     string        // CLUSTER_NAME; "" = no cluster-tag check
	UseProviderID   bool          // USE_PROVIDER_ID
	CacheTTL        time.Duration // how long EC2 answers are reused (0: DefaultCacheTTL)
	BatchWindow     time.Duration // lookups arriving within it share one call (0: DefaultBatchWindow)
	// Logger and Panics report a batched DescribeInstances that panicked (site
	// instance_lookup): it fails its lookups as an error does. Logger defaults to slog.Default().
	Logger *slog.Logger
	Panics panics.Counter
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
}

// Resolver answers Verdicts. It is safe for concurrent use.
type Resolver struct {
	nodes    cache.Indexer
	ec2      cloud.EC2
	opts     Options
	warnings []string
	now      func() time.Time // replaced in tests

	mu       sync.Mutex
	answers  map[string]answer  // EC2 answers by instance id
	inflight map[string]*lookup // ids queued or being asked for
	open     *batch             // the batch still taking ids, if any
	pruned   time.Time
}

// answer is a cached EC2 answer: found is false for an instance EC2 does not know.
type answer struct {
	inst  cloud.Instance
	found bool
	at    time.Time
}

// lookup is one instance id waiting for its batch; done is closed once inst, found and err
// are set.
type lookup struct {
	done  chan struct{}
	inst  cloud.Instance
	found bool
	err   error
}

type batch struct {
	ids   []string
	timer *time.Timer
}

// NewResolver adds the instance-id index to the node informer, so it must be called before
// the informer starts. ec2 may be nil only when no setting needs EC2 (tag checks off and
// UseProviderID on).
func NewResolver(nodes cache.SharedIndexInformer, ec2 cloud.EC2, opts Options) (*Resolver, error) {
	if nodes == nil {
		return nil, errors.New("ownership: no node informer")
	}
	if opts.CacheTTL < 0 {
		return nil, fmt.Errorf("ownership: cache TTL %s is negative", opts.CacheTTL)
	}
	if opts.BatchWindow < 0 {
		return nil, fmt.Errorf("ownership: batch window %s is negative", opts.BatchWindow)
	}
	if opts.CacheTTL == 0 {
		opts.CacheTTL = DefaultCacheTTL
	}
	if opts.BatchWindow == 0 {
		opts.BatchWindow = DefaultBatchWindow
	}
	opts.ManagedTag = strings.TrimSpace(opts.ManagedTag)
	opts.ClusterName = strings.TrimSpace(opts.ClusterName)
	if opts.CheckManagedTag && opts.ManagedTag == "" {
		return nil, errors.New("ownership: CHECK_TAG_BEFORE_DRAINING is on but MANAGED_TAG is empty")
	}
	if ec2 == nil && needsEC2(opts) {
		return nil, errors.New("ownership: an EC2 client is needed for tag checks and private DNS name matching")
	}
	if _, ok := nodes.GetIndexer().GetIndexers()[IndexInstanceID]; !ok {
		if err := nodes.AddIndexers(cache.Indexers{IndexInstanceID: indexByInstanceID}); err != nil {
			return nil, fmt.Errorf("ownership: add node index %s: %w", IndexInstanceID, err)
		}
	}
	r := &Resolver{
		nodes:    nodes.GetIndexer(),
		ec2:      ec2,
		opts:     opts,
		now:      time.Now,
		answers:  map[string]answer{},
		inflight: map[string]*lookup{},
	}
	if opts.ClusterName == "" {
		r.warnings = append(r.warnings, "CLUSTER_NAME is unset: instances are not checked for the "+ClusterTagPrefix+"<name> tag, so notices from a queue shared with another cluster are trusted as long as a matching node exists here")
	}
	if !opts.CheckManagedTag {
		r.warnings = append(r.warnings, "CHECK_TAG_BEFORE_DRAINING is false: any instance with a matching node in this cluster is acted on, whatever its tags")
	}
	return r, nil
}

func needsEC2(o Options) bool {
	return o.CheckManagedTag || o.ClusterName != "" || !o.UseProviderID
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

// Resolve decides whether instanceID is this cluster's. An error means the answer is not
// known yet (EC2 failed, ctx ended): the caller should retry later, the notice is not foreign.
func (r *Resolver) Resolve(ctx context.Context, instanceID string) (Verdict, error) {
	v := Verdict{InstanceID: instanceID}
	if instanceID == "" {
		v.Reason = "the notice names no instance"
		return v, nil
	}
	node, reason, err := r.nodeByProviderID(instanceID)
	if err != nil {
		return v, err
	}
	if reason != "" {
		v.Reason = reason
		return v, nil
	}
	if node == nil && r.opts.UseProviderID {
		v.Reason = fmt.Sprintf("no node in this cluster has a providerID naming %s (USE_PROVIDER_ID=true: private DNS names are not matched)", instanceID)
		return v, nil
	}
	if node != nil && !r.opts.CheckManagedTag && r.opts.ClusterName == "" {
		v.Node, v.Owned = node.DeepCopy(), true
		return v, nil
	}
	return r.resolveInEC2(ctx, v, node)
}

// resolveInEC2 decides from the instance as EC2 describes it: its private DNS name finds the
// node when its providerID did not, and its tags must be this cluster's.
func (r *Resolver) resolveInEC2(ctx context.Context, v Verdict, node *corev1.Node) (Verdict, error) {
	instanceID := v.InstanceID
	inst, found, err := r.instance(ctx, instanceID)
	if err != nil {
		return v, fmt.Errorf("ownership of %s: %w", instanceID, err)
	}
	if !found {
		if node == nil {
			v.Reason = fmt.Sprintf("no node in this cluster has a providerID naming %s, and the instance is unknown to EC2 (no private DNS name to match)", instanceID)
		} else {
			v.Reason = fmt.Sprintf("instance %s is unknown to EC2, so its tags cannot be checked", instanceID)
		}
		return v, nil
	}
	if node == nil {
		if node, v.Reason, err = r.nodeByDNSName(instanceID, inst.PrivateDNSName); node == nil || err != nil {
			return v, err
		}
	}
	v.Node = node.DeepCopy()
	v.Reason = r.tagsRefuse(instanceID, inst.Tags)
	v.Owned = v.Reason == ""
	return v, nil
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

// nodeByProviderID finds the Node whose providerID names the instance. Two such Nodes make
// the identity ambiguous, which is reported as a reason not to act.
func (r *Resolver) nodeByProviderID(instanceID string) (*corev1.Node, string, error) {
	objs, err := r.nodes.ByIndex(IndexInstanceID, instanceID)
	if err != nil {
		return nil, "", fmt.Errorf("ownership of %s: node index: %w", instanceID, err)
	}
	var found []*corev1.Node
	for _, o := range objs {
		if n, ok := o.(*corev1.Node); ok {
			found = append(found, n)
		}
	}
	switch len(found) {
	case 0:
		return nil, "", nil
	case 1:
		return found[0], "", nil
	}
	names := make([]string, len(found))
	for i, n := range found {
		names[i] = n.Name
	}
	return nil, fmt.Sprintf("ambiguous: nodes %s all have a providerID naming %s", strings.Join(names, ", "), instanceID), nil
}

// nodeByDNSName is the fallback match (UseProviderID off): the Node named after the
// instance's private DNS name, provided that it names no other instance.
func (r *Resolver) nodeByDNSName(instanceID, dnsName string) (*corev1.Node, string, error) {
	noNode := fmt.Sprintf("no node in this cluster has a providerID naming %s", instanceID)
	if dnsName == "" {
		return nil, noNode + ", and the instance has no private DNS name", nil
	}
	obj, exists, err := r.nodes.GetByKey(dnsName)
	if err != nil {
		return nil, "", fmt.Errorf("ownership of %s: node %s: %w", instanceID, dnsName, err)
	}
	n, ok := obj.(*corev1.Node)
	if !exists || !ok {
		return nil, fmt.Sprintf("%s or is named %s", noNode, dnsName), nil
	}
	if pid := n.Spec.ProviderID; pid != "" && InstanceIDFromProviderID(pid) != instanceID {
		return nil, fmt.Sprintf("node %s has the instance's private DNS name, but its providerID %q names another instance", n.Name, pid), nil
	}
	return n, "", nil
}

// instance returns EC2's answer for one id, from the cache or from the batch being formed.
func (r *Resolver) instance(ctx context.Context, id string) (cloud.Instance, bool, error) {
	r.mu.Lock()
	if a, ok := r.answers[id]; ok && r.now().Sub(a.at) < r.opts.CacheTTL {
		r.mu.Unlock()
		return a.inst, a.found, nil
	}
	l, ok := r.inflight[id]
	if !ok {
		l = &lookup{done: make(chan struct{})}
		r.inflight[id] = l
		r.enqueueLocked(id)
	}
	r.mu.Unlock()

	select {
	case <-l.done:
		return l.inst, l.found, l.err
	case <-ctx.Done():
		return cloud.Instance{}, false, fmt.Errorf("waiting for EC2 DescribeInstances: %w", ctx.Err())
	}
}

// enqueueLocked adds id to the open batch, opening one (sent when BatchWindow ends) if
// needed. A batch that reaches EC2's filter limit is sent at once.
func (r *Resolver) enqueueLocked(id string) {
	if r.open == nil {
		b := &batch{}
		b.timer = time.AfterFunc(r.opts.BatchWindow, func() { r.flush(b) })
		r.open = b
	}
	b := r.open
	b.ids = append(b.ids, id)
	if len(b.ids) >= cloud.MaxFilterValues {
		b.timer.Stop()
		r.open = nil
		go r.fetch(b.ids)
	}
}

// maxPrefetch bounds how many instances one lookup asks about in all.
const maxPrefetch = 1000

// flush sends b when its window ends, unless it was sent already for being full. The call
// also asks about this cluster's other nodes' instances that are not cached: notices tend to
// come in bursts (a Spot capacity reclaim, a scale-in), and one call then serves the burst.
func (r *Resolver) flush(b *batch) {
	r.mu.Lock()
	if r.open != b {
		r.mu.Unlock()
		return
	}
	r.open = nil
	ids := r.withPrefetchLocked(b.ids)
	r.mu.Unlock()
	r.fetch(ids)
}

// withPrefetchLocked adds up to maxPrefetch known node instances that are neither cached nor
// being fetched, registering them as in flight so concurrent lookups wait for this call.
func (r *Resolver) withPrefetchLocked(ids []string) []string {
	known := r.nodes.ListIndexFuncValues(IndexInstanceID)
	now := r.now()
	for _, id := range known {
		if len(ids) >= maxPrefetch {
			break
		}
		if a, ok := r.answers[id]; ok && now.Sub(a.at) < r.opts.CacheTTL {
			continue
		}
		if _, ok := r.inflight[id]; ok {
			continue
		}
		r.inflight[id] = &lookup{done: make(chan struct{})}
		ids = append(ids, id)
	}
	return ids
}

// describe asks EC2 about ids. A panic (a bug met on the answer) fails the batch as an error
// does: every lookup waiting on it is told, rather than waiting for ever, and is asked again.
func describe(ctx context.Context, ec2 cloud.EC2, ids []string, o Options) (found map[string]cloud.Instance, err error) {
	defer panics.Recover(panics.InstanceLookup, o.Logger, o.Panics, &err, "instances", len(ids))
	return ec2.DescribeInstances(ctx, ids)
}

// fetch asks EC2 about ids and hands the answer to everyone waiting. Errors are not cached.
func (r *Resolver) fetch(ids []string) {
	ctx, cancel := context.WithTimeout(context.Background(), lookupTimeout)
	found, err := describe(ctx, r.ec2, ids, r.opts)
	cancel()

	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	for _, id := range ids {
		l := r.inflight[id]
		delete(r.inflight, id)
		if err != nil {
			l.err = err
		} else {
			l.inst, l.found = found[id]
			r.answers[id] = answer{inst: l.inst, found: l.found, at: now}
		}
		close(l.done)
	}
	if now.Sub(r.pruned) >= r.opts.CacheTTL {
		for id, a := range r.answers {
			if now.Sub(a.at) >= r.opts.CacheTTL {
				delete(r.answers, id)
			}
		}
		r.pruned = now
	}
}
