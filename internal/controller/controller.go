// SPDX-License-Identifier: Apache-2.0

// Package controller runs Lifeboat's controller mode. Intake consumes the cluster's SQS queue
// (EventBridge events and Auto Scaling hooks), checks that each instance belongs to this
// cluster, and records each notice on its Node (cordon and intent, one write) before the
// message is deleted; a per-node reconciler then drives each node's episode from that record
// (wait for a scheduled start, drain, complete lifecycle actions) through the same handler as
// agent mode. One replica leads at a time (a Lease); the others wait to take over.
package controller

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/episode"
	"lifeboat.dev/lifeboat/internal/episode/driver"
	"lifeboat.dev/lifeboat/internal/events"
	"lifeboat.dev/lifeboat/internal/instancegate"
	"lifeboat.dev/lifeboat/internal/lifecycle"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/ownership"
	"lifeboat.dev/lifeboat/internal/record"
	"lifeboat.dev/lifeboat/internal/source/sqs"
	"lifeboat.dev/lifeboat/internal/source/sqs/messages"
)

// Controller protects every node of the cluster.
type Controller struct {
	cfg    *config.Config
	client kubernetes.Interface
	// leaseClient renews the Lease (Options.LeaseClient).
	leaseClient kubernetes.Interface
	queue       sqs.API
	ec2         cloud.EC2
	// instances is EC2's description of instances, batched and cached, shared by the
	// ownership checks and the gate.
	instances *ownership.Instances
	asg       cloud.AutoScaling
	hooks     *cloud.HookTimeoutCache // termination hooks' timeouts, for their deadlines
	// gate checks every call that acts on an instance against the Node itself: the record
	// that asks for it is input any node credential can write.
	gate *instancegate.Gate
	// intake is when a notice that could not be recorded is given up, and the pauses between
	// its tries while its message is held (from retryFirst up to retrySoon).
	intake driver.IntakePolicy
	// completer completes termination hooks once their node is drained.
	completer lifecycle.Completer
	log       *slog.Logger
	metrics   *metrics.Metrics
	handler   *episode.Handler
	events    *events.Recorder

	// heartbeats keep the termination hooks of running drains alive (HEARTBEAT_INTERVAL).
	heartbeats *lifecycle.Heartbeats
	// retainedSweepEvery is the pause between passes of the retained-instance sweep.
	retainedSweepEvery time.Duration
	setup              *setupChecks // nil: the set-up is not checked

	// starting bounds notices between receipt and their ownership and deadline being known
	// (WORKERS): the EC2 and Auto Scaling lookups in flight at once.
	starting chan struct{}
	// episodes is the per-node reconciler while Run runs.
	episodes atomic.Pointer[driver.Driver]

	leading    atomic.Bool
	working    atomic.Bool                  // the work loop runs: the reconciler takes nodes
	warmed     atomic.Pointer[warm]         // what warmUp keeps ready, while it runs
	podsSynced atomic.Bool                  // the drains' shared pod informer has listed the cluster's pods
	consumer   atomic.Pointer[sqs.Consumer] // while Run consumes the queue

	// foreignLogged holds the notices already logged at Info as another cluster's: their
	// message is kept for that cluster and comes back every few minutes, logged at Debug.
	foreignLogged *cache.LRUExpireCache
	foreignMu     sync.Mutex
}

// Healthy is the readiness check: a leader whose queue receives keep failing is not ready; a
// standby is once its caches are synced, since it can then take over at once.
func (c *Controller) Healthy() error {
	if !c.leading.Load() && !c.working.Load() {
		return c.standbyReady()
	}
	if q := c.consumer.Load(); q != nil {
		return q.Healthy()
	}
	return errors.New("leading but not consuming the queue yet")
}

