// SPDX-License-Identifier: Apache-2.0

// Package status answers, read-only, "what is Lifeboat doing to my nodes, and what holds it":
// every node in an interruption episode with its notices, phase, deadline and time left, the
// pods still on it and why each is there, the volumes and (when asked) load-balancer targets
// still attached, and the lifecycle actions pending with their heartbeats. It reads what any Lifeboat wrote on the Nodes (the
// episode record) and what the API server holds (pods, budgets, attachments); it needs no
// running Lifeboat and changes nothing. `lifeboat status` prints it.
package status

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/detach"
	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/episode"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/output"
	"lifeboat.dev/lifeboat/internal/ownership"
	"lifeboat.dev/lifeboat/internal/record"
	"lifeboat.dev/lifeboat/internal/source/nodecondition"
	"lifeboat.dev/lifeboat/internal/wiring"
)

// Kind is the kind of a Report in JSON and YAML.
const Kind = "NodeStatusReport"

// Report is the state of every node in an episode, as read at At.
type Report struct {
	APIVersion string    `json:"apiVersion"` // output.APIVersion
	Kind       string    `json:"kind"`       // Kind
	At         time.Time `json:"at"`
	Nodes      []Node    `json:"nodes"`
	// TargetsRead says whether load-balancer targets were asked for (Options.Targets).
	TargetsRead bool `json:"targetsRead"`
	// Repairs is the node repair breaker (ENABLE_NODE_REPAIR, every node read).
	Repairs *nodecondition.Breaker `json:"repairs,omitempty"`
	// Untagged are the nodes with a notice not acted on in the last day because their
	// instance lacks the managed tag or this cluster's tag (a wiring problem to fix first).
	Untagged []HeldNode `json:"untagged,omitempty"`
	// Denied are the nodes with a notice held up in the last day because AWS refused a call
	// Lifeboat needs for want of permission.
	Denied []HeldNode `json:"awsDenied,omitempty"`
	// BelowSizing are the controller Deployments whose resources are below what the
	// controller is sized for (AnnotationBelowSizing), when Deployments can be listed.
	BelowSizing []BelowSizing `json:"belowSizing,omitempty"`
}

// HeldNode is a node whose notice the wiring held up.
type HeldNode struct {
	Node string `json:"node"`
	ownership.Note
}

// notesShown is how long a notice the wiring held up is shown.
const notesShown = 24 * time.Hour

// Node is one node's episode.
type Node struct {
	Name     string     `json:"name"`
	Instance string     `json:"instance,omitempty"`
	Phase    string     `json:"phase"`
	Deadline *time.Time `json:"deadline,omitempty"`
	// SecondsLeft is the time until the deadline, 0 once it passed.
	SecondsLeft *int64 `json:"secondsLeft,omitempty"`
	// Left is SecondsLeft for people ("-" once it passed).
	Left    string   `json:"-"`
	Owner   *Owner   `json:"owner,omitempty"`
	Notices []Notice `json:"notices"`
	// Pods are the pods still on the node, each with why it is there.
	Pods []Pod `json:"pods"`
	// Volumes are the volumes still attached to the node (VolumeAttachments).
	Volumes []string `json:"volumes,omitempty"`
	// Targets are the load-balancer targets of the instance and of its pods' IPs still
	// registered or draining ("id in group (state)"), when Options.Targets is set.
	Targets []string `json:"targets,omitempty"`
	// TargetsUnknown says why Targets could not be read.
	TargetsUnknown string `json:"targetsUnknown,omitempty"`
	// Lifecycle lists the Auto Scaling lifecycle actions waiting for the node's drain.
	Lifecycle []Lifecycle `json:"lifecycle,omitempty"`
	// Retained is set once a termination hook was abandoned to its group's retention.
	Retained *Retained `json:"retained,omitempty"`
}

// Owner is the Lifeboat draining the node.
type Owner struct {
	Origin  string    `json:"origin"`
	Holder  string    `json:"holder,omitempty"`
	Renewed time.Time `json:"renewed"`
	// Contested is when a Lifeboat of another origin started waiting for the drain; the
	// owner renews only from then on (see record.Owner).
	Contested *time.Time `json:"contested,omitempty"`
}

