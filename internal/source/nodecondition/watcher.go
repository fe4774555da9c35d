// SPDX-License-Identifier: Apache-2.0

// Package nodecondition is the controller's source of node repairs (ENABLE_NODE_REPAIR): it
// watches the Node conditions that node agents set (node-problem-detector, the EKS node
// monitoring agent) through the controller's node informer, and turns a node whose condition
// has held a configured status for its duration into a node-repair notice. The duration is
// counted from the condition's lastTransitionTime, so neither a restart nor a change of
// leader resets it, and a condition that recovers sooner changes nothing; a restatement of
// that time under the same status does not reset it either (see clocks), and a condition its
// agent stopped refreshing is said stale rather than repaired (see Stale). A node not due yet
// is looked at again when it would be due (a timer on a delaying queue), not polled. The
// controller takes the notices as it takes a queue message's; what is written here is node
// repair's own: the node's repair memory (record.Repair) and, while a breaker holds a due
// repair, its condition (ConditionHeld).
package nodecondition

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/instancegate"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/ownership"
	"lifeboat.dev/lifeboat/internal/panics"
	"lifeboat.dev/lifeboat/internal/record"
)

// Take hands notices to the controller and says, for each, what became of it. A notice not
// taken is offered again.
type Take func(ctx context.Context, notices []notice.Notice) []Fate

// Fate is what the controller did with a repair notice.
type Fate int

const (
	// NotTaken: not recorded yet (its node's write failed, the process stops): offered again.
	NotTaken Fate = iota
	// Started: recorded on its node; the repair runs.
	Started
	// Refused: not to be acted on (the node is not its instance as EC2 describes it, or not
	// this cluster's to act on), which was said where it was decided: not offered again
	// until the condition changes, and no repair runs.
	Refused
)

// Options configure a Watcher. Nodes and Conditions are required.
type Options struct {
	// Nodes is the controller's node informer.
	Nodes cache.SharedIndexInformer
	// Policies are the repair policies (NODE_REPAIR_POLICIES, NODE_REPAIR_CONDITIONS).
	Policies config.RepairPolicies
	// DrainTimeout is the repair's drain budget from the moment it starts
	// (NODE_REPAIR_DRAIN_TIMEOUT).
	DrainTimeout time.Duration
	// Retry is the pause before a notice that was not taken is offered again; default 5 s.
	Retry  time.Duration
	Logger *slog.Logger
	// Now is the clock (tests replace it); default time.Now.
	Now func() time.Time
	// Limits are the breaker's (see Assess).
	Limits Limits
	// Recheck is how soon a repair the breaker holds is looked at again; default 15 s.
	Recheck time.Duration
	// Report, when set, is told what became of each repair that came due.
	Report Reporter
	// Panics counts the panics a look at a node recovers from.
	Panics panics.Counter
	// Owners say which systems repair their own nodes (Karpenter, EKS node auto repair): a
	// node of theirs is left to them. They are asked only about a node whose repair is due.
	Owners Owners
	// Instances, when set, is EC2's description of instances (batched and cached): the
	// breakers per group learn each node's Auto Scaling group from it. Without it, groups
	// are the nodes' labels (GroupLabels).
	Instances instancegate.Describer
	// Writer, when set, writes what node repair remembers of a node beyond its episodes
	// (record.AnnotationRepair) and, with ShowCondition, ConditionHeld on the nodes a breaker
	// holds. Its DryRun is DRY_RUN's.
	Writer        *nodes.Writer
	ShowCondition bool
	// StaleAfter is NODE_REPAIR_STALE_AFTER: a due condition whose lastHeartbeatTime is this
	// much older than the node's Ready heartbeat (its agent stopped refreshing it while the
	// kubelet still reports) is said stale and not repaired; 0 never judges it.
	StaleAfter time.Duration
	// RebootWait is NODE_REPAIR_REBOOT_WAIT: how long after a policy's reboot the node's
	// condition has to clear before the node is replaced.
	RebootWait time.Duration
	// Selector, when set, limits repair to the nodes it selects (NODE_REPAIR_NODE_SELECTOR):
	// the others are neither repaired nor counted by the breakers.
	Selector labels.Selector
}