// Options are what a Controller works with. Config, Client and the three AWS clients are
// required.
type Options struct {
	Config *config.Config
	// Client makes every Kubernetes request but the Lease's.
	Client kubernetes.Interface
	// LeaseClient renews the Lease. With a rate limit of its own, renewals never queue behind
	// a burst's evictions (a leader that cannot renew in time loses the Lease and cancels
	// every drain). Default: Client.
	LeaseClient kubernetes.Interface
	Queue       sqs.API
	EC2         cloud.EC2
	AutoScaling cloud.AutoScaling
	Logger      *slog.Logger
	Metrics     *metrics.Metrics
	// Handler holds the process's parts of the interruption handler (Events, webhook,
	// hand-back waits, cordon client); the controller adds its own: the queue as origin,
	// lifecycle completion and heartbeats.
	Handler episode.Options
	// RetainedSweepEvery is the pause between two passes of the sweep of retained instances.
	// Default: five minutes.
	RetainedSweepEvery time.Duration
	// Setup, when set, reads the AWS set-up that feeds the queue (EventBridge rules, the queue's
	// policy), checked at start and every SetupCheckEvery (default an hour).
	Setup           cloud.Setup
	SetupCheckEvery time.Duration
}

// New builds a controller.
func New(o Options) *Controller {
	cfg, m := o.Config, o.Metrics
	c := &Controller{cfg: cfg, client: o.Client, leaseClient: o.LeaseClient, queue: o.Queue, ec2: o.EC2, asg: o.AutoScaling,
		log: o.Logger, metrics: m, events: o.Handler.Events,
		starting: make(chan struct{}, max(cfg.Workers, 1)), foreignLogged: cache.NewLRUExpireCache(10000)}
	m.ClaimPaths(metrics.ClaimCheckEC2, slices.DeleteFunc(ownership.PathNames(), func(p string) bool { return p == string(ownership.PathInstanceMetadata) }))
	m.IgnoredAtZero(messages.IgnoredLabels())
	if c.leaseClient == nil {
		c.leaseClient = o.Client
	}
	c.retainedSweepEvery = cmp.Or(o.RetainedSweepEvery, retainedSweepEvery)
	if o.Setup != nil && cfg.QueueURL != "" {
		c.setup = &setupChecks{c: c, setup: o.Setup, every: cmp.Or(o.SetupCheckEvery, time.Hour), said: map[string]bool{}}
	}
	var ec2 cloud.EC2
	if o.EC2 != nil {
		ec2 = cloud.CountedEC2{EC2: o.EC2, Calls: m}
	}
	c.instances = ownership.NewInstances(ec2, ownership.InstancesOptions{Logger: o.Logger, Panics: m})
	c.gate = instancegate.New(instancegate.Options{Nodes: o.Client, Groups: cloud.CountedGroups{AutoScaling: o.AutoScaling, Calls: m},
		Instances: c.instances, Refused: m.InstanceCallRefused})
	c.completer = lifecycle.Completer{AutoScaling: o.AutoScaling, Gate: c.gate, Metrics: m, Log: o.Logger,
		Delay: time.Duration(cfg.CompleteLifecycleActionDelaySeconds) * time.Second, Events: o.Handler.Events}
	c.intake = driver.IntakePolicy{NotOurs: episode.ErrNotOurs, MaxPause: retrySoon,
		Budget: time.Duration(cfg.NodeTerminationGracePeriod) * time.Second}
	c.hooks = cloud.NewHookTimeoutCache(o.AutoScaling)
	c.hooks.Calls = m
	c.heartbeats = &lifecycle.Heartbeats{AutoScaling: o.AutoScaling, Hooks: c.hooks, Gate: c.gate, Nodes: nodes.NewWriter(o.Client),
		Metrics: m, Events: o.Handler.Events, Log: o.Logger, Policy: heartbeatPolicy(cfg, time.Second)}
	h := o.Handler
	h.Origin, h.Metrics, h.KeepAlive = "queue "+cfg.QueueURL, m, c.heartbeats
	if h.Drainer == nil {
		h.Drainer = episode.NewDrainer(cfg, o.Client, m, h.Events, o.Logger)
	}
	// A leader draining its own node is evicted last there: its standby takes over once, at
	// the end of that drain (the pod's eviction stops this process, which releases the Lease).
	h.Drainer = h.Drainer.WithOwnPodLast()
	h.Completer = lifecycle.QueueNotices{Completer: c.completer, MarkUnhealthy: cfg.SetImpairedInstanceUnhealthy && !cfg.DryRun,
		Repairs: repairs(cfg, o.EC2, o.Client)}
	if cfg.DeadInstanceFastPath && o.EC2 != nil {
		h.Dead = deadInstances{ec2: cloud.CountedEC2{EC2: o.EC2, Calls: m}, unreachable: cfg.DeadInstanceFastPathUnreachable, log: o.Logger,
			claims: c.claimReports()}
	}
	if r := lifecycle.NewRetainer(o.AutoScaling, c.gate, m, o.Logger, cfg.AbandonOnIncompleteDrain, cfg.RetainedDrainTimeout); r != nil {
		h.Retainer = r
	}
	c.handler = episode.NewHandler(cfg, o.Client, o.Logger, h)
	return c
}