// Notice is one notice of the episode.
type Notice struct {
	ID       string     `json:"id"`
	Kind     string     `json:"kind"`
	Origin   string     `json:"origin,omitempty"`
	Deadline *time.Time `json:"deadline,omitempty"`
	// State is pending, finished or released; cordon-only when no drain can be scheduled.
	State string `json:"state"`
}

// Pod is a pod still on the node and why.
type Pod struct {
	Name string `json:"name"` // namespace/name
	// State is what happens to it: "to be evicted", "held", "leaves last", "stays", "terminating".
	State string `json:"state"`
	// Why says what holds it, or why it stays.
	Why string `json:"why,omitempty"`
}

// Lifecycle is a pending lifecycle action.
type Lifecycle struct {
	Notice     string     `json:"notice"`
	Group      string     `json:"group"`
	Hook       string     `json:"hook"`
	Heartbeats int        `json:"heartbeats"`
	LastBeat   *time.Time `json:"lastHeartbeat,omitempty"`
	// OnIncompleteDrain says how the action is completed if the drain cannot finish before
	// it expires: CONTINUE, or ABANDON when the group retains abandoned instances
	// (ABANDON_LIFECYCLE_ACTION_ON_INCOMPLETE_DRAIN).
	OnIncompleteDrain string `json:"onIncompleteDrain"`
}

// PhaseNone is the phase of a node named to Collect that is in no episode.
const PhaseNone = "none"

// Pod states.
const (
	StateToEvict     = "to be evicted"
	StateHeld        = "held"
	StateLeavesLast  = "leaves last"
	StateStays       = "stays"
	StateTerminating = "terminating"
)

// TargetReader lists the load-balancer targets still holding an instance or its pods' IPs;
// the hand-back's target wait is one.
type TargetReader interface {
	Held(ctx context.Context, s detach.Subject) ([]string, error)
}

// Options add what Kubernetes does not hold, and choose the nodes.
type Options struct {
	// Targets, when set, is asked for each node's load-balancer targets (ELBv2).
	Targets TargetReader
	// Nodes, when set, are the only nodes read: each is reported, in an episode or not
	// (phase "none"). Empty: every node in an episode.
	Nodes []string
}

// Collect reads every node's episode. cfg gives the drain's policy (IGNORE_DAEMON_SETS,
// DELETE_LOCAL_DATA, POD_NAME) and the plans of the notices, as the running Lifeboat has them.
func Collect(ctx context.Context, client kubernetes.Interface, cfg *config.Config, now time.Time, opts Options) (*Report, error) {
	nodes, err := readNodes(ctx, client, opts.Nodes)
	if err != nil {
		return nil, err
	}
	r := &Report{APIVersion: output.APIVersion, Kind: Kind, At: now, Nodes: []Node{}, TargetsRead: opts.Targets != nil,
		Repairs: repairBreaker(cfg, nodes, len(opts.Nodes) > 0)}
	if r.BelowSizing, err = belowSizing(ctx, client); err != nil {
		return nil, err
	}
	budgets := budgetCache{client: client, byNamespace: map[string][]policyv1.PodDisruptionBudget{}}
	var attachments map[string][]string
	for _, node := range nodes {
		if u, ok := ownership.NoteOf(node, ownership.AnnotationUntagged); ok && now.Sub(u.At) < notesShown {
			r.Untagged = append(r.Untagged, HeldNode{Node: node.Name, Note: u})
		}
		if d, ok := ownership.NoteOf(node, ownership.AnnotationDenied); ok && now.Sub(d.At) < notesShown && !recorded(node, d.Notice) {
			r.Denied = append(r.Denied, HeldNode{Node: node.Name, Note: d})
		}
		rec, err := record.Read(node)
		if err != nil || !rec.Open() {
			if len(opts.Nodes) > 0 { // asked for by name: say it is in no episode
				r.Nodes = append(r.Nodes, Node{Name: node.Name, Instance: episode.InstanceIDOf(node), Phase: PhaseNone,
					Notices: []Notice{}, Pods: []Pod{}})
			}
			continue
		}
		if attachments == nil {
			if attachments, err = attachedVolumes(ctx, client); err != nil {
				return nil, err
			}
		}
		n, podIPs, err := nodeStatus(ctx, client, cfg, node, rec, &budgets, now)
		if err != nil {
			return nil, err
		}
		n.Volumes = attachments[node.Name]
		if opts.Targets != nil {
			n.Targets, err = opts.Targets.Held(ctx, subjectOf(node, rec, podIPs))
			if err != nil {
				n.TargetsUnknown = err.Error()
			}
		}
		r.Nodes = append(r.Nodes, n)
	}
	return r, nil
}

