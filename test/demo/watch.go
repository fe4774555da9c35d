// SPDX-License-Identifier: Apache-2.0

package demo

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"lifeboat.dev/lifeboat/internal/record"
	"lifeboat.dev/lifeboat/test/sandbox/fakeaws"
)

// EventKind is a step of handling a notice, as the demo observed it.
type EventKind string

const (
	EventNotice    EventKind = "notice"    // injected by the demo
	EventCordoned  EventKind = "cordoned"  // the Node became unschedulable
	EventEvicted   EventKind = "evicted"   // a pod got its deletion timestamp (or vanished)
	EventGone      EventKind = "gone"      // a pod was deleted
	EventDrained   EventKind = "drained"   // the Node's record says drained
	EventCompleted EventKind = "completed" // CompleteLifecycleAction succeeded
	EventRefused   EventKind = "refused"   // the controller logged the notice as not ours

	// The hand-back: what stands between a drained node and the completion of its
	// lifecycle action.
	EventDeregistered EventKind = "deregistered" // the instance left its target group: draining
	EventTargetGone   EventKind = "target gone"  // its draining is over: no longer in the group
	EventDetached     EventKind = "detached"     // a VolumeAttachment on the node was deleted
	EventWaited       EventKind = "waited"       // the handler logged the end of a hand-back wait
)

// Event is one observation, timed from the moment the first notice was injected.
type Event struct {
	At     time.Duration
	Lane   string // a case's name
	Kind   EventKind
	Pod    string // namespace/name, for pod events
	Tier   string // for pod events
	Budget string // for blocked and released pods: the PodDisruptionBudget ("" for several)
	Detail string
}

// Tiers the demo labels pods with (Lifeboat's drain decides for itself; these are for the
// reader and the picture).
const (
	TierWorkload  = "workload"
	TierCritical  = "critical"
	TierDaemonSet = "daemonset"
	TierMirror    = "mirror"
)

func tierOf(p *corev1.Pod) string {
	if _, ok := p.Annotations[corev1.MirrorPodAnnotationKey]; ok {
		return TierMirror
	}
	for _, o := range p.OwnerReferences {
		if o.Kind == "DaemonSet" {
			return TierDaemonSet
		}
	}
	if p.Spec.PriorityClassName == "system-cluster-critical" || p.Spec.PriorityClassName == "system-node-critical" {
		return TierCritical
	}
	return TierWorkload
}

// podInfo is a pod that was on a watched node when the notices were injected.
type podInfo struct {
	Name string // namespace/name
	Tier string
}

// watcher follows the scenario from the outside: Nodes and Pods through the API server, the
// fake AWS endpoint's recorded calls, and the lifeboat processes' logs. It prints a line per
// step and keeps every step for the summary.
type watcher struct {
	out     io.Writer
	client  kubernetes.Interface
	aws     *fakeaws.Server
	lanes   map[string]string // node name or instance id -> lane
	tokens  map[string]string // lifecycle action token -> lane
	labels  map[string]string // lane -> how lines name it
	logs    []*logTail
	factory informers.SharedInformerFactory
	pods    cache.SharedIndexInformer

	mu         sync.Mutex
	start      time.Time // zero until begin
	events     []Event
	before     map[string][]podInfo      // lane -> pods on its node at the start
	evicted    map[string]bool           // pod keys seen evicted
	cordoned   map[string]bool           // lanes
	drained    map[string]bool           // lanes
	skipped    map[string]string         // pod key -> reason the drain logged
	drainLogs  map[string]map[string]any // lane -> the drain's "drain finished" line
	refusals   map[string]*refusal       // instance id -> why and what became of its message
	calls      int                       // fake AWS calls looked at
	targets    []*watchedTarget          // load-balancer targets followed through their states
	waits      map[string][]DetachWait   // lane -> the hand-back waits its handler logged
	detaches   map[string]bool           // lanes whose node holds a target and a volume
	budgetSeen map[string]bool           // "blocked pod" / "released pod": one line each
	held       chan struct{}             // closed when the first pod is reported blocked
	relaxed    *Relaxation               // the owner's relaxation of checkout's budget, once done

	// The mid-drain `lifeboat status`: set before run; statusDone is made when it starts.
	statusBin, statusKubeconfig string
	statusDone                  chan struct{}
	status                      MidDrainStatus
}

// watchedTarget is an instance's place in a target group, as last seen.
type watchedTarget struct {
	lane, arn, group, id string
	delay                time.Duration // the group's deregistration delay
	state                string
}