// Run consumes the queue until ctx ends, as a leader does (RunWithLeaderElection runs it
// only while this replica holds the Lease).
func (c *Controller) Run(ctx context.Context) error {
	w, err := c.warmUp()
	if err != nil {
		return err
	}
	defer w.stop()
	return c.work(ctx, w)
}

// work is the leader's work loop on what warmUp keeps ready: it waits for the node cache
// (synced already on a warm standby), starts the reconciler on every node with work, and
// consumes the queue until ctx ends.
func (c *Controller) work(ctx context.Context, w *warm) error {
	if !cacheSynced(ctx, w.factory) {
		return ctx.Err()
	}
	// The episode gauges, counted from the informer's Nodes while this replica leads.
	c.metrics.CountEpisodes(func() (metrics.Episodes, bool) {
		return record.CountEpisodes(w.nodes.GetStore().List()), true
	})
	defer c.metrics.CountEpisodes(nil)
	// The reconciler stops (and its drains with it) only after intake has: a notice recorded
	// by intake is always reconciled, here or by the next leader.
	stopEpisodes := runEpisodes(ctx, w.episodes)
	c.working.Store(true)
	w.offerAll(w.offer) // what the informer listed while no work loop ran to take it
	c.episodes.Store(w.episodes)
	defer func() { c.episodes.Store(nil); c.working.Store(false); stopEpisodes() }()
	warnIdentity(c.log, c.metrics, c.cfg, w.resolver.Warnings())
	defer startLoops(ctx, c.sideLoops(w))() // stopped and waited for before the reconciler stops
	return c.consume(ctx, w.resolver)
}

// consume takes the queue's messages in until ctx ends. Intake holds a message only until
// its notices are recorded: twice WORKERS in flight lets the next messages be received while
// the current ones are written.
func (c *Controller) consume(ctx context.Context, resolver *ownership.Resolver) error {
	consumer := sqs.NewConsumer(c.queue, sqs.ConsumerOptions{
		QueueURL: c.cfg.QueueURL, Workers: 2 * max(c.cfg.Workers, 1),
		VisibilityTimeout: time.Duration(c.cfg.SQSMsgVisibilityTimeoutSec) * time.Second, Logger: c.log,
		Observe: c.metrics.ObserveSQS, Panics: c.metrics,
	})
	c.consumer.Store(consumer)
	defer c.consumer.Store(nil)
	go c.metrics.ReportSourceHealth(ctx, "queue", consumer.Healthy)
	c.log.Info("controller consuming the queue", "queue", c.cfg.QueueURL, "workers", c.cfg.Workers, "dryRun", c.cfg.DryRun)
	handle := func(ctx context.Context, n notice.Notice, log *slog.Logger) noticeFate {
		return c.handleNotice(ctx, resolver, n, log)
	}
	return consumer.Run(ctx, func(ctx context.Context, m sqs.Message) (sqs.Outcome, time.Duration) {
		if m.ReceiveCount <= 1 && !m.SentAt.IsZero() {
			c.metrics.QueueLag(time.Since(m.SentAt))
		}
		outcome, delay := c.handleMessage(ctx, resolver, m, handle)
		if outcome == sqs.Done && c.cfg.DryRun {
			// DRY_RUN deletes nothing; the message comes back much later, and its notices are
			// recognised as handled (the dry-run log says what would have been done).
			return sqs.Retry, retryLater
		}
		return outcome, delay
	})
}

