// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/client-go/kubernetes"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/episode"
	"lifeboat.dev/lifeboat/internal/episode/driver"
	"lifeboat.dev/lifeboat/internal/events"
	"lifeboat.dev/lifeboat/internal/instancegate"
	"lifeboat.dev/lifeboat/internal/lifecycle"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/ownership"
)

// noticeIntake takes one notice, whichever path it came by (a queue message, a status pass, a
// repair): is it this cluster's, what is its deadline, then its record on the Node
// (episode.Handler.Intake). The node's reconciler does the rest.
type noticeIntake struct {
	cfg        *config.Config
	client     kubernetes.Interface
	metrics    *metrics.Metrics
	events     *events.Recorder
	ownPod     events.Pod // Lifeboat's own pod, for the Events about its wiring
	gate       *instancegate.Gate
	asg        cloud.AutoScaling
	hooks      *cloud.HookTimeoutCache // termination hooks' timeouts, for their deadlines
	heartbeats *lifecycle.Heartbeats
	handler    *episode.Handler
	// intake is when a notice that could not be recorded is given up, and the pauses between
	// its tries while its message is held (from retryFirst up to retrySoon).
	intake driver.IntakePolicy
	// episodes is the per-node reconciler while the work loop runs: a recorded node is woken
	// at once.
	episodes *atomic.Pointer[driver.Driver]
	// starting bounds notices between receipt and their ownership and deadline being known
	// (WORKERS): the EC2 and Auto Scaling lookups in flight at once.
	starting chan struct{}

	// foreignLogged holds the notices already logged at Info as another cluster's: their
	// message is kept for that cluster and comes back every few minutes, logged at Debug.
	foreignLogged *cache.LRUExpireCache
	foreignMu     sync.Mutex
}

// startSlot waits for one of the WORKERS slots; release is safe to call more than once.
func (in *noticeIntake) startSlot(ctx context.Context) (release func(), ok bool) {
	select {
	case in.starting <- struct{}{}:
	case <-ctx.Done():
		return nil, false
	}
	var once sync.Once
	return func() { once.Do(func() { <-in.starting }) }, true
}

// handleNotice takes one notice of a message: ownership, its deadline, then its record on
// the Node (episode.Handler.Intake). The node's reconciler does the rest.
func (in *noticeIntake) handleNotice(ctx context.Context, resolver *ownership.Resolver, n notice.Notice, log *slog.Logger) noticeFate {
	if n.Kind.Hook() == notice.HookLaunch {
		return in.handleLaunch(ctx, resolver, n, log)
	}
	began := time.Now()
	release, ok := in.startSlot(ctx)
	if !ok {
		return noticeCancelled
	}
	defer release()
	verdict, err := resolver.Resolve(ctx, ownership.Subject{Path: ownership.PathOf(n), InstanceID: n.InstanceID, Node: n.Node})
	if err != nil {
		log.Warn("cannot tell whether the instance is ours yet; retrying", "notice", n.ID, "err", err)
		in.denied(ctx, "DescribeInstances", err, n, resolver.NodesNaming(n.InstanceID), log)
		return noticeRetry
	}
	if !verdict.Owned {
		return in.notActedOn(ctx, n, verdict, log)
	}
	if n.Lifecycle != nil && n.Kind.Hook() == notice.HookTermination {
		n.Deadline = in.hookDeadline(ctx, n, *n.Lifecycle, log)
	}
	if n.Deadline.IsZero() && n.CordonOnly == "" {
		// Rebalance recommendations and state changes: the drain budget from receipt.
		n.Deadline = time.Now().Add(time.Duration(in.cfg.NodeTerminationGracePeriod) * time.Second)
	}
	// The slot bounds what is asked of AWS at once. The node write waits for its turn in the
	// request budget's urgent lane, paced by the API server's answers: held through it, ten
	// slots held an Availability Zone's cordons back (docs/benchmarks.md).
	release()
	err = in.handler.Intake(ctx, n, verdict.Node.Name, verdict.Node)
	if err == nil {
		if r := in.episodes.Load(); r != nil {
			r.Add(verdict.Node.Name) // at once, not on the informer's echo of the write
		}
		return noticeDone
	}
	// The shared intake policy decides; the message's fate carries it out. This delivery's
	// start stands for the first try: a notice without a deadline is never late here.
	switch v := in.intake.Judge(ctx, err, n.Deadline, began, time.Now()); v {
	case driver.Stopping:
		return noticeCancelled
	case driver.NotOurs:
		return in.notOurs(ctx, n, err.Error(), log)
	case driver.TooLate:
		log.Error("giving up on notice", "notice", n.ID, "reason", v.String(), "deadline", n.Deadline, "err", err)
		return noticeDone
	}
	log.Warn("notice not recorded yet; the message will come back", "notice", n.ID, "err", err)
	return noticeRetry
}

