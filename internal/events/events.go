// SPDX-License-Identifier: Apache-2.0

// Package events records Kubernetes Events on Nodes (EMIT_KUBERNETES_EVENTS), so that
// `kubectl describe node` and `kubectl get events` show which notice Lifeboat saw and what
// it did about it.
//
// Events are core/v1 Events written through client-go's event broadcaster, reported by the
// component "lifeboat", in the "default" namespace (Nodes have none; kubelet's node Events
// live there too). Each carries KUBERNETES_EVENTS_EXTRA_ANNOTATIONS, and, under DRY_RUN,
// the annotation lifeboat.dev/dry-run=true and a message saying what would have been done.
//
// Reasons follow NTH's where the meaning is the same (SpotInterruption, ScheduledEvent,
// RebalanceRecommendation, Cordon, CordonError, CordonAndDrain, CordonAndDrainError,
// Uncordon), so filters written for NTH keep working; the rest are Lifeboat's.
//
// Recording never blocks and never fails the caller. The nodes' and the pods' Events each
// wait in a bounded queue of their own (a burst's pod Events never crowd out a node's) and
// are written by a few workers through the request budget's background lane, after every
// other request; client-go's spam filter (per object: a burst of 25, then one every 5
// minutes) and its aggregation of similar Events apply. An Event that is not written (its
// queue full, the spam filter, refused by the API server, unanswered after every attempt, or
// still queued at the stop) is counted in lifeboat_events_dropped_total and logged, at most
// one line per 30 s. An Event is a report, never the record Lifeboat resumes from.
package events

import (
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/text"
)

// Component is the Events' source, for `kubectl get events --field-selector source=lifeboat`.
const Component = "lifeboat"

// AnnotationDryRun marks Events about actions that DRY_RUN kept from happening.
const AnnotationDryRun = "lifeboat.dev/dry-run"

// Event reasons.
const (
	ReasonSpotInterruption        = "SpotInterruption"
	ReasonCapacityReservation     = "CapacityReservationInterruption"
	ReasonScheduledEvent          = "ScheduledEvent"
	ReasonRebalanceRecommendation = "RebalanceRecommendation"
	ReasonASGLifecycle            = "ASGLifecycle" // an Auto Scaling termination
	ReasonASGLaunch               = "ASGLaunch"
	ReasonStateChange             = "StateChange"
	ReasonNotice                  = "Notice" // a kind this package does not know yet
	ReasonCapacityBlock           = "CapacityBlockExpiration"
	ReasonInstanceImpaired        = "InstanceImpaired"

	ReasonCordon              = "Cordon"
	ReasonCordonError         = "CordonError"
	ReasonDrainStarted        = "DrainStarted"
	ReasonDrained             = "CordonAndDrain"
	ReasonDrainError          = "CordonAndDrainError"
	ReasonUncordon            = "Uncordon"
	ReasonLifecycleCompleted  = "LifecycleActionCompleted"
	ReasonInstanceCallRefused = "InstanceCallRefused"  // a call on an instance the node does not name, or in another group
	ReasonInvalidRecord       = "InvalidRecord"        // the node's record failed validation: never acted on
	ReasonLeftToNewer         = "LeftToNewerLifeboat"  // a record or notice of a newer Lifeboat: left to it
	ReasonClaimRefused        = "InstanceClaimRefused" // the node's providerID names an instance that is not the node
	ReasonNoticeUntagged      = "NoticeUntagged"       // a notice for this node is not acted on: its instance lacks the tags that say it is ours
	ReasonDrainNotScheduled   = "DrainNotScheduled"
	ReasonDetachWaited        = "HandbackWaited"         // a wait before the hand-back ended in time
	ReasonDetachWaitCut       = "HandbackWaitCut"        // the deadline cut it short
	ReasonPodsHeld            = "PodsHeld"               // on the node: pods marked not to disrupt stay, no notice is a reclaim
	ReasonPodHeld             = "PodHeld"                // on such a pod: the same, told to its owners
	ReasonEvictionBlocked     = "EvictionBlocked"        // on the pod and its node: a disruption budget refuses its eviction
	ReasonUnreadableMark      = "DoNotDisruptUnreadable" // on the pod: its do-not-disrupt annotation is taken as "true"
	ReasonPodEvicted          = "InterruptionEviction"   // on the pod: evicted to drain its node
	ReasonPodDeleted          = "InterruptionDeletion"   // on the pod: deleted past its budget near the deadline
)