// warnIdentity logs the ownership settings' warnings (but CLUSTER_NAME's: the configuration
// already warned about it) and counts each missing identity setting in a metric.
func warnIdentity(log *slog.Logger, m *metrics.Metrics, cfg *config.Config, warnings []string) {
	for _, w := range warnings {
		if !strings.HasPrefix(w, "CLUSTER_NAME") {
			log.Warn(w)
		}
	}
	if cfg.ClusterName == "" {
		m.ConfigWarning("cluster_name_unset")
	}
	if !cfg.CheckTagBeforeDraining {
		m.ConfigWarning("managed_tag_check_off")
	}
	if config.AccountFromQueueURL(cfg.QueueURL) == "" {
		m.ConfigWarning("queue_account_unknown") // config.Validate said so in the log
	}
}

// shareNodePods starts the pod informer the drains share and hands it to the handler; stop
// takes it back and stops the informer.
func (c *Controller) shareNodePods() (stop func(), err error) {
	factory := informers.NewSharedInformerFactory(c.client, 0)
	informer := factory.Core().V1().Pods().Informer()
	pods, err := drain.NewNodePods(informer) // it keeps drain.Pods, smaller than corev1.Pods
	if err != nil {
		return nil, err
	}
	done := make(chan struct{})
	factory.Start(done)
	c.handler.UseNodePods(pods)
	watching := make(chan struct{})
	go func() {
		defer close(watching)
		// In a large cluster the first list of every pod takes seconds: say when it is over.
		start := time.Now()
		if toolscache.WaitForCacheSync(done, informer.HasSynced) {
			c.podsSynced.Store(true)
			c.log.Info("the drains' pod informer has listed the cluster's pods", "pods", len(informer.GetStore().ListKeys()), "took", time.Since(start).Round(time.Millisecond).String())
		}
	}()
	return func() {
		c.handler.UseNodePods(nil)
		close(done)
		<-watching // it ends at once with done, so that it cannot set podsSynced afterwards
		factory.Shutdown()
		c.podsSynced.Store(false)
	}, nil
}

// startSlot waits for one of the WORKERS slots; release is safe to call more than once.
func (c *Controller) startSlot(ctx context.Context) (release func(), ok bool) {
	select {
	case c.starting <- struct{}{}:
	case <-ctx.Done():
		return nil, false
	}
	var once sync.Once
	return func() { once.Do(func() { <-c.starting }) }, true
}

func cacheSynced(ctx context.Context, f informers.SharedInformerFactory) bool {
	for _, ok := range f.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return false
		}
	}
	return true
}

// Delays before a message comes back: a notice that could not be handled yet is retried
// soon, after a delay that doubles from retryFirst with each delivery up to retrySoon; one
// about an instance that is not ours much later (it may be another cluster's); a launch hook
// whose node is not Ready yet is looked at again shortly.
const (
	retryFirst  = time.Second
	retrySoon   = 10 * time.Second
	retryLater  = 5 * time.Minute
	launchCheck = 2 * time.Second
)