// notActedOn is the fate of a notice whose verdict is not "this cluster's, act on it".
func (in *noticeIntake) notActedOn(ctx context.Context, n notice.Notice, verdict ownership.Verdict, log *slog.Logger) noticeFate {
	switch {
	case verdict.ClaimRefused:
		// The Node the notice was read from is not the instance: the claim was reported (an
		// Event on the claimant, the metric); nothing is done on any node for this notice.
		log.Warn("notice refused: the node it was read from is not its instance as EC2 describes it", "notice", n.ID,
			"node", n.Node, "instance", n.InstanceID, "reason", verdict.Reason)
		return noticeRefused
	case verdict.Untagged:
		return in.untagged(ctx, n, verdict, log)
	}
	// Never touch a node or complete a lifecycle action for an instance not ours.
	return in.notOurs(ctx, n, verdict.Reason, log)
}

// notOurs is the fate of a notice about an instance that is not this cluster's: its message
// is kept for its own cluster, unless DELETE_SQS_MSG_IF_NODE_NOT_FOUND deletes it.
func (in *noticeIntake) notOurs(ctx context.Context, n notice.Notice, reason string, log *slog.Logger) noticeFate {
	log.Log(ctx, in.foreignLevel(n.ID), "notice is not for this cluster", "notice", n.ID, "instance", n.InstanceID, "reason", reason)
	if in.cfg.DeleteSQSMsgIfNodeNotFound {
		return noticeDone
	}
	return noticeForeign
}

// foreignLevel is the level to log another cluster's notice at: Info the first time in an
// hour, Debug for its copies (a kept message comes back every few minutes).
func (in *noticeIntake) foreignLevel(id string) slog.Level {
	if in.firstInHour(id) {
		return slog.LevelInfo
	}
	return slog.LevelDebug
}

// firstInHour reports whether key is seen for the first time in an hour: what a message's
// copies repeat is said once.
func (in *noticeIntake) firstInHour(key string) bool {
	// One check-and-add: copies of a message received together reach here at once.
	in.foreignMu.Lock()
	defer in.foreignMu.Unlock()
	if _, seen := in.foreignLogged.Get(key); seen {
		return false
	}
	in.foreignLogged.Add(key, struct{}{}, time.Hour)
	return true
}

// handleLaunch completes a launch hook once the instance's Node has joined this cluster and is
// Ready. Until then the message goes back to the queue for a few seconds (holding nothing
// here), for at most ASG_LAUNCH_READY_TIMEOUT from the hook's time; then the hook is left to
// its own timeout. An instance that turns out to be another cluster's is never completed.
func (in *noticeIntake) handleLaunch(ctx context.Context, resolver *ownership.Resolver, n notice.Notice, log *slog.Logger) noticeFate {
	lc := n.Lifecycle
	if lc == nil {
		return noticeDone
	}
	verdict, err := resolver.Resolve(ctx, ownership.Subject{Path: ownership.PathQueue, InstanceID: n.InstanceID})
	switch {
	case err != nil:
		log.Warn("cannot tell whether the launching instance is ours yet", "notice", n.ID, "err", err)
		in.denied(ctx, "DescribeInstances", err, n, resolver.NodesNaming(n.InstanceID), log)
	case verdict.Untagged:
		// This cluster's node, whose instance lacks the tag: said, and its hook left to time out.
		return in.untagged(ctx, n, verdict, log)
	case verdict.Node != nil && !verdict.Owned:
		log.Log(ctx, in.foreignLevel(n.ID), "launch notice is not for this cluster", "notice", n.ID, "reason", verdict.Reason)
		if in.cfg.DeleteSQSMsgIfNodeNotFound {
			return noticeDone
		}
		return noticeForeign
	case verdict.Owned && nodeReady(verdict.Node) && in.cfg.DryRun:
		log.Info("dry run: would complete the launch lifecycle action: the node is Ready", "notice", n.ID, "node", verdict.Node.Name)
		return noticeDone
	case verdict.Owned && nodeReady(verdict.Node):
		err := in.gate.Check(ctx, instancegate.Request{Call: instancegate.CallCompleteLifecycleAction, Node: verdict.Node.Name, InstanceID: n.InstanceID, Group: lc.Group})
		if r, refused := instancegate.IsRefusal(err); refused {
			log.Error("launch lifecycle action not completed: the instance is not the node's, or not in the hook's group; it will time out", "notice", n.ID, "node", verdict.Node.Name, "err", r)
			in.events.InstanceCallRefused(events.NodeOf(verdict.Node), r.Error())
			return noticeDone
		}
		if err == nil {
			err = in.asg.CompleteLifecycleAction(ctx, cloud.LifecycleAction{Group: lc.Group, Hook: lc.Hook, InstanceID: n.InstanceID})
		}
		switch {
		case err == nil, errors.Is(err, cloud.ErrNoActiveAction):
			in.metrics.AWSCall("CompleteLifecycleAction", err, cloud.ErrNoActiveAction)
			log.Info("launch lifecycle action completed: the node is Ready", "notice", n.ID, "node", verdict.Node.Name, "err", err)
			return noticeDone
		case cloud.IsPermanent(err):
			log.Error("cannot complete the launch lifecycle action; it will time out", "notice", n.ID, "err", err)
			return noticeDone
		default:
			log.Warn("completing the launch lifecycle action failed; retrying", "notice", n.ID, "err", err)
		}
	}
	began := n.StartTime
	if began.IsZero() {
		began = time.Now()
	}
	if time.Since(began) > in.cfg.ASGLaunchReadyTimeout {
		log.Warn("the launching instance's node did not join and become Ready in time; leaving the hook to its own timeout",
			"notice", n.ID, "waited", in.cfg.ASGLaunchReadyTimeout)
		return noticeDone
	}
	if ctx.Err() != nil {
		return noticeCancelled
	}
	return noticeLaunching
}