// lane is one case of the scenario as the watcher follows it: its node (if any), its
// instance, and its lifecycle action token (if any).
type lane struct {
	name, label, node, instance, token string
	targetGroup                        string // the target group its instance is in, if any
}

func newWatcher(out io.Writer, client kubernetes.Interface, aws *fakeaws.Server, lanes []lane, logPaths ...string) *watcher {
	w := &watcher{out: out, client: client, aws: aws, lanes: map[string]string{}, tokens: map[string]string{}, labels: map[string]string{},
		before: map[string][]podInfo{}, evicted: map[string]bool{}, cordoned: map[string]bool{}, drained: map[string]bool{},
		skipped: map[string]string{}, drainLogs: map[string]map[string]any{}, refusals: map[string]*refusal{}, waits: map[string][]DetachWait{},
		detaches: map[string]bool{}, budgetSeen: map[string]bool{}, held: make(chan struct{})}
	for _, l := range lanes {
		w.labels[l.name] = l.label
		w.detaches[l.name] = l.targetGroup != ""
		if l.node != "" {
			w.lanes[l.node] = l.name
		}
		if l.instance != "" {
			w.lanes[l.instance] = l.name
		}
		if l.token != "" {
			w.tokens[l.token] = l.name
		}
	}
	for _, p := range logPaths {
		w.logs = append(w.logs, &logTail{path: p})
	}
	return w
}

// watchTarget follows the instance's place in a target group: its move to draining and its
// end. Call it before run.
func (w *watcher) watchTarget(lane, arn, group, instance string, delay time.Duration) {
	w.targets = append(w.targets, &watchedTarget{lane: lane, arn: arn, group: group, id: instance, delay: delay})
}

// run watches until ctx ends. It returns once its caches are synced; the watching goes on
// in the background.
func (w *watcher) run(ctx context.Context) error {
	w.factory = informers.NewSharedInformerFactory(w.client, 0)
	nodes := w.factory.Core().V1().Nodes().Informer()
	w.pods = w.factory.Core().V1().Pods().Informer()
	if _, err := nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.nodeChanged(obj.(*corev1.Node)) },
		UpdateFunc: func(_, obj any) { w.nodeChanged(obj.(*corev1.Node)) },
	}); err != nil {
		return err
	}
	if _, err := w.pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) {
			if p := obj.(*corev1.Pod); p.DeletionTimestamp != nil {
				w.podEvicted(p)
			}
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				w.podEvicted(p)
				w.record(w.lanes[p.Spec.NodeName], EventGone, p.Namespace+"/"+p.Name, tierOf(p), "")
			}
		},
	}); err != nil {
		return err
	}
	attachments := w.factory.Storage().V1().VolumeAttachments().Informer()
	if _, err := attachments.AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if va, ok := obj.(*storagev1.VolumeAttachment); ok {
				w.volumeDetached(va)
			}
		},
	}); err != nil {
		return err
	}
	w.factory.Start(ctx.Done())
	for typ, ok := range w.factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("watch %v: cache never synced", typ)
		}
	}
	go func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				w.poll()
			}
		}
	}()
	return nil
}

// begin marks the moment the notices are injected: times count from here, and the pods on
// each watched node now are the ones its drain is about.
func (w *watcher) begin() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.start = time.Now()
	for _, obj := range w.pods.GetStore().List() {
		p := obj.(*corev1.Pod)
		if l, ok := w.lanes[p.Spec.NodeName]; ok && p.DeletionTimestamp == nil {
			w.before[l] = append(w.before[l], podInfo{Name: p.Namespace + "/" + p.Name, Tier: tierOf(p)})
		}
	}
	for l := range w.before {
		slices.SortFunc(w.before[l], func(a, b podInfo) int { return strings.Compare(a.Name, b.Name) })
	}
}

// record keeps an event and prints it; events before begin, or on no lane, are ignored.
func (w *watcher) record(lane string, kind EventKind, pod, tier, detail string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.recordLocked(lane, kind, pod, tier, detail)
}

func (w *watcher) recordLocked(lane string, kind EventKind, pod, tier, detail string) {
	if w.start.IsZero() {
		return
	}
	w.recordAtLocked(time.Since(w.start), lane, kind, pod, tier, detail)
}

// recordAtLocked records an event that happened at a known moment, such as a log line's.
func (w *watcher) recordAtLocked(at time.Duration, lane string, kind EventKind, pod, tier, detail string) {
	w.recordEventLocked(Event{At: at, Lane: lane, Kind: kind, Pod: pod, Tier: tier, Detail: detail})
}