// handleMessage decides a message's fate. Policy for unparseable messages: they are logged
// with their id and deleted, since no retry can make them readable. A message from an AWS
// account the queue does not accept is refused, and kept like a notice about another
// cluster's instance (see foreignAccount).
//
// Each notice of a message (an AWS Health event names several instances) is handled on its
// own: ownership is decided per notice, a foreign instance skips only its own notice, and no
// notice waits for another's scheduled start or drain. A bounded number of them is handled
// at once (see runNotices). The message's fate is decided from all of them (see
// messageFate).
func (c *Controller) handleMessage(ctx context.Context, resolver *ownership.Resolver, m sqs.Message, handle noticeHandler) (sqs.Outcome, time.Duration) {
	log := c.log.With("message", m.ID)
	res, err := c.parser().Parse(m.Body, time.Now())
	if errors.Is(err, messages.ErrForeignAccount) {
		return c.foreignAccount(ctx, m, err, log)
	}
	if err != nil {
		log.Error("unreadable queue message deleted", "err", err)
		c.metrics.QueueMessage("unreadable")
		return sqs.Done, 0
	}
	for _, w := range res.Warnings {
		log.Warn("part of a queue message could not be read; the rest is handled", "problem", w.Problem, "detail", w.Detail)
		c.metrics.NoticeWarning(w.Problem)
	}
	if res.Ignore {
		return c.ignoreMessage(res, log)
	}
	notices := res.Notices
	if len(res.Reservations) > 0 {
		more, ok := c.reservationNotices(ctx, resolver, res.Reservations, log)
		if !ok {
			c.metrics.QueueMessage("retry")
			return sqs.Retry, retryDelay(m.ReceiveCount)
		}
		if notices = append(notices, more...); len(notices) == 0 {
			// Told and counted by kind and reason in reservationNotices.
			c.metrics.QueueMessage("ignored")
			return sqs.Done, 0
		}
	}
	for _, n := range notices {
		c.metrics.Notice(string(n.Kind), string(n.Source))
	}
	fates := runNotices(ctx, notices, c.noticePool(log), func(ctx context.Context, n notice.Notice) noticeFate {
		return handle(ctx, n, log)
	})
	outcome, delay, label := messageFate(ctx, fates, m.ReceiveCount)
	c.metrics.QueueMessage(label)
	return outcome, delay
}

// ignoreMessage deletes a message that is recognised and names nothing to act on: logged at
// Info, counted by kind and reason. An event of a kind Lifeboat does not know is deleted too,
// logged at Warn with the EventBridge rule pattern that sent it, so that the rule can be narrowed.
func (c *Controller) ignoreMessage(res messages.Result, log *slog.Logger) (sqs.Outcome, time.Duration) {
	if res.Unknown != nil {
		log.Warn("queue message of a kind Lifeboat does not know deleted", "source", res.Unknown.Source, "detailType", res.Unknown.DetailType,
			"rule", res.Unknown.Rule(), "reason", res.Reason)
	} else {
		log.Info("queue message ignored", "kind", res.IgnoredKind, "why", res.IgnoredReason, "reason", res.Reason)
	}
	c.metrics.QueueMessage("ignored")
	c.metrics.QueueMessageIgnored(res.IgnoredKind, res.IgnoredReason)
	return sqs.Done, 0
}

// noticeWorkers is how many notices of one message are handled at once: as many as the
// queue messages held at once, so that one message naming many instances is taken in as
// fast as as many messages naming one each.
func (c *Controller) noticeWorkers() int { return 2 * max(c.cfg.Workers, 1) }

// noticePool is how a message's (or a status pass's) notices are handled: noticeWorkers at
// once, the intake policy's backoff, and their panics logged to log and counted.
func (c *Controller) noticePool(log *slog.Logger) noticePool {
	return noticePool{workers: c.noticeWorkers(), backoff: c.intake.Backoff(), log: log, panics: c.metrics}
}

