// SPDX-License-Identifier: Apache-2.0

package drain

import (
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"lifeboat.dev/lifeboat/internal/events"
)

// nodeBlockedEvery spaces the Events on a node that say which pod holds its drain: a drain
// held by a budget for minutes says so a few times, not once per retried eviction.
const nodeBlockedEvery = 30 * time.Second

// Reporter tells an operator, while a drain runs, which pods hold it and by what: a Warning
// Event on the pod (its owners see it in their namespace) and on the node (at most every
// nodeBlockedEvery), a log line, and the lifeboat_drain_blocked_pods gauge while the pod is
// held; and, once an episode, that a pod's do-not-disrupt annotation cannot be read. It is the
// Observer a drainer is given to report with (Options.Observer).
type Reporter struct {
	events        *events.Recorder
	metrics       BlockedPods
	log           *slog.Logger
	mu            sync.Mutex
	lastNodeEvent map[string]time.Time // node -> when its last EvictionBlocked Event went out
	// marksTold holds the pods (UID and what their annotation says) told of an unreadable
	// do-not-disrupt annotation, so that the drains of one episode tell each once.
	marksTold map[string]time.Time
	// holding lists, per node, the pods a budget holds now and what holds each.
	holding map[string]map[types.UID]string
	// heldChanged, when set, is told the node whose holding pods changed.
	heldChanged atomic.Pointer[func(node string)]
}

// Holding lists the pods that a disruption budget holds on the node's drain now, each as
// "namespace/name (what refuses)", in order.
func (r *Reporter) Holding(node string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := slices.Collect(maps.Values(r.holding[node]))
	slices.Sort(out)
	return out
}

// OnHeldChange has fn told the node whose holding pods changed (see Holding), from the
// drain's workers: it must not block.
func (r *Reporter) OnHeldChange(fn func(node string)) { r.heldChanged.Store(&fn) }

// hold notes the pod held (by not nil) or no longer held, and tells OnHeldChange's function.
func (r *Reporter) hold(pod *Pod, by *Blocker) {
	node := pod.Spec.NodeName
	r.mu.Lock()
	if r.holding == nil {
		r.holding = map[string]map[types.UID]string{}
	}
	if by != nil {
		if r.holding[node] == nil {
			r.holding[node] = map[types.UID]string{}
		}
		r.holding[node][pod.UID] = pod.Namespace + "/" + pod.Name + " (" + by.String() + ")"
	} else {
		delete(r.holding[node], pod.UID)
		if len(r.holding[node]) == 0 {
			delete(r.holding, node)
		}
	}
	r.mu.Unlock()
	if fn := r.heldChanged.Load(); fn != nil {
		(*fn)(node)
	}
}

// Moved tells the pod's owners, on the pod, that the drain moved it.
func (r *Reporter) Moved(pod *Pod, forced bool, grace int64) {
	if forced {
		r.events.PodDeleted(events.PodOf(pod), pod.Spec.NodeName, grace)
		return
	}
	r.events.PodEvicted(events.PodOf(pod), pod.Spec.NodeName, grace)
}

var _ MoveObserver = (*Reporter)(nil)

// BlockedPods counts the pods that hold a drain, by what holds them (metrics.Metrics fits it).
type BlockedPods interface {
	BlockedPod(reason string, delta float64)
}

// NewReporter is a Reporter that records Events with e, counts with m and logs with log.
func NewReporter(e *events.Recorder, m BlockedPods, log *slog.Logger) *Reporter {
	return &Reporter{events: e, metrics: m, log: log, lastNodeEvent: map[string]time.Time{}}
}

// markToldFor is how long a pod told of an unreadable annotation is not told again: longer
// than an episode's drains last.
const markToldFor = 24 * time.Hour

// UnreadableMark tells a pod's owners, once an episode, that its do-not-disrupt annotation
// cannot be read and protects it as "true".
func (r *Reporter) UnreadableMark(pod *Pod, why string) {
	if r.markDue(string(pod.UID)+"\x00"+why, time.Now()) {
		r.events.UnreadableMark(events.PodOf(pod), why)
	}
}

// markDue reports whether the pod and value in key have not been told of within markToldFor.
func (r *Reporter) markDue(key string, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.marksTold == nil {
		r.marksTold = map[string]time.Time{}
	}
	for k, at := range r.marksTold { // forget pods long told, so the map stays small
		if now.Sub(at) > markToldFor {
			delete(r.marksTold, k)
		}
	}
	if _, told := r.marksTold[key]; told {
		return false
	}
	r.marksTold[key] = now
	return true
}

var _ MarkObserver = (*Reporter)(nil)

func (r *Reporter) Blocked(pod *Pod, by Blocker) {
	r.metrics.BlockedPod(blockReason(by), 1)
	r.log.Warn("eviction refused by a disruption budget; retrying until the deadline", "pod", pod.Namespace+"/"+pod.Name,
		"node", pod.Spec.NodeName, "budget", by.Budget, "detail", by.Detail)
	r.hold(pod, &by)
	r.events.EvictionBlocked(events.PodOf(pod), by.String())
	if r.nodeEventDue(pod.Spec.NodeName) {
		r.events.DrainBlocked(events.Node{Name: pod.Spec.NodeName}, pod.Namespace+"/"+pod.Name, by.String())
	}
}

func (r *Reporter) Unblocked(pod *Pod, by Blocker, evicted bool) {
	r.metrics.BlockedPod(blockReason(by), -1)
	r.hold(pod, nil)
	if evicted {
		r.log.Info("eviction accepted after a disruption budget refused it", "pod", pod.Namespace+"/"+pod.Name, "node", pod.Spec.NodeName, "budget", by.Budget)
	}
}

// nodeEventDue reports whether the node may have another EvictionBlocked Event now.
func (r *Reporter) nodeEventDue(node string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	for n, at := range r.lastNodeEvent { // forget nodes long done, so the map stays small
		if now.Sub(at) > 10*nodeBlockedEvery {
			delete(r.lastNodeEvent, n)
		}
	}
	if at, ok := r.lastNodeEvent[node]; ok && now.Sub(at) < nodeBlockedEvery {
		return false
	}
	r.lastNodeEvent[node] = now
	return true
}

// blockReason is the gauge's label for what holds a pod.
func blockReason(by Blocker) string {
	if by.Budget == "" {
		return "several_disruption_budgets"
	}
	return "disruption_budget"
}