// Reporter makes the repairs' fate visible (Events, metrics, logs).
type Reporter interface {
	// Breaker is the breaker's state, read when a repair came due.
	Breaker(b Breaker)
	// Held says the node's due repair does not start while a breaker holds it (once per
	// node and cause).
	Held(node *corev1.Node, n notice.Notice, h Hold)
	// Vetoed says the node's due repair does not start: an operator vetoed it (once per
	// node and failure).
	Vetoed(node *corev1.Node, n notice.Notice)
	// Started says the node's repair was recorded.
	Started(node *corev1.Node, n notice.Notice)
	// LeftTo says the node's due repair is left to the system that repairs it (once per node
	// and failure).
	LeftTo(node *corev1.Node, n notice.Notice, owner string)
	// OwnerUnknown says the node's due repair does not start now: whether EKS repairs the
	// node could not be learned (err). It is looked at again after Recheck (said once per
	// node and failure).
	OwnerUnknown(ctx context.Context, node *corev1.Node, n notice.Notice, err error)
	// Restated says the node's condition restated its transition time under the same status
	// (c.Restated), and that its repair's wait still counts from c.Since (once per
	// restatement).
	Restated(node *corev1.Node, c record.ConditionClock)
	// Stale says the node's due repair does not start: its condition cond was last refreshed
	// long before the node's Ready heartbeat (ready) (once per node, condition and
	// transition).
	Stale(node *corev1.Node, n notice.Notice, cond corev1.NodeCondition, ready time.Time)
	// Recovered says the node's condition cleared after the repair's reboot (at rebooted):
	// released without a replacement.
	Recovered(node *corev1.Node, condition string, rebooted time.Time)
	// Escalated says the node's repair n replaces the node after its reboot did not help
	// (after says how).
	Escalated(node *corev1.Node, n notice.Notice, after string)
	// Unreadable says the node's repair memory (record.AnnotationRepair) does not read: it is
	// read as empty (once per node and content).
	Unreadable(node *corev1.Node, err error)
}

// Watcher turns the informer's Nodes into repair notices. It remembers in the process which
// notice it handed over for each node; a restart offers them again, and the Node's record
// recognises them as the notices it holds.
type Watcher struct {
	opts  Options
	queue workqueue.TypedDelayingInterface[string]

	mu    sync.Mutex
	taken map[string]string // node name -> the repair notice taken for it, with its condition's lastTransitionTime

	groups *groups
	held   heldConditions
	memory memory
	clocks *clocks
	ladder ladder

	// Only Run's goroutine reads and writes these.
	started  map[string]time.Time // repairs taken and maybe not yet seen on their Node by the informer
	starts   map[string]time.Time // node name -> when this process started its repair, within the last hour
	reported map[string]string    // node name -> what was last reported of its due repair (held's cause, vetoed)
	// staleTold: node name -> condition type -> the transition time of the condition last
	// said stale.
	staleTold  map[string]map[string]time.Time
	unreadable unreadableMemories
}

// New builds a Watcher.
func New(o Options) (*Watcher, error) {
	if o.Nodes == nil || len(o.Policies) == 0 {
		return nil, errors.New("nodecondition: a node informer and at least one policy are needed")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Retry <= 0 {
		o.Retry = 5 * time.Second
	}
	if o.Recheck <= 0 {
		o.Recheck = 15 * time.Second
	}
	if o.Report == nil {
		o.Report = quiet{}
	}
	return &Watcher{opts: o, taken: map[string]string{}, started: map[string]time.Time{}, starts: map[string]time.Time{}, reported: map[string]string{},
		groups: &groups{describe: o.Instances, now: o.Now, known: map[string]knownGroup{}},
		held:   heldConditions{writer: conditionWriter(o), log: o.Logger}, memory: memory{writer: o.Writer, log: o.Logger},
		clocks: &clocks{watched: o.Policies.Acts, seen: map[string]map[string]clock{}}, staleTold: map[string]map[string]time.Time{},
		unreadable: unreadableMemories{said: map[string]string{}, report: o.Report},
		ladder:     ladder{policies: o.Policies, wait: o.RebootWait, memory: memory{writer: o.Writer, log: o.Logger}, report: o.Report}}, nil
}

// conditionWriter is the writer of ConditionHeld: nil when not shown.
func conditionWriter(o Options) *nodes.Writer {
	if !o.ShowCondition || o.Writer == nil || o.Writer.DryRun {
		return nil
	}
	return o.Writer
}

// Run watches until ctx ends: every Node added or changed is looked at once, and again when
// a condition would reach its duration.
func (w *Watcher) Run(ctx context.Context, take Take) error {
	w.queue = workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[string]{Name: "node-repair"})
	reg, err := w.opts.Nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.enqueue(obj) },
		UpdateFunc: func(_, obj any) { w.enqueue(obj) },
		DeleteFunc: func(obj any) { w.forget(obj) },
	})
	if err != nil {
		return err
	}
	defer func() { _ = w.opts.Nodes.RemoveEventHandler(reg) }()
	go func() { <-ctx.Done(); w.queue.ShutDown() }()
	for {
		name, shutdown := w.queue.Get()
		if shutdown {
			return nil
		}
		// A Node's conditions are input (any holder of nodes/status writes them): a panic ends
		// this look only.
		_ = panics.Do(panics.NodeRepair, w.opts.Logger, w.opts.Panics, func() {
			l := w.look(ctx, name, take)
			w.opts.Logger.Debug(LogLooked, "node", name, "resourceVersion", l.version, "outcome", l.outcome)
		}, "node", name)
		w.queue.Done(name)
	}
}