// readNodes reads the named nodes, or every node when none is named.
func readNodes(ctx context.Context, client kubernetes.Interface, names []string) ([]*corev1.Node, error) {
	if len(names) == 0 {
		list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("list nodes: %w", err)
		}
		nodes := make([]*corev1.Node, len(list.Items))
		for i := range list.Items {
			nodes[i] = &list.Items[i]
		}
		return nodes, nil
	}
	nodes := make([]*corev1.Node, 0, len(names))
	for _, name := range names {
		n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", name, err)
		}
		nodes = append(nodes, n)
	}
	return nodes, nil
}

// nodeStatus reads one node's episode; it also returns the IPs of the pods still on the node
// (host-network pods excluded), which IP target groups may hold.
func nodeStatus(ctx context.Context, client kubernetes.Interface, cfg *config.Config, node *corev1.Node, rec record.Record,
	budgets *budgetCache, now time.Time) (Node, []string, error) {
	r := &nodeRead{cfg: cfg, node: node, rec: rec, pending: episode.Pending(rec, cfg, "")}
	r.n = Node{Name: node.Name, Instance: episode.InstanceIDOf(node), Phase: rec.Phase.String(), Notices: []Notice{}, Pods: []Pod{}}
	r.readDeadline(now)
	r.n.Owner = ownerOf(rec)
	r.readNotices()
	pods, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node.Name).String()})
	if err != nil {
		return r.n, nil, fmt.Errorf("list the pods of node %s: %w", node.Name, err)
	}
	r.readPods(ctx, client, pods.Items, budgets)
	return r.n, podIPsOf(pods.Items), nil
}

// nodeRead is one node's status being read.
type nodeRead struct {
	cfg     *config.Config
	node    *corev1.Node
	rec     record.Record
	pending []notice.Notice
	// deadline is the one the drain works to: the soonest of the pending notices', or the
	// retention's while the drain runs past the abandoned actions.
	deadline time.Time
	n        Node
}

// readDeadline finds the deadline that binds the drain, and the time left until it.
func (r *nodeRead) readDeadline(now time.Time) {
	rec, n := r.rec, &r.n
	deadline := rec.Deadline
	for _, p := range r.pending {
		if !p.Deadline.IsZero() && (deadline.IsZero() || p.Deadline.Before(deadline)) {
			deadline = p.Deadline
		}
	}
	n.Retained = retainedOf(rec, slices.ContainsFunc(r.pending, func(p notice.Notice) bool { return p.Kind.ReclaimedOutright() }))
	if n.Retained != nil && n.Retained.State == RetainedDraining {
		deadline = n.Retained.Until // the abandoned actions' deadlines no longer bind the drain
	}
	r.deadline = deadline
	if deadline.IsZero() {
		return
	}
	n.Deadline = &deadline
	n.Left = "-"
	secs := int64(0)
	if left := deadline.Sub(now); left > 0 {
		n.Left = left.Round(time.Second).String()
		secs = int64(left.Round(time.Second) / time.Second)
	}
	n.SecondsLeft = &secs
}

// ownerOf is the drain's owner as the record names it, or nil.
func ownerOf(rec record.Record) *Owner {
	o := rec.Owner
	if o == nil {
		return nil
	}
	owner := &Owner{Origin: o.Origin, Holder: o.Holder, Renewed: o.Renewed}
	if !o.Contested.IsZero() {
		owner.Contested = &o.Contested
	}
	return owner
}