// parser reads this queue's messages: from the queue's own account (named in QUEUE_URL) and
// QUEUE_ALLOWED_ACCOUNTS; from any account when QUEUE_URL names none.
func (c *Controller) parser() messages.Parser {
	return messages.Parser{QueueAccount: config.AccountFromQueueURL(c.cfg.QueueURL), AllowedAccounts: c.cfg.QueueAllowedAccounts}
}

// foreignAccount refuses a message from an AWS account the queue does not accept: none of
// its notices is acted on. Like a notice about another cluster's instance it is kept on the
// queue (it may be meant for a consumer that accepts its account) unless
// DELETE_SQS_MSG_IF_NODE_NOT_FOUND deletes it. It is logged at Warn once an hour, its copies
// at Debug.
func (c *Controller) foreignAccount(ctx context.Context, m sqs.Message, err error, log *slog.Logger) (sqs.Outcome, time.Duration) {
	c.metrics.QueueMessage("foreign_account")
	level := c.foreignLevel("account/" + m.ID)
	if level == slog.LevelInfo {
		level = slog.LevelWarn
	}
	kept := !c.cfg.DeleteSQSMsgIfNodeNotFound
	log.Log(ctx, level, "queue message from another AWS account refused; nothing acted on (QUEUE_ALLOWED_ACCOUNTS accepts another account's messages)",
		"err", err, "kept", kept)
	if kept {
		return sqs.Retry, retryLater
	}
	return sqs.Done, 0
}

// noticeFate is what became of one notice of a message.
type noticeFate int

const (
	noticeDone      noticeFate = iota // handled (or nothing to do)
	noticeRetry                       // not handled yet: the message must come back soon
	noticeForeign                     // another cluster's instance: keep the message for it
	noticeCancelled                   // this process is stopping
	noticeLaunching                   // a launch hook waiting for its node to be Ready
	noticeRefused                     // refused by the gate (read from a Node that is not its instance): said, not acted on
)

// messageFate decides what to do with a message from its notices: retry soon while any of
// ours is unfinished (notices already done are recognised as such when it comes back), keep
// it for its own cluster while it names an instance not ours (DELETE_SQS_MSG_IF_NODE_NOT_FOUND
// deletes it instead), and delete it otherwise. It returns the outcome, the delay before the
// message comes back, and the metric's outcome label. receiveCount is the message's
// deliveries so far (1 on the first).
func messageFate(ctx context.Context, fates []noticeFate, receiveCount int) (sqs.Outcome, time.Duration, string) {
	if ctx.Err() != nil || slices.Contains(fates, noticeCancelled) {
		return sqs.Retry, 0, "retry"
	}
	if slices.Contains(fates, noticeRetry) {
		return sqs.Retry, retryDelay(receiveCount), "retry"
	}
	if slices.Contains(fates, noticeLaunching) {
		return sqs.Retry, launchCheck, "launching"
	}
	if slices.Contains(fates, noticeForeign) {
		return sqs.Retry, retryLater, "not_owned"
	}
	return sqs.Done, 0, "done"
}

// retryDelay is how long a message with an unfinished notice stays away after its
// receiveCount-th delivery: retryFirst after the first, doubling up to retrySoon. One failed
// EC2 lookup or node write fails every notice waiting on it (a batched DescribeInstances
// answers a whole burst), and a Spot warning gives two minutes: a transient error must not
// cost each of them ten seconds, while a lasting one is asked about no more than every
// retrySoon.
func retryDelay(receiveCount int) time.Duration {
	d := retryFirst
	for i := 1; i < receiveCount && d < retrySoon; i++ {
		d *= 2
	}
	return min(d, retrySoon)
}

// noticeHandler takes one notice of a message (handleNotice).
type noticeHandler func(ctx context.Context, n notice.Notice, log *slog.Logger) noticeFate

