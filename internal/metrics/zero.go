// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/events"
	"lifeboat.dev/lifeboat/internal/notice"

	"lifeboat.dev/lifeboat/internal/cloud"
)

// Closed sets of label values the code uses, for series at zero from the start. A counter
// that first appears at 1 hides that increment from increase() and rate(), so an alert on a
// process's first failure would never fire.
var (
	results        = []string{ResultOK, ResultError}
	actionResults  = []string{ResultOK, ResultError, ResultDryRun, ResultSkipped, ResultNotFound, ResultRefused, ResultGivenUp}
	actions        = []string{ActionCordon, ActionDrain, ActionUncordon, ActionLifecycleComplete, ActionHeartbeat, ActionWebhook, ActionMarkUnhealthy, ActionTerminateInstance, ActionRebootInstance}
	evictionKinds  = []string{EvictionEvicted, EvictionForced, EvictionFailed, EvictionRefused, EvictionRetried}
	queueOutcomes  = []string{"done", "retry", "unreadable", "ignored", "not_owned", "foreign_account", "launching"}
	sqsEvents      = []string{"receive", "delete", "extend", "retry"}
	noticeSources  = []notice.Source{notice.SourceIMDS, notice.SourceQueue, notice.SourceEC2Status, notice.SourceNodeCondition}
	problems       = []string{ProblemStartTimeUnreadable, ProblemEntityNotInstance, ProblemEventStateUnknown, ProblemEventCodeUnknown, ProblemEventUnreadable, ProblemLifecycleStateUnknown}
	claimEvents    = []string{ClaimClaimed, ClaimRenewed, ClaimWaited, ClaimLost}
	retainedEvents = []string{RetainedAbandoned, RetainedTerminated, RetainedExpired, RetainedRefused, RetainedSwept, RetainedBusy}
	budgetReasons  = []string{"throttled", "queueing", "demand"}
	eventObjects   = []string{events.ObjectNode, events.ObjectPod}
	eventDrops     = []string{events.DropQueueFull, events.DropRateLimited, events.DropRefused, events.DropNamespace, events.DropUnsent, events.DropStopped}
	detachWaits    = []string{"volumes", "targets"}
	detachEnds     = []string{"released", "cut", "skipped"}
	leftToNewer    = []string{LeftRecord, LeftNotice}
	// gatedCalls are the calls the instance gate can refuse, and the lifecycle calls whose
	// failures the alerts watch; other AWS operations start at their first call.
	gatedCalls = []string{"CompleteLifecycleAction", "RecordLifecycleActionHeartbeat"}
	leftBy     = []drain.Reason{drain.ReasonMirror, drain.ReasonOwnPod, drain.ReasonFinished, drain.ReasonTerminating,
		drain.ReasonDaemonSet, drain.ReasonLocalData, drain.ReasonTolerates, drain.ReasonDoNotEvict}
)

// zeroKnown creates every series of a known label value at zero. Labels whose values are
// open-ended (namespaces, HTTP codes, instance-metadata paths) start at their first use.
func (m *Metrics) zeroKnown() {
	for _, k := range notice.Kinds() {
		for _, s := range noticeSources {
			if k.From(s) { // a pair the kind table allows; no series for one that cannot happen
				m.notices.WithLabelValues(labelValue(string(k)), labelValue(string(s)))
			}
		}
	}
	for _, a := range actions {
		each(actionResults, func(r string) { m.actions.WithLabelValues(a, r) })
	}
	each(results, func(r string) { m.drainSeconds.WithLabelValues(r) })
	each(evictionKinds, func(r string) { m.evictions.WithLabelValues(r) })
	each(queueOutcomes, func(o string) { m.queueMessages.WithLabelValues(o) })
	for _, e := range sqsEvents {
		each(results, func(r string) { m.sqsCalls.WithLabelValues(e, r) })
	}
	for _, c := range gatedCalls {
		each([]string{ResultOK, ResultError, ResultNotFound}, func(r string) { m.awsCalls.WithLabelValues(c, r) })
		m.refusedCalls.WithLabelValues(c)
	}
	for _, op := range cloud.Operations() {
		m.awsDenied.WithLabelValues(op, cloud.IAMAction(op))
	}
	each(problems, func(p string) { m.noticeWarn.WithLabelValues(p) })
	each(claimEvents, func(e string) { m.drainClaims.WithLabelValues(e) })
	each(leftToNewer, func(w string) { m.leftToNewer.WithLabelValues(w) })
	for _, w := range detachWaits {
		each(detachEnds, func(o string) { m.detachWait.WithLabelValues(w, o) })
	}
	for _, r := range leftBy {
		m.podsLeft.WithLabelValues(r.Label())
	}
	each(budgetReasons, func(r string) { m.budgetChanges.WithLabelValues(r) })
	each(retainedEvents, func(e string) { m.retained.WithLabelValues(e) })
	for _, o := range eventObjects {
		each(eventDrops, func(r string) { m.eventsDropped.WithLabelValues(o, r) })
	}
	each([]string{ServerProbes, ServerMetrics}, func(s string) { m.serverRefused.WithLabelValues(s) })
	each(results, func(r string) { m.instanceStatus.passes.WithLabelValues(r) })
}

func each(values []string, f func(string)) {
	for _, v := range values {
		f(v)
	}
}