// readNotices lists the episode's notices with their state, and the lifecycle actions of the
// pending ones.
func (r *nodeRead) readNotices() {
	rec := r.rec
	for _, i := range rec.Intents {
		if !rec.Has(i.ID) {
			continue
		}
		state := "pending"
		switch {
		case slices.Contains(rec.Released, i.ID):
			state = "released"
		case slices.Contains(rec.Finished, i.ID):
			state = "finished"
		case i.CordonOnly != "":
			state = "cordon-only"
		}
		no := Notice{ID: i.ID, Kind: i.Kind, Origin: i.Origin, State: state}
		if !i.Deadline.IsZero() {
			d := i.Deadline
			no.Deadline = &d
		}
		r.n.Notices = append(r.n.Notices, no)
		if lc := i.Lifecycle; lc != nil && state == "pending" {
			l := Lifecycle{Notice: i.ID, Group: lc.Group, Hook: lc.Hook, OnIncompleteDrain: onIncompleteDrain(r.cfg, rec, i.ID, lc.Group)}
			if hb := rec.Heartbeat; hb != nil && hb.Notice == i.ID {
				last := hb.Last
				l.Heartbeats, l.LastBeat = hb.Count, &last
			}
			r.n.Lifecycle = append(r.n.Lifecycle, l)
		}
	}
}

// podIPsOf lists the pods' own IPs (host-network pods share the node's).
func podIPsOf(pods []corev1.Pod) []string {
	var podIPs []string
	for _, p := range pods {
		if p.Status.PodIP != "" && !p.Spec.HostNetwork {
			podIPs = append(podIPs, p.Status.PodIP)
		}
	}
	return podIPs
}

// readPods lists the pods still on the node, each with why it is there, sorted by name: the
// drain's own selection decides which it evicts and which stay.
func (r *nodeRead) readPods(ctx context.Context, client kubernetes.Interface, pods []corev1.Pod, budgets *budgetCache) {
	labelsOf := make(map[types.NamespacedName]map[string]string, len(pods)) // a drain's pods keep none
	for _, p := range pods {
		labelsOf[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}] = p.Labels
	}
	evict, skipped := drain.Select(drain.PodsOf(pods), wiring.Drain(r.cfg, client, nil).Policy, episode.TermsOf(r.node, r.pending))
	for _, s := range skipped {
		switch s.Reason {
		case drain.ReasonFinished, drain.ReasonMirror:
			continue // nothing to stop, or the kubelet's
		case drain.ReasonTerminating:
			r.n.Pods = append(r.n.Pods, Pod{Name: s.Pod.String(), State: StateTerminating})
		default:
			r.n.Pods = append(r.n.Pods, Pod{Name: s.Pod.String(), State: StateStays, Why: string(s.Reason)})
		}
	}
	// The drain's owner never evicts its own pod; outside the cluster POD_NAME is not set,
	// but the owner's holder starts with its host name, which in a pod is the pod's name.
	var ownerHost string
	if r.rec.Owner != nil {
		ownerHost, _, _ = strings.Cut(r.rec.Owner.Holder, "/")
	}
	for _, c := range evict {
		if ownerHost != "" && c.Pod.Name == ownerHost {
			r.n.Pods = append(r.n.Pods, Pod{Name: c.Pod.Namespace + "/" + c.Pod.Name, State: StateStays, Why: string(drain.ReasonOwnPod)})
			continue
		}
		r.n.Pods = append(r.n.Pods, podStatus(ctx, c, labelsOf[types.NamespacedName{Namespace: c.Pod.Namespace, Name: c.Pod.Name}], r.deadline, r.cfg, budgets))
	}
	slices.SortFunc(r.n.Pods, func(a, b Pod) int { return strings.Compare(a.Name, b.Name) })
}