// handleNotice takes one notice of a message: ownership, its deadline, then its record on
// the Node (episode.Handler.Intake). The node's reconciler does the rest.
func (c *Controller) handleNotice(ctx context.Context, resolver *ownership.Resolver, n notice.Notice, log *slog.Logger) noticeFate {
	if n.Kind.Hook() == notice.HookLaunch {
		return c.handleLaunch(ctx, resolver, n, log)
	}
	began := time.Now()
	release, ok := c.startSlot(ctx)
	if !ok {
		return noticeCancelled
	}
	defer release()
	verdict, err := resolver.Resolve(ctx, ownership.Subject{Path: ownership.PathOf(n), InstanceID: n.InstanceID, Node: n.Node})
	if err != nil {
		log.Warn("cannot tell whether the instance is ours yet; retrying", "notice", n.ID, "err", err)
		c.denied(ctx, "DescribeInstances", err, n, resolver.NodesNaming(n.InstanceID), log)
		return noticeRetry
	}
	if !verdict.Owned {
		return c.notActedOn(ctx, n, verdict, log)
	}
	if n.Lifecycle != nil && n.Kind.Hook() == notice.HookTermination {
		n.Deadline = c.hookDeadline(ctx, n, *n.Lifecycle, log)
	}
	if n.Deadline.IsZero() && n.CordonOnly == "" {
		// Rebalance recommendations and state changes: the drain budget from receipt.
		n.Deadline = time.Now().Add(time.Duration(c.cfg.NodeTerminationGracePeriod) * time.Second)
	}
	// The slot bounds what is asked of AWS at once. The node write waits for its turn in the
	// request budget's urgent lane, paced by the API server's answers: held through it, ten
	// slots held an Availability Zone's cordons back (docs/benchmarks.md).
	release()
	err = c.handler.Intake(ctx, n, verdict.Node.Name, verdict.Node)
	if err == nil {
		if r := c.episodes.Load(); r != nil {
			r.Add(verdict.Node.Name) // at once, not on the informer's echo of the write
		}
		return noticeDone
	}
	// The shared intake policy decides; the message's fate carries it out. This delivery's
	// start stands for the first try: a notice without a deadline is never late here.
	switch v := c.intake.Judge(ctx, err, n.Deadline, began, time.Now()); v {
	case driver.Stopping:
		return noticeCancelled
	case driver.NotOurs:
		return c.notOurs(ctx, n, err.Error(), log)
	case driver.TooLate:
		log.Error("giving up on notice", "notice", n.ID, "reason", v.String(), "deadline", n.Deadline, "err", err)
		return noticeDone
	}
	log.Warn("notice not recorded yet; the message will come back", "notice", n.ID, "err", err)
	return noticeRetry
}

// notActedOn is the fate of a notice whose verdict is not "this cluster's, act on it".
func (c *Controller) notActedOn(ctx context.Context, n notice.Notice, verdict ownership.Verdict, log *slog.Logger) noticeFate {
	switch {
	case verdict.ClaimRefused:
		// The Node the notice was read from is not the instance: the claim was reported (an
		// Event on the claimant, the metric); nothing is done on any node for this notice.
		log.Warn("notice refused: the node it was read from is not its instance as EC2 describes it", "notice", n.ID,
			"node", n.Node, "instance", n.InstanceID, "reason", verdict.Reason)
		return noticeRefused
	case verdict.Untagged:
		return c.untagged(ctx, n, verdict, log)
	}
	// Never touch a node or complete a lifecycle action for an instance not ours.
	return c.notOurs(ctx, n, verdict.Reason, log)
}

// notOurs is the fate of a notice about an instance that is not this cluster's: its message
// is kept for its own cluster, unless DELETE_SQS_MSG_IF_NODE_NOT_FOUND deletes it.
func (c *Controller) notOurs(ctx context.Context, n notice.Notice, reason string, log *slog.Logger) noticeFate {
	log.Log(ctx, c.foreignLevel(n.ID), "notice is not for this cluster", "notice", n.ID, "instance", n.InstanceID, "reason", reason)
	if c.cfg.DeleteSQSMsgIfNodeNotFound {
		return noticeDone
	}
	return noticeForeign
}