// maxDetail bounds the part of a message that comes from elsewhere (an error, a
// description), so one long error cannot make a huge Event.
const maxDetail = 512

// Node names the Node an Event is about.
type Node struct {
	Name string
	// UID of the Node object. When unknown, the node name stands in for it, as the kubelet
	// does; `kubectl describe node` finds Events under either.
	UID types.UID
}

// Pod names the pod an Event is about.
type Pod struct {
	Namespace, Name string
	UID             types.UID
}

// PodOf names p (a corev1.Pod, or what a drain keeps of one).
func PodOf(p metav1.Object) Pod {
	return Pod{Namespace: p.GetNamespace(), Name: p.GetName(), UID: p.GetUID()}
}

func (p Pod) reference() *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: p.Namespace, Name: p.Name, UID: p.UID}
}

// NodeOf names n.
func NodeOf(n *corev1.Node) Node { return Node{Name: n.Name, UID: n.UID} }

func (n Node) reference() *corev1.ObjectReference {
	uid := n.UID
	if uid == "" {
		uid = types.UID(n.Name)
	}
	return &corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: n.Name, UID: uid}
}

// Recorder records Lifeboat's Events. Its methods do nothing when EMIT_KUBERNETES_EVENTS is
// off, and a nil *Recorder is a disabled one.
type Recorder struct {
	rec         record.EventRecorder // the nodes' Events
	pods        record.EventRecorder // the pods' Events, queued apart
	dryRun      bool
	annotations map[string]string
}

// Options are the Recorder's settings.
type Options struct {
	// Enabled is EMIT_KUBERNETES_EVENTS; without it nothing is started and the Recorder
	// does nothing.
	Enabled bool
	// ExtraAnnotations (KUBERNETES_EVENTS_EXTRA_ANNOTATIONS) go on every Event.
	ExtraAnnotations map[string]string
	// Host is the Events' source host: the node an agent runs on (NODE_NAME).
	Host string
	// DryRun marks every Event as a dry run (DRY_RUN).
	DryRun bool
	// Logger receives each recorded Event at debug level, and a warning when Events are
	// dropped; nil discards.
	Logger *slog.Logger
	// Dropped counts the Events that were not written; nil: none.
	Dropped DropCounter
}