// subjectOf is what a load balancer may still hold for the node: its instance, the IPs of
// the pods on it, and those its drain recorded for the hand-back (pods already gone).
func subjectOf(node *corev1.Node, rec record.Record, podIPs []string) detach.Subject {
	s := detach.Subject{Node: node.Name, InstanceID: episode.InstanceIDOf(node), PodIPs: podIPs}
	if h := rec.Detach; h != nil {
		for _, ip := range h.PodIPs {
			if !slices.Contains(s.PodIPs, ip) {
				s.PodIPs = append(s.PodIPs, ip)
			}
		}
	}
	return s
}

// podStatus says what holds a pod the drain evicts: a budget that allows no disruption now,
// or its turn as a pod marked not to disrupt.
func podStatus(ctx context.Context, c drain.Candidate, podLabels map[string]string, deadline time.Time, cfg *config.Config, budgets *budgetCache) Pod {
	p := Pod{Name: c.Pod.Namespace + "/" + c.Pod.Name, State: StateToEvict}
	if c.Tier == drain.TierDoNotDisrupt {
		p.State, p.Why = StateLeavesLast, "marked not to disrupt: evicted at the deadline minus its grace period"
		if !deadline.IsZero() {
			grace := int64(corev1.DefaultTerminationGracePeriodSeconds)
			if g := c.Pod.Spec.TerminationGracePeriodSeconds; g != nil {
				grace = *g
			}
			if cfg.PodTerminationGracePeriod >= 0 {
				grace = int64(cfg.PodTerminationGracePeriod)
			}
			at := deadline.Add(-time.Duration(grace)*time.Second - 2*time.Second)
			p.Why = fmt.Sprintf("marked not to disrupt: evicted at %s (the deadline minus its %d s grace period)", at.UTC().Format(time.RFC3339), grace)
			if u := c.ProtectedUntil; !u.IsZero() && u.Before(at) {
				p.Why = fmt.Sprintf("marked not to disrupt for a while: evicted at %s, when its protection ends", u.UTC().Format(time.RFC3339))
			}
		}
		return p
	}
	if why := budgets.holding(ctx, c.Pod.Namespace, podLabels); why != "" {
		p.State, p.Why = StateHeld, why
	}
	return p
}

// budgetCache reads each namespace's PodDisruptionBudgets once.
type budgetCache struct {
	client      kubernetes.Interface
	byNamespace map[string][]policyv1.PodDisruptionBudget
}

// holding names the budgets that select a pod of the namespace with the labels and allow no
// disruption now ("" when none).
func (b *budgetCache) holding(ctx context.Context, namespace string, podLabels map[string]string) string {
	pdbs, ok := b.byNamespace[namespace]
	if !ok {
		list, err := b.client.PolicyV1().PodDisruptionBudgets(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return "cannot read its PodDisruptionBudgets: " + err.Error()
		}
		pdbs = list.Items
		b.byNamespace[namespace] = pdbs
	}
	var held []string
	for _, pdb := range pdbs {
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(podLabels)) {
			continue
		}
		if pdb.Status.DisruptionsAllowed < 1 {
			held = append(held, fmt.Sprintf("PodDisruptionBudget %s allows no disruption now (needs %d healthy pods and has %d)",
				pdb.Name, pdb.Status.DesiredHealthy, pdb.Status.CurrentHealthy))
		}
	}
	switch len(held) {
	case 0:
		return ""
	case 1:
		return held[0]
	}
	return fmt.Sprintf("%s, and %d more budgets", held[0], len(held)-1)
}

// attachedVolumes maps each node to its attached volumes ("pv (VolumeAttachment name)").
func attachedVolumes(ctx context.Context, client kubernetes.Interface) (map[string][]string, error) {
	list, err := client.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list VolumeAttachments: %w", err)
	}
	out := map[string][]string{}
	for _, va := range list.Items {
		name := va.Name
		if pv := va.Spec.Source.PersistentVolumeName; pv != nil {
			name = *pv + " (VolumeAttachment " + va.Name + ")"
		}
		out[va.Spec.NodeName] = append(out[va.Spec.NodeName], name)
	}
	return out, nil
}

// recorded reports whether the node's record holds the notice: the call refused for it has
// gone through since.
func recorded(node *corev1.Node, noticeID string) bool {
	rec, err := record.Read(node)
	return err == nil && rec.Has(noticeID)
}
