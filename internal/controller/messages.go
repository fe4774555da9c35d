// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/events"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/ownership"
	"lifeboat.dev/lifeboat/internal/source/sqs"
	"lifeboat.dev/lifeboat/internal/source/sqs/messages"
)

// messageIntake takes one queue message: its notices (a Capacity Block warning's from EC2's
// own list), each given to the notice intake, and the message's fate from theirs.
type messageIntake struct {
	cfg       *config.Config
	log       *slog.Logger
	metrics   *metrics.Metrics
	events    *events.Recorder
	ownPod    events.Pod
	ec2       cloud.EC2
	instances *ownership.Instances
	notices   *noticeIntake
}

// Each notice of a message (an AWS Health event names several instances) is handled on its
// own: ownership is decided per notice, a foreign instance skips only its own notice, and no
// notice waits for another's scheduled start or drain. A bounded number of them is handled
// at once (see runNotices). The message's fate is decided from all of them (see
// messageFate).
func (mi *messageIntake) handleMessage(ctx context.Context, resolver *ownership.Resolver, m sqs.Message, handle noticeHandler) (sqs.Outcome, time.Duration) {
	log := mi.log.With("message", m.ID)
	res, err := mi.parser().Parse(m.Body, time.Now())
	if errors.Is(err, messages.ErrForeignAccount) {
		return mi.foreignAccount(ctx, m, err, log)
	}
	if err != nil {
		log.Error("unreadable queue message deleted", "err", err)
		mi.metrics.QueueMessage("unreadable")
		return sqs.Done, 0
	}
	for _, w := range res.Warnings {
		log.Warn("part of a queue message could not be read; the rest is handled", "problem", w.Problem, "detail", w.Detail)
		mi.metrics.NoticeWarning(w.Problem)
	}
	if res.Ignore {
		return mi.ignoreMessage(res, log)
	}
	notices := res.Notices
	if len(res.Reservations) > 0 {
		more, ok := mi.reservationNotices(ctx, resolver, res.Reservations, log)
		if !ok {
			mi.metrics.QueueMessage("retry")
			return sqs.Retry, retryDelay(m.ReceiveCount)
		}
		if notices = append(notices, more...); len(notices) == 0 {
			// Told and counted by kind and reason in reservationNotices.
			mi.metrics.QueueMessage("ignored")
			return sqs.Done, 0
		}
	}
	for _, n := range notices {
		mi.metrics.Notice(string(n.Kind), string(n.Source))
	}
	fates := runNotices(ctx, notices, mi.noticePool(log), func(ctx context.Context, n notice.Notice) noticeFate {
		return handle(ctx, n, log)
	})
	outcome, delay, label := messageFate(ctx, fates, m.ReceiveCount)
	mi.metrics.QueueMessage(label)
	return outcome, delay
}

// ignoreMessage deletes a message that is recognised and names nothing to act on: logged at
// Info, counted by kind and reason. An event of a kind Lifeboat does not know is deleted too,
// logged at Warn with the EventBridge rule pattern that sent it, so that the rule can be narrowed.
func (mi *messageIntake) ignoreMessage(res messages.Result, log *slog.Logger) (sqs.Outcome, time.Duration) {
	if res.Unknown != nil {
		log.Warn("queue message of a kind Lifeboat does not know deleted", "source", res.Unknown.Source, "detailType", res.Unknown.DetailType,
			"rule", res.Unknown.Rule(), "reason", res.Reason)
	} else {
		log.Info("queue message ignored", "kind", res.IgnoredKind, "why", res.IgnoredReason, "reason", res.Reason)
	}
	mi.metrics.QueueMessage("ignored")
	mi.metrics.QueueMessageIgnored(res.IgnoredKind, res.IgnoredReason)
	return sqs.Done, 0
}

// noticeWorkers is how many notices of one message are handled at once: as many as the
// queue messages held at once, so that one message naming many instances is taken in as
// fast as as many messages naming one each.
func (mi *messageIntake) noticeWorkers() int { return 2 * max(mi.cfg.Workers, 1) }

// noticePool is how a message's (or a status pass's) notices are handled: noticeWorkers at
// once, the intake policy's backoff, and their panics logged to log and counted.
func (mi *messageIntake) noticePool(log *slog.Logger) noticePool {
	return noticePool{workers: mi.noticeWorkers(), backoff: mi.notices.intake.Backoff(), log: log, panics: mi.metrics}
}

// parser reads this queue's messages: from the queue's own account (named in QUEUE_URL) and
// QUEUE_ALLOWED_ACCOUNTS; from any account when QUEUE_URL names none.
func (mi *messageIntake) parser() messages.Parser {
	return messages.Parser{QueueAccount: config.AccountFromQueueURL(mi.cfg.QueueURL), AllowedAccounts: mi.cfg.QueueAllowedAccounts}
}