// enqueue looks at the node again, once the clocks have seen this update (the informer's
// handlers see every update in order; the queue may fold several into one look).
func (w *Watcher) enqueue(obj any) {
	if n, ok := obj.(*corev1.Node); ok {
		w.clocks.observe(n)
		w.queue.Add(n.Name)
	}
}

func (w *Watcher) forget(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if n, ok := obj.(*corev1.Node); ok {
		w.mu.Lock()
		delete(w.taken, n.Name)
		w.mu.Unlock()
		w.clocks.forget(n.Name)
		w.queue.Add(n.Name) // look drops what Run's goroutine keeps of it
	}
}

// LogLooked is the debug line that ends each look at a node: its name, the resourceVersion
// looked at, and the outcome (one of the Looked* values). Operators follow repair's decisions
// with it; tests wait for it instead of for time.
const LogLooked = "node repair looked at the node"

// Outcomes of a look at a node (LogLooked).
const (
	LookedGone        = "gone"
	LookedNotSelected = "not-selected"
	LookedNotDue      = "not-due"
	LookedTaken       = "taken"     // its repair was offered and taken (or refused for good)
	LookedAlready     = "already"   // its due repair was taken before
	LookedNotAdmitted = "held"      // left to its owner, vetoed, or held by a breaker
	LookedRetry       = "not-taken" // offered again after Retry
)

// looked is what a look did.
type looked struct{ version, outcome string }

// look decides about one node: offer its repair notice when one is due and not taken yet,
// or look again when the next condition would be due.
func (w *Watcher) look(ctx context.Context, name string, take Take) looked {
	obj, exists, err := w.opts.Nodes.GetStore().GetByKey(name)
	if err != nil || !exists {
		delete(w.started, name)
		delete(w.reported, name)
		delete(w.staleTold, name)
		delete(w.unreadable.said, name)
		return looked{outcome: LookedGone}
	}
	node := obj.(*corev1.Node)
	at := func(outcome string) looked { return looked{version: node.ResourceVersion, outcome: outcome} }
	if !Selected(node, w.opts.Selector) {
		w.held.clear(ctx, node)
		return at(LookedNotSelected)
	}
	w.unreadable.tell(node)
	w.keepClocks(ctx, node)
	w.ladder.over(ctx, node)
	v := w.evaluate(node)
	w.tellStale(node, v.stale)
	if !v.due {
		w.held.clear(ctx, node)
		if v.wait > 0 {
			w.queue.AddAfter(name, v.wait)
		}
		return at(LookedNotDue)
	}
	n := v.notice
	key := n.ID + "@" + n.StartTime.UTC().Format(time.RFC3339)
	w.mu.Lock()
	done := w.taken[name] == key
	if !done && takenBefore(node, n.ID, key) {
		// Taken by an earlier process, or by this one before the informer showed it: its
		// episode is open, or someone else ended it during this spell. Offered again, a copy
		// that still shows it open would start it over once the episode has ended.
		w.taken[name], done = key, true
	}
	w.mu.Unlock()
	if done {
		return at(LookedAlready)
	}
	if !w.admit(ctx, node, n, key) {
		return at(LookedNotAdmitted)
	}
	// Its start, and a reboot's step, go on the node first.
	if err := rememberStart(ctx, w.memory, node, v, w.opts.Now()); err != nil && n.Action == config.PolicyReboot {
		w.queue.AddAfter(name, w.opts.Retry) // the completion needs the step to record the reboot in
		return at(LookedRetry)
	}
	fates := take(ctx, []notice.Notice{n})
	if len(fates) == 1 && fates[0] != NotTaken {
		w.took(ctx, node, v, key, fates[0])
		return at(LookedTaken)
	}
	if ctx.Err() == nil {
		w.queue.AddAfter(name, w.opts.Retry)
	}
	return at(LookedRetry)
}