// denied says, where it blocks, that AWS refused operation for want of permission: a Warning
// Event on Lifeboat's own pod naming the IAM action (once an hour per action), one on each
// Node the notice names (once an hour per notice), and a WARN line. The call is counted by
// metrics.AWSCall (lifeboat_aws_permission_denied_total), which the LifeboatAWSPermissionDenied
// alert reads, and `lifeboat status` shows the pod's Event on its first line. The notice is
// kept and retried: it is acted on once the permission is granted. Any other error says
// nothing here.
func (in *noticeIntake) denied(ctx context.Context, operation string, err error, n notice.Notice, blocked []*corev1.Node, log *slog.Logger) {
	code, ok := cloud.Denied(err)
	if !ok {
		return
	}
	action := cloud.IAMAction(operation)
	why := "AWS answered " + code + " to " + operation + ": grant " + action + " to Lifeboat's IAM role (deploy/aws)"
	if in.firstInHour("denied/" + action) {
		log.Warn("AWS refused a call for want of permission: notices wait and are retried until it is granted",
			"operation", operation, "iamAction", action, "code", code, "notice", n.ID)
		in.events.AWSPermissionDenied(in.ownPod, why+"; notices that need it wait and are retried")
	}
	if in.firstInHour("denied/" + action + "/" + n.ID) {
		for _, node := range blocked {
			in.events.AWSPermissionDeniedOn(events.NodeOf(node), string(n.Kind)+" notice "+n.ID+" for instance "+n.InstanceID+": "+why)
			in.note(ctx, node, ownership.AnnotationDenied, n, why, log)
		}
	}
}

// hookDeadline is when a termination hook's lifecycle action expires, carried on by the
// heartbeats this controller sends (HEARTBEAT_INTERVAL, HEARTBEAT_UNTIL).
func (in *noticeIntake) hookDeadline(ctx context.Context, n notice.Notice, lc notice.Lifecycle, log *slog.Logger) time.Time {
	start := n.StartTime
	if start.IsZero() {
		start = time.Now()
	}
	return lifecycle.Deadline(ctx, in.hooks, lc.Group, lc.Hook, start, in.heartbeats.Policy, log.With("notice", n.ID))
}

// untagged is the fate of a notice for this cluster's Node (EC2 describes the instance as the
// Node) whose instance lacks the managed tag or this cluster's tag. It is not acted on, as
// CHECK_TAG_BEFORE_DRAINING asks, but it is not another cluster's either: the node's pods go
// with the instance, so it is said where the operator looks, once an hour per notice: a
// Warning Event on the Node, lifeboat_notices_untagged_total (alerted on), a WARN line, and
// the Node's lifeboat.dev/untagged-notice annotation, which `lifeboat status` shows. The
// message's fate is a foreign notice's.
func (in *noticeIntake) untagged(ctx context.Context, n notice.Notice, v ownership.Verdict, log *slog.Logger) noticeFate {
	if in.firstInHour("untagged/" + n.ID) {
		why := v.Reason + "; " + untaggedFix(in.cfg.ClusterName)
		log.Warn("notice for this cluster's node not acted on: its instance lacks the tag that says it is this cluster's", "notice", n.ID,
			"kind", string(n.Kind), "node", v.Node.Name, "instance", n.InstanceID, "reason", v.Reason)
		in.metrics.NoticeUntagged()
		in.events.NoticeUntagged(events.NodeOf(v.Node), string(n.Kind)+" notice "+n.ID+": "+why)
		in.note(ctx, v.Node, ownership.AnnotationUntagged, n, why, log)
	}
	if in.cfg.DeleteSQSMsgIfNodeNotFound {
		return noticeDone
	}
	return noticeForeign
}

// note records on the Node, for `lifeboat status`, a notice the wiring holds up (annotation:
// ownership.AnnotationUntagged, ...); nothing under DRY_RUN.
func (in *noticeIntake) note(ctx context.Context, node *corev1.Node, annotation string, n notice.Notice, why string, log *slog.Logger) {
	if in.cfg.DryRun {
		return
	}
	value := ownership.NoteValue(time.Now(), n.ID, why)
	_, err := nodes.NewWriter(in.client).Apply(ctx, node.Name, node, "record a notice the wiring holds up", func(got *corev1.Node) {
		if got.Annotations == nil {
			got.Annotations = map[string]string{}
		}
		got.Annotations[annotation] = value
	})
	if err != nil {
		log.Warn("could not record on the node a notice the wiring holds up", "node", node.Name, "annotation", annotation, "err", err)
	}
}