func (w *watcher) recordEventLocked(e Event) {
	if w.start.IsZero() || e.Lane == "" {
		return
	}
	w.events = append(w.events, e)
	if e.Kind == EventGone {
		return // one line per pod is enough: its eviction
	}
	text := string(e.Kind)
	switch {
	case e.Kind == EventBlocked || e.Kind == EventReleased:
		text = string(e.Kind) + ": " + e.Detail
	case e.Pod != "":
		text = fmt.Sprintf("%s %s (%s)", e.Kind, e.Pod, e.Tier)
	case e.Detail != "":
		text = string(e.Kind) + ": " + e.Detail
	}
	fmt.Fprintf(w.out, "  %7s  %-8s %s\n", fmt.Sprintf("+%.1fs", e.At.Seconds()), w.labels[e.Lane], text)
}

func (w *watcher) nodeChanged(n *corev1.Node) {
	w.mu.Lock()
	defer w.mu.Unlock()
	l, ok := w.lanes[n.Name]
	if !ok || w.start.IsZero() {
		return
	}
	if n.Spec.Unschedulable && !w.cordoned[l] {
		w.cordoned[l] = true
		w.recordLocked(l, EventCordoned, "", "", "")
	}
	if r, _ := record.Read(n); r.Phase == record.PhaseDrained && !w.drained[l] {
		// The record is written after the hand-back's log lines and the lifecycle
		// completion, but those are polled for while the record arrives by the watch: take
		// them in first, so the lines come in the order things happened.
		w.pollLocked()
		w.drained[l] = true
		w.recordLocked(l, EventDrained, "", "", "recorded on the node")
	}
}

func (w *watcher) podEvicted(p *corev1.Pod) {
	w.mu.Lock()
	defer w.mu.Unlock()
	key := p.Namespace + "/" + p.Name
	if w.evicted[key] || w.start.IsZero() {
		return
	}
	l, ok := w.lanes[p.Spec.NodeName]
	if !ok {
		return
	}
	w.evicted[key] = true
	w.recordLocked(l, EventEvicted, key, tierOf(p), "")
}

// volumeDetached records the deletion of a VolumeAttachment on a watched node: the volume is
// free to attach elsewhere.
func (w *watcher) volumeDetached(va *storagev1.VolumeAttachment) {
	w.mu.Lock()
	defer w.mu.Unlock()
	pv := "?"
	if va.Spec.Source.PersistentVolumeName != nil {
		pv = *va.Spec.Source.PersistentVolumeName
	}
	w.recordLocked(w.lanes[va.Spec.NodeName], EventDetached, "", "", fmt.Sprintf("volume %s (VolumeAttachment %s deleted)", pv, va.Name))
}

// poll looks at what the processes logged and what the fake AWS endpoint was asked, in that
// order: a process logs what it did (a hand-back wait over) before the call that follows.
func (w *watcher) poll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pollLocked()
}

func (w *watcher) pollLocked() {
	for _, t := range w.logs {
		for _, line := range t.next() {
			w.logLineLocked(line)
		}
	}
	calls := w.aws.Calls()
	for _, c := range calls[w.calls:] {
		if c.Action != "CompleteLifecycleAction" {
			continue
		}
		l := w.tokens[c.Params.Get("LifecycleActionToken")]
		if l == "" {
			l = w.lanes[c.Params.Get("InstanceId")]
		}
		detail := c.Params.Get("LifecycleActionResult")
		if c.ErrorCode != "" {
			detail += " refused by Auto Scaling: " + c.ErrorCode
		}
		w.recordLocked(l, EventCompleted, "", "", "CompleteLifecycleAction "+detail)
	}
	w.calls = len(calls)
	for _, t := range w.targets {
		w.targetStateLocked(t)
	}
}

// targetStateLocked records the target's move to draining, and the end of its draining. The
// fake computes states from the clock, so a look every poll sees each within a poll.
func (w *watcher) targetStateLocked(t *watchedTarget) {
	state, _ := w.aws.TargetState(t.arn, t.id)
	was := t.state
	t.state = state
	switch {
	case state == was:
	case state == "draining":
		w.recordLocked(t.lane, EventDeregistered, "", "", fmt.Sprintf("%s from target group %s by Auto Scaling, draining for %s", t.id, t.group, t.delay))
	case was == "draining":
		w.recordLocked(t.lane, EventTargetGone, "", "", fmt.Sprintf("%s left target group %s, its draining over", t.id, t.group))
	}
}