// took notes the node's repair as taken (started, or refused for good).
func (w *Watcher) took(ctx context.Context, node *corev1.Node, v verdict, key string, fate Fate) {
	name, n := node.Name, v.notice
	w.mu.Lock()
	w.taken[name] = key
	w.mu.Unlock()
	delete(w.reported, name)
	if fate != Started {
		return
	}
	now := w.opts.Now()
	w.started[name], w.starts[name] = now, now
	w.opts.Report.Started(node, n)
	w.ladder.escalated(node, n, string(v.cond.Type))
	// After the start: a failed take must be offered again, not remembered as taken.
	_ = w.memory.edit(ctx, node, "remember the repair taken", func(r *record.Repair) { r.Taken = key })
}

// Selected reports whether repair applies to the node: sel selects it, or is nil.
func Selected(n *corev1.Node, sel labels.Selector) bool {
	return sel == nil || sel.Matches(labels.Set(n.Labels))
}

// verdict is what a look at a node found.
type verdict struct {
	notice notice.Notice
	cond   corev1.NodeCondition // the due notice's condition
	due    bool
	wait   time.Duration  // until the soonest condition on its way is due (0: none)
	stale  []staleVerdict // due conditions not acted on: their agent stopped refreshing them
}

type staleVerdict struct {
	notice notice.Notice
	cond   corev1.NodeCondition
	ready  time.Time // the node's Ready heartbeat
}

// Evaluate is the node's repair notice when one of its conditions has held its status for
// the wait of the policy that matches it (the first such by the policies' order); else wait
// is how long until the soonest would (0 when none is on its way).
func (w *Watcher) Evaluate(node *corev1.Node) (n notice.Notice, due bool, wait time.Duration) {
	v := w.evaluate(node)
	return v.notice, v.due, v.wait
}

// evaluate is Evaluate, with the due conditions found stale. A condition's wait counts from
// its clock (see clocks): its lastTransitionTime, or an earlier one a restatement kept.
func (w *Watcher) evaluate(node *corev1.Node) (v verdict) {
	instance := ownership.InstanceIDFromProviderID(node.Spec.ProviderID)
	if instance == "" {
		return v
	}
	now := w.opts.Now()
	mem, _ := record.ReadRepair(node)
	for _, m := range Matches(node, w.opts.Policies) {
		p, c := m.Policy, m.Condition
		since := w.clocks.since(node.Name, c)
		action, due := p.Action, since.Add(p.Wait)
		if next, ok := w.ladder.next(mem.Reboot, string(c.Type)); ok {
			action, due = config.PolicyReplace, next // rebooted for it already
		}
		if left := due.Sub(now); left > 0 {
			if v.wait == 0 || left < v.wait {
				v.wait = left
			}
			continue
		}
		n := w.notice(instance, p, c, action, since, now)
		n.Node = node.Name
		if ready, stale := Stale(node, c, w.opts.StaleAfter); stale {
			v.stale = append(v.stale, staleVerdict{notice: n, cond: c, ready: ready})
			continue
		}
		v.notice, v.cond, v.due, v.wait = n, c, true, 0
		return v
	}
	return v
}

// Match is one of a node's conditions and the policy that repairs it.
type Match struct {
	Policy    config.RepairPolicy
	Condition corev1.NodeCondition
	rank      int
}