// New returns a Recorder and a function that stops it.
func New(client kubernetes.Interface, o Options) (*Recorder, func(), error) {
	if !o.Enabled {
		return &Recorder{}, func() {}, nil
	}
	// config checks the keys too; this catches options built in code, and the total size.
	if errs := apivalidation.ValidateAnnotations(o.ExtraAnnotations, field.NewPath("KUBERNETES_EVENTS_EXTRA_ANNOTATIONS")); len(errs) > 0 {
		return nil, nil, errs.ToAggregate()
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	// Two broadcasters, each with its own bounded queue and writers: the pods' Events (one per
	// pod a drain moves, tens of thousands when a zone is reclaimed) never crowd the nodes' out.
	sink := &typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")}
	source := corev1.EventSource{Component: Component, Host: o.Host}
	start := func(object string, settings writerSettings) (record.EventRecorder, func()) {
		return newWriter(object, settings, sink, o.Dropped, logger).attach(record.NewBroadcaster(), source)
	}
	rec, stopNodes := start(ObjectNode, nodeWriter)
	pods, stopPods := start(ObjectPod, podWriter)
	r := newRecorder(rec, o)
	r.pods = pods
	return r, func() { // side by side: each may wait for the API server
		var wg sync.WaitGroup
		wg.Go(stopPods)
		stopNodes()
		wg.Wait()
	}, nil
}

func newRecorder(rec record.EventRecorder, o Options) *Recorder {
	annotations := maps.Clone(o.ExtraAnnotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	if o.DryRun {
		annotations[AnnotationDryRun] = "true"
	}
	return &Recorder{rec: rec, pods: rec, dryRun: o.DryRun, annotations: annotations}
}

// podEvent records an Event on the pod, through the pods' own queue.
func (r *Recorder) podEvent(pod Pod, eventType, reason, msg string) {
	if !r.Enabled() {
		return
	}
	r.pods.AnnotatedEventf(pod.reference(), maps.Clone(r.annotations), eventType, reason, "%s", msg)
}

// Enabled reports whether Events are recorded.
func (r *Recorder) Enabled() bool { return r != nil && r.rec != nil }

// Notice records that a notice about the node's instance arrived (or, when n.Released, that
// its event was canceled or completed).
func (r *Recorder) Notice(node Node, n notice.Notice) {
	if !r.Enabled() {
		return
	}
	reason, what := describeKind(n.Kind)
	msg := fmt.Sprintf("%s notice %s for instance %s", what, n.ID, n.InstanceID)
	switch {
	case n.Released:
		msg += ": the event was canceled or has completed"
	case !n.Deadline.IsZero():
		msg += ", deadline " + n.Deadline.UTC().Format(time.RFC3339)
	}
	// A description that starts by naming the kind again says it once.
	if d := strings.TrimPrefix(n.Description, what+": "); d != "" {
		msg += ": " + clip(d)
	}
	if r.dryRun {
		msg += " (dry run: nothing will be changed)"
	}
	r.emit(node, corev1.EventTypeNormal, reason, msg)
}

// Cordoned records that the node was cordoned for a notice.
func (r *Recorder) Cordoned(node Node, noticeID string) {
	r.action(node, ReasonCordon,
		fmt.Sprintf("Cordoned for notice %s", noticeID),
		fmt.Sprintf("Dry run: would cordon for notice %s", noticeID))
}

// CordonFailed records that cordoning the node failed.
func (r *Recorder) CordonFailed(node Node, noticeID string, err error) {
	r.emit(node, corev1.EventTypeWarning, ReasonCordonError,
		fmt.Sprintf("Cordon for notice %s failed: %s", noticeID, errText(err)))
}

// DrainStarted records that evictions are starting, to finish before deadline.
func (r *Recorder) DrainStarted(node Node, noticeID string, deadline time.Time) {
	when := ""
	if !deadline.IsZero() {
		when = ", deadline " + deadline.UTC().Format(time.RFC3339)
	}
	r.action(node, ReasonDrainStarted,
		fmt.Sprintf("Draining for notice %s%s", noticeID, when),
		fmt.Sprintf("Dry run: would drain for notice %s%s", noticeID, when))
}

// Drained records a finished drain: evicted pods are gone (under DRY_RUN: would have been
// evicted).
func (r *Recorder) Drained(node Node, noticeID string, evicted int, took time.Duration) {
	r.action(node, ReasonDrained,
		fmt.Sprintf("Cordoned and drained for notice %s: %s evicted in %s", noticeID, pods(evicted), took.Round(time.Millisecond)),
		fmt.Sprintf("Dry run: would evict %s for notice %s", pods(evicted), noticeID))
}

// DrainFailed records a drain that did not empty the node.
func (r *Recorder) DrainFailed(node Node, noticeID string, err error) {
	r.emit(node, corev1.EventTypeWarning, ReasonDrainError,
		fmt.Sprintf("Drain for notice %s failed: %s", noticeID, errText(err)))
}

// DrainNotScheduled records that a notice cordoned the node but cannot schedule its drain,
// and why (its start time could not be read): an operator has to decide.
func (r *Recorder) DrainNotScheduled(node Node, noticeID, why string) {
	r.emit(node, corev1.EventTypeWarning, ReasonDrainNotScheduled,
		fmt.Sprintf("Notice %s cordons the node but schedules no drain: %s; drain the node by hand before the event, or uncordon it", noticeID, clip(why)))
}

// Uncordoned records that Lifeboat undid its cordon, and why.
func (r *Recorder) Uncordoned(node Node, why string) {
	r.action(node, ReasonUncordon,
		"Uncordoned: "+clip(why),
		"Dry run: would uncordon: "+clip(why))
}

// LifecycleCompleted records the completion of an Auto Scaling lifecycle action for the
// node's instance, with its result (CONTINUE or ABANDON).
func (r *Recorder) LifecycleCompleted(node Node, hook, instanceID, result string) {
	r.action(node, ReasonLifecycleCompleted,
		fmt.Sprintf("Completed lifecycle action of hook %s for instance %s with %s", hook, instanceID, result),
		fmt.Sprintf("Dry run: would complete lifecycle action of hook %s for instance %s with %s", hook, instanceID, result))
}

// InstanceCallRefused records that an AWS call the node's record asked for was not made,
// because the instance or group it names is not the node's own.
func (r *Recorder) InstanceCallRefused(node Node, why string) {
	r.emit(node, corev1.EventTypeWarning, ReasonInstanceCallRefused, clip("Not calling AWS: "+why))
}

// NoticeUntagged records that a notice for this cluster's node is not acted on because its
// instance lacks the managed tag or this cluster's tag: the node's pods go with the instance.
func (r *Recorder) NoticeUntagged(node Node, why string) {
	r.emit(node, corev1.EventTypeWarning, ReasonNoticeUntagged, clip("Lifeboat does not act on a notice for this node: "+why))
}

// ClaimRefused records that the node's providerID names an instance which, by EC2's
// description or by the node's own instance metadata, is not this node: Lifeboat does nothing
// on this node for that instance's notices.
func (r *Recorder) ClaimRefused(node Node, why string) {
	r.emit(node, corev1.EventTypeWarning, ReasonClaimRefused, clip("Lifeboat refuses this node's claim to an instance: "+why))
}

// InvalidRecord records that the node's interruption record failed validation: Lifeboat does
// not act on it, and the next notice for the node starts a fresh one.
func (r *Recorder) InvalidRecord(node Node, why string) {
	r.emit(node, corev1.EventTypeWarning, ReasonInvalidRecord, clip("Lifeboat ignores the node's interruption record: "+why))
}

// LeftToNewer records that this Lifeboat leaves part of the node's record to a newer one: the
// whole record (a newer schema version) or one notice (a kind this binary does not know).
func (r *Recorder) LeftToNewer(node Node, what string) {
	r.emit(node, corev1.EventTypeNormal, ReasonLeftToNewer, clip("This Lifeboat leaves "+what+" to a newer Lifeboat: it does not know it"))
}

// ReasonTakenFromNewer: what a newer Lifeboat left on the node, taken back (Lifeboat's own
// cordon undone) once its episode is over.
const ReasonTakenFromNewer = "TakenBackFromNewerLifeboat"

// TakenFromNewer records that this Lifeboat took back what a newer one left on the node (its
// record, or one of its notices), undoing Lifeboat's own cordon, taints and labels once no
// notice it knows holds the node: seen after a rollback.
func (r *Recorder) TakenFromNewer(node Node, what, why string) {
	r.emit(node, corev1.EventTypeNormal, ReasonTakenFromNewer, clip("This Lifeboat takes back "+what+" a newer Lifeboat left: "+why))
}

// DetachWaited records that the node waited before its instance was handed back, for what
// and how long (what: "volumes detached", "load-balancer targets drained").
func (r *Recorder) DetachWaited(node Node, what string, took time.Duration) {
	r.emit(node, corev1.EventTypeNormal, ReasonDetachWaited,
		fmt.Sprintf("Waited %s before handing the instance back: %s", took.Round(time.Second), what))
}

// DetachWaitCut records that the deadline ended a wait while something was still held:
// the instance is handed back with it.
func (r *Recorder) DetachWaitCut(node Node, what string, took time.Duration, held []string) {
	r.emit(node, corev1.EventTypeWarning, ReasonDetachWaitCut,
		clip(fmt.Sprintf("Deadline reached after %s waiting until %s; handing the instance back with %s still held", took.Round(time.Second), what, strings.Join(held, ", "))))
}

// PodsHeld records that the drain left pods their owners marked not to disrupt, because no
// notice of the node reclaims the instance: they keep running, and a reclaim that follows
// evicts them last.
func (r *Recorder) PodsHeld(node Node, held []string) {
	r.emit(node, corev1.EventTypeWarning, ReasonPodsHeld,
		clip(fmt.Sprintf("%s marked not to disrupt (karpenter.sh/do-not-disrupt=true or cluster-autoscaler.kubernetes.io/safe-to-evict=false) stay on the cordoned node: "+
			"no notice reclaims the instance; a Spot warning, termination hook or scheduled event would evict them last: %s", pods(len(held)), strings.Join(held, ", "))))
}

// PodHeld records, on a pod marked not to disrupt, that its node's drain leaves it running:
// its owners see in their namespace that the node is cordoned and going, and that the pod
// goes with the instance unless they move it or a reclaim's drain evicts it last.
func (r *Recorder) PodHeld(pod Pod, node string) {
	r.podEvent(pod, corev1.EventTypeWarning, ReasonPodHeld,
		clip("Lifeboat leaves the pod on node "+node+", which is cordoned for an interruption, because it is marked not to disrupt and no notice reclaims the instance yet; "+
			"it ends with the instance unless it is moved, or a reclaim's drain evicts it last"))
}

// EvictionBlocked records, on the pod, that its node's drain cannot evict it yet, and what
// refuses (a PodDisruptionBudget and its numbers): Lifeboat retries until the deadline.
func (r *Recorder) EvictionBlocked(pod Pod, by string) {
	r.podEvent(pod, corev1.EventTypeWarning, ReasonEvictionBlocked,
		clip("Lifeboat cannot evict the pod to drain its node: refused by "+by+"; retrying until the node's deadline"))
}

// UnreadableMark records, on the pod, that its karpenter.sh/do-not-disrupt annotation could
// not be read (why says what it holds) and is taken as "true". The caller sends one per pod
// and episode.
func (r *Recorder) UnreadableMark(pod Pod, why string) {
	r.podEvent(pod, corev1.EventTypeWarning, ReasonUnreadableMark,
		clip("Lifeboat protects the pod from its node's drains as if it were marked not to disrupt without an end: "+why+
			". Write \"true\", or a duration from the pod's start such as \"30m\""))
}

// PodEvicted records, on the pod, that its eviction was accepted: its node is drained before
// its instance goes away, and the pod has graceSeconds to stop.
func (r *Recorder) PodEvicted(pod Pod, node string, graceSeconds int64) {
	r.podEvent(pod, corev1.EventTypeNormal, ReasonPodEvicted,
		clip(fmt.Sprintf("Lifeboat evicted the pod to drain node %s, whose instance is being interrupted; grace period %ds", node, graceSeconds)))
}

// PodDeleted records, on the pod, that it was deleted although a disruption budget still
// protected it: its node's deadline was near (FORCE_DELETE_BEFORE_DEADLINE_SECONDS).
func (r *Recorder) PodDeleted(pod Pod, node string, graceSeconds int64) {
	r.podEvent(pod, corev1.EventTypeWarning, ReasonPodDeleted,
		clip(fmt.Sprintf("Lifeboat deleted the pod past its PodDisruptionBudget: node %s's instance goes at the deadline, which is near; grace period %ds", node, graceSeconds)))
}

// DrainBlocked records, on the node, a pod its drain cannot evict yet and what refuses. The
// caller spaces these out; the pod's own Event says the same to its owners.
func (r *Recorder) DrainBlocked(node Node, pod, by string) {
	r.emit(node, corev1.EventTypeWarning, ReasonEvictionBlocked, clip("Drain held: pod "+pod+" refused by "+by+"; retrying until the deadline"))
}

// action records a Normal Event whose message depends on DRY_RUN.
func (r *Recorder) action(node Node, reason, done, wouldDo string) {
	if !r.Enabled() {
		return
	}
	msg := done
	if r.dryRun {
		msg = wouldDo
	}
	r.emit(node, corev1.EventTypeNormal, reason, msg)
}

func (r *Recorder) emit(node Node, eventType, reason, msg string) {
	if !r.Enabled() {
		return
	}
	// The broadcaster keeps the map until the Event is written; each gets its own copy.
	r.rec.AnnotatedEventf(node.reference(), maps.Clone(r.annotations), eventType, reason, "%s", msg)
}

// describeKind gives a notice kind's reason and its name in a sentence.
func describeKind(k notice.Kind) (reason, what string) {
	if r, ok := notice.RulesOf(k); ok {
		return r.EventReason, r.Title
	}
	return ReasonNotice, fmt.Sprintf("%q", string(k))
}

func pods(n int) string {
	if n == 1 {
		return "1 pod"
	}
	return fmt.Sprintf("%d pods", n)
}

func errText(err error) string {
	if err == nil {
		return "unknown error"
	}
	return clip(err.Error())
}

// clip cuts s to maxDetail bytes at a character boundary.
func clip(s string) string {
	return text.Clip(s, maxDetail, "...")
}