// foreignLevel is the level to log another cluster's notice at: Info the first time in an
// hour, Debug for its copies (a kept message comes back every few minutes).
func (c *Controller) foreignLevel(id string) slog.Level {
	if c.firstInHour(id) {
		return slog.LevelInfo
	}
	return slog.LevelDebug
}

// firstInHour reports whether key is seen for the first time in an hour: what a message's
// copies repeat is said once.
func (c *Controller) firstInHour(key string) bool {
	// One check-and-add: copies of a message received together reach here at once.
	c.foreignMu.Lock()
	defer c.foreignMu.Unlock()
	if _, seen := c.foreignLogged.Get(key); seen {
		return false
	}
	c.foreignLogged.Add(key, struct{}{}, time.Hour)
	return true
}

// handleLaunch completes a launch hook once the instance's Node has joined this cluster and is
// Ready. Until then the message goes back to the queue for a few seconds (holding nothing
// here), for at most ASG_LAUNCH_READY_TIMEOUT from the hook's time; then the hook is left to
// its own timeout. An instance that turns out to be another cluster's is never completed.
func (c *Controller) handleLaunch(ctx context.Context, resolver *ownership.Resolver, n notice.Notice, log *slog.Logger) noticeFate {
	lc := n.Lifecycle
	if lc == nil {
		return noticeDone
	}
	verdict, err := resolver.Resolve(ctx, ownership.Subject{Path: ownership.PathQueue, InstanceID: n.InstanceID})
	switch {
	case err != nil:
		log.Warn("cannot tell whether the launching instance is ours yet", "notice", n.ID, "err", err)
		c.denied(ctx, "DescribeInstances", err, n, resolver.NodesNaming(n.InstanceID), log)
	case verdict.Untagged:
		// This cluster's node, whose instance lacks the tag: said, and its hook left to time out.
		return c.untagged(ctx, n, verdict, log)
	case verdict.Node != nil && !verdict.Owned:
		log.Log(ctx, c.foreignLevel(n.ID), "launch notice is not for this cluster", "notice", n.ID, "reason", verdict.Reason)
		if c.cfg.DeleteSQSMsgIfNodeNotFound {
			return noticeDone
		}
		return noticeForeign
	case verdict.Owned && nodeReady(verdict.Node) && c.cfg.DryRun:
		log.Info("dry run: would complete the launch lifecycle action: the node is Ready", "notice", n.ID, "node", verdict.Node.Name)
		return noticeDone
	case verdict.Owned && nodeReady(verdict.Node):
		err := c.gate.Check(ctx, instancegate.Request{Call: instancegate.CallCompleteLifecycleAction, Node: verdict.Node.Name, InstanceID: n.InstanceID, Group: lc.Group})
		if r, refused := instancegate.IsRefusal(err); refused {
			log.Error("launch lifecycle action not completed: the instance is not the node's, or not in the hook's group; it will time out", "notice", n.ID, "node", verdict.Node.Name, "err", r)
			c.events.InstanceCallRefused(events.NodeOf(verdict.Node), r.Error())
			return noticeDone
		}
		if err == nil {
			err = c.asg.CompleteLifecycleAction(ctx, cloud.LifecycleAction{Group: lc.Group, Hook: lc.Hook, InstanceID: n.InstanceID})
		}
		switch {
		case err == nil, errors.Is(err, cloud.ErrNoActiveAction):
			c.metrics.AWSCall("CompleteLifecycleAction", err, cloud.ErrNoActiveAction)
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
	if time.Since(began) > c.cfg.ASGLaunchReadyTimeout {
		log.Warn("the launching instance's node did not join and become Ready in time; leaving the hook to its own timeout",
			"notice", n.ID, "waited", c.cfg.ASGLaunchReadyTimeout)
		return noticeDone
	}
	if ctx.Err() != nil {
		return noticeCancelled
	}
	return noticeLaunching
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