// Matches are the node's conditions that a policy repairs (not those whose first matching
// policy's action is none), in the policies' order.
func Matches(node *corev1.Node, policies config.RepairPolicies) []Match {
	var out []Match
	for _, c := range node.Status.Conditions {
		p, rank, ok := policies.For(string(c.Type), string(c.Status), c.Reason)
		if ok && p.Action != config.PolicyNone {
			out = append(out, Match{Policy: p, Condition: c, rank: rank})
		}
	}
	slices.SortStableFunc(out, func(a, b Match) int { return a.rank - b.rank })
	return out
}

// Stale reports whether the node's condition was last refreshed more than after before the
// node's Ready heartbeat (returned), while the kubelet reports Ready: its agent stopped
// refreshing it, and what it says may have latched. Ready itself, and a condition without a
// heartbeat, are never stale; after 0 judges nothing stale.
func Stale(node *corev1.Node, c corev1.NodeCondition, after time.Duration) (time.Time, bool) {
	if after <= 0 || c.Type == corev1.NodeReady || c.LastHeartbeatTime.IsZero() {
		return time.Time{}, false
	}
	ready := nodes.ConditionOf(node, corev1.NodeReady)
	if ready == nil || ready.Status != corev1.ConditionTrue {
		return time.Time{}, false
	}
	return ready.LastHeartbeatTime.Time, ready.LastHeartbeatTime.Sub(c.LastHeartbeatTime.Time) > after
}

// tellStale says each stale condition once per node, condition and transition.
func (w *Watcher) tellStale(node *corev1.Node, stale []staleVerdict) {
	for _, s := range stale {
		told := w.staleTold[node.Name]
		if told == nil {
			told = map[string]time.Time{}
			w.staleTold[node.Name] = told
		}
		if at := s.cond.LastTransitionTime.Time; !told[string(s.cond.Type)].Equal(at) {
			told[string(s.cond.Type)] = at
			w.opts.Report.Stale(node, s.notice, s.cond, s.ready)
		}
	}
}

// keepClocks says each restatement of a condition's transition time once, and keeps its
// clock in the node's repair memory, so that a restart counts from it too; a kept clock whose
// condition changed status (or went) is dropped. Nothing is written for a node whose
// conditions keep their transition times.
func (w *Watcher) keepClocks(ctx context.Context, node *corev1.Node) {
	for _, c := range w.clocks.restated(node) {
		w.opts.Report.Restated(node, c)
		w.memory.edit(ctx, node, "keep the clock of condition "+c.Type, func(r *record.Repair) { r.SetClock(c) })
	}
	kept, err := record.ReadRepair(node)
	if err != nil {
		return
	}
	for _, k := range kept.Clocks {
		if c := nodes.ConditionOf(node, corev1.NodeConditionType(k.Type)); c == nil || string(c.Status) != k.Status {
			w.memory.edit(ctx, node, "drop the clock of condition "+k.Type, func(r *record.Repair) { r.DropClock(k.Type) })
		}
	}
}

// notice names a repair by the instance and the condition type, never by a time: an agent
// that restarts may restate lastTransitionTime, and the failure is still one. As for an
// impaired instance, a node is repaired for a condition once per episode; a failure after an
// operator took the node back opens a new episode under the same id.
func (w *Watcher) notice(instance string, p config.RepairPolicy, c corev1.NodeCondition, action string, since, now time.Time) notice.Notice {
	event := string(c.Type)
	desc := fmt.Sprintf("Node condition %s has been %s since %s (for more than %s)", c.Type, c.Status, since.UTC().Format(time.RFC3339), p.Wait)
	if action == config.PolicyReboot {
		// Its own id: the replacement that may follow is another repair, of another episode.
		event = "reboot-" + event
		desc = "Reboot: " + desc
	}
	if at := c.LastTransitionTime.Time; since.Before(at) {
		desc += fmt.Sprintf(", restated at %s", at.UTC().Format(time.RFC3339))
	}
	if c.Reason != "" || c.Message != "" {
		desc += fmt.Sprintf(": %s %s", c.Reason, c.Message)
	}
	return notice.Notice{
		ID: notice.ID(notice.NodeRepair, instance, event), Kind: notice.NodeRepair, Source: notice.SourceNodeCondition,
		InstanceID: instance, StartTime: since, Deadline: now.Add(w.opts.DrainTimeout), Action: action, Description: desc,
		Announced: now,
	}
}