// logLineLocked picks out the lines the summary reports: why a pod stayed, what a drain
// did, how each hand-back wait ended, and why a notice was refused.
func (w *watcher) logLineLocked(l logLine) {
	msg := l.str("msg")
	switch {
	case strings.HasPrefix(msg, "handback wait over: "):
		w.detachLineLocked(l, WaitReleased)
	case strings.HasPrefix(msg, "handback wait cut by the deadline"):
		w.detachLineLocked(l, WaitCut)
	case msg == "handback wait skipped":
		w.detachLineLocked(l, WaitSkipped)
	}
	switch msg {
	case msgBudgetBlocked:
		w.budgetLineLocked(l, EventBlocked)
	case msgBudgetReleased:
		w.budgetLineLocked(l, EventReleased)
	case "pod left on the node":
		w.skipped[l.str("pod")] = l.str("reason")
	case "drain finished":
		if lane, ok := w.lanes[l.str("node")]; ok {
			w.drainLogs[lane] = l
		}
	case "notice is not for this cluster":
		id := l.str("instance")
		if _, seen := w.refusals[id]; !seen {
			w.refusals[id] = &refusal{reason: l.str("reason"), message: l.str("message")}
			w.recordLocked(w.lanes[id], EventRefused, "", "", l.str("reason"))
		}
	case "message left for a retry":
		for _, r := range w.refusals {
			if r.message == l.str("message") && r.retryDelay == 0 {
				r.retryDelay = time.Duration(l.num("delay"))
			}
		}
	}
}

// detachLineLocked keeps how a hand-back wait ended, timed by the log line's own clock,
// for the lanes the demo gave something to wait for (others only log that nothing was held).
func (w *watcher) detachLineLocked(l logLine, outcome string) {
	lane, ok := w.lanes[l.str("node")]
	if !ok || !w.detaches[lane] || w.start.IsZero() {
		return
	}
	hw := DetachWait{Wait: l.str("wait"), Outcome: outcome, Took: time.Duration(l.num("seconds") * float64(time.Second)),
		Logged: time.Since(w.start), Held: l.str("held")}
	if at, err := time.Parse(time.RFC3339Nano, l.str("time")); err == nil {
		hw.Logged = at.Sub(w.start)
	}
	w.waits[lane] = append(w.waits[lane], hw)
	w.recordAtLocked(hw.Logged, lane, EventWaited, "", "", hw.String())
}

// refusal is a notice the controller refused as not this cluster's.
type refusal struct {
	reason, message string
	retryDelay      time.Duration // when its message comes back; 0 if not logged
}

// snapshot returns what was observed so far.
func (w *watcher) snapshot() observed {
	w.mu.Lock()
	defer w.mu.Unlock()
	o := observed{start: w.start, events: slices.Clone(w.events), before: map[string][]podInfo{}, skipped: map[string]string{}, drainLogs: map[string]map[string]any{},
		refusals: map[string]refusal{}, waits: map[string][]DetachWait{}}
	for k, v := range w.before {
		o.before[k] = slices.Clone(v)
	}
	for k, v := range w.skipped {
		o.skipped[k] = v
	}
	for k, v := range w.drainLogs {
		o.drainLogs[k] = v
	}
	for k, v := range w.refusals {
		o.refusals[k] = *v
	}
	for k, v := range w.waits {
		o.waits[k] = slices.Clone(v)
	}
	if w.relaxed != nil {
		r := *w.relaxed
		o.relaxed = &r
	}
	return o
}

// observed is a copy of what the watcher saw.
type observed struct {
	start     time.Time // when the notices were injected
	events    []Event
	before    map[string][]podInfo
	skipped   map[string]string
	drainLogs map[string]map[string]any
	refusals  map[string]refusal
	waits     map[string][]DetachWait
	relaxed   *Relaxation
}

// first returns the time of the lane's first event of the kind, or -1.
func (o observed) first(lane string, kind EventKind) time.Duration {
	for _, e := range o.events {
		if e.Lane == lane && e.Kind == kind {
			return e.At
		}
	}
	return -1
}

// reached reports whether the lane has an event of the kind.
func (w *watcher) reached(lane string, kind EventKind) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, e := range w.events {
		if e.Lane == lane && e.Kind == kind {
			return true
		}
	}
	return false
}