// foreignAccount refuses a message from an AWS account the queue does not accept: none of
// its notices is acted on. Like a notice about another cluster's instance it is kept on the
// queue (it may be meant for a consumer that accepts its account) unless
// DELETE_SQS_MSG_IF_NODE_NOT_FOUND deletes it. It is logged at Warn once an hour, its copies
// at Debug.
func (mi *messageIntake) foreignAccount(ctx context.Context, m sqs.Message, err error, log *slog.Logger) (sqs.Outcome, time.Duration) {
	mi.metrics.QueueMessage("foreign_account")
	level := mi.notices.foreignLevel("account/" + m.ID)
	if level == slog.LevelInfo {
		level = slog.LevelWarn
	}
	kept := !mi.cfg.DeleteSQSMsgIfNodeNotFound
	log.Log(ctx, level, "queue message from another AWS account refused; nothing acted on (QUEUE_ALLOWED_ACCOUNTS accepts another account's messages)",
		"err", err, "kept", kept)
	if kept {
		return sqs.Retry, retryLater
	}
	return sqs.Done, 0
}

// reservationNotices resolves warnings that name a capacity reservation (a Capacity Block's
// end) to notices for this cluster's instances in it. Per warning: one
// DescribeCapacityReservations, whose answer decides whether to act and the deadline, then
// one DescribeInstances (paged) for the instances in it, whose answer (tags, private DNS
// names) also serves the ownership checks, which each notice then goes through as any other.
// An instance in the reservation that no Node of this cluster names is another cluster's (a
// reservation serves a whole account) and is left out. A warning EC2 contradicts drains
// nothing, and says so on this cluster's Nodes in the reservation, in the log and in
// lifeboat_queue_messages_ignored_total. ok is false when EC2 could not be asked: the message
// comes back.
func (mi *messageIntake) reservationNotices(ctx context.Context, resolver *ownership.Resolver, reservations []messages.Reservation, log *slog.Logger) (out []notice.Notice, ok bool) {
	ec2 := cloud.CountedEC2{EC2: mi.ec2, Calls: mi.metrics}
	for _, r := range reservations {
		desc, err := ec2.DescribeCapacityReservation(ctx, r.ID)
		if errors.Is(err, cloud.ErrReservationNotFound) {
			log.Warn("a Capacity Block expiration warning names a reservation EC2 does not know: nothing drained (the message is not a real warning)",
				"reservation", r.ID, "err", err)
			mi.metrics.QueueMessageIgnored(messages.IgnoreCapacityBlockExpiration, messages.ReasonReservationAbsent)
			mi.events.ForgedCapacityBlock(mi.ownPod, "EC2 knows no capacity reservation "+r.ID)
			continue
		}
		if err != nil {
			log.Warn("cannot read the capacity reservation yet; the message will come back", "reservation", r.ID, "err", err)
			return nil, false
		}
		v := judgeBlock(desc, time.Now())
		mine, ok := mi.blockInstances(ctx, resolver, r.ID, log)
		if !ok {
			return nil, false
		}
		if v.reason != "" {
			mi.blockNotDrained(r, v, mine, log)
			continue
		}
		r.Deadline, r.EndDate = v.deadline, desc.EndDate
		for _, id := range mine.instances {
			out = append(out, r.Notice(id))
		}
		log.Info("Capacity Block ends: notices for this cluster's instances in it", "reservation", r.ID, "endDate", desc.EndDate,
			"instanceType", desc.InstanceType, "ultraServer", IsUltraServerType(desc.InstanceType), "deadline", v.deadline,
			"instances", mine.total, "ours", len(mine.instances))
		if len(mine.instances) == 0 {
			mi.metrics.QueueMessageIgnored(messages.IgnoreCapacityBlockExpiration, messages.ReasonNoInstanceOfOurs)
		}
	}
	return out, true
}

// blockInstances asks EC2 for the reservation's instances and keeps those a Node of this
// cluster names, or whose ownership is not known yet (handleNotice decides, and retries, as
// for any notice).
func (mi *messageIntake) blockInstances(ctx context.Context, resolver *ownership.Resolver, reservation string, log *slog.Logger) (blockMembers, bool) {
	instances, err := mi.ec2.InstancesInCapacityReservation(ctx, reservation)
	mi.metrics.AWSCall("DescribeInstances", err, nil)
	if err != nil {
		log.Warn("cannot look up the capacity reservation's instances yet; the message will come back", "reservation", reservation, "err", err)
		return blockMembers{}, false
	}
	mi.instances.Known(instances)
	m := blockMembers{total: len(instances)}
	for _, in := range instances {
		v, err := resolver.Resolve(ctx, ownership.Subject{Path: ownership.PathCapacityBlock, InstanceID: in.ID})
		if err == nil && v.Node == nil {
			continue
		}
		m.instances = append(m.instances, in.ID)
		if err == nil {
			m.nodes = append(m.nodes, events.NodeOf(v.Node))
		}
	}
	return m, true
}

// blockNotDrained reports a warning EC2 contradicts: an Event on each of this cluster's
// Nodes in the reservation, a log line, a count.
func (mi *messageIntake) blockNotDrained(r messages.Reservation, v blockVerdict, mine blockMembers, log *slog.Logger) {
	level := slog.LevelInfo
	if v.forged {
		level = slog.LevelWarn
	}
	log.Log(context.Background(), level, "Capacity Block expiration warning not acted on: nothing drained", "reservation", r.ID,
		"reason", v.reason, "why", v.why, "nodes", len(mine.nodes))
	mi.metrics.QueueMessageIgnored(messages.IgnoreCapacityBlockExpiration, v.reason)
	for _, n := range mine.nodes {
		mi.events.CapacityBlockNotDrained(n, v.forged, v.why+": nothing drained")
	}
	if v.forged {
		mi.events.ForgedCapacityBlock(mi.ownPod, v.why)
	}
}
