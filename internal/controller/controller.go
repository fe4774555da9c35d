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
	// eks asks EKS which managed node groups repair their own nodes (NODE_REPAIR_EKS_LOOKUP).
	eks cloud.EKS
	// instances is EC2's description of instances, batched and cached, shared by the
	// ownership checks and the gate.
	instances *ownership.Instances
	asg       cloud.AutoScaling
	// gate checks every call that acts on an instance against the Node itself: the record
	// that asks for it is input any node credential can write.
	gate *instancegate.Gate
	// completer completes termination hooks once their node is drained.
	completer lifecycle.Completer
	log       *slog.Logger
	metrics   *metrics.Metrics
	handler   *episode.Handler
	takeover  *episode.Takeover // the nodes listed at the start of a term (work)
	events    *events.Recorder

	// heartbeats keep the termination hooks of running drains alive (HEARTBEAT_INTERVAL).
	heartbeats *lifecycle.Heartbeats
	// retainedSweepEvery is the pause between passes of the retained-instance sweep.
	retainedSweepEvery time.Duration
	setup              *setupChecks // nil: the set-up is not checked

	// notices takes each notice, whichever path it came by; messages takes the queue's.
	notices  *noticeIntake
	messages *messageIntake
	// episodes is the per-node reconciler while Run runs.
	episodes atomic.Pointer[driver.Driver]

	leading    atomic.Bool
	working    atomic.Bool                  // the work loop runs: the reconciler takes nodes
	warmed     atomic.Pointer[warm]         // what warmUp keeps ready, while it runs
	podsSynced atomic.Bool                  // the drains' shared pod informer has listed the cluster's pods
	consumer   atomic.Pointer[sqs.Consumer] // while Run consumes the queue
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
	// EKS, when set, is asked which managed node groups repair their own nodes
	// (NODE_REPAIR_EKS_LOOKUP); without it, that lookup answers with an error.
	EKS     cloud.EKS
	Logger  *slog.Logger
	Metrics *metrics.Metrics
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
	c := &Controller{cfg: cfg, client: o.Client, leaseClient: o.LeaseClient, queue: o.Queue, ec2: o.EC2, eks: o.EKS, asg: o.AutoScaling,
		log: o.Logger, metrics: m, events: o.Handler.Events}
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
	hooks := cloud.NewHookTimeoutCache(o.AutoScaling)
	hooks.Calls = m
	c.heartbeats = &lifecycle.Heartbeats{AutoScaling: o.AutoScaling, Hooks: hooks, Gate: c.gate, Nodes: nodes.NewWriter(o.Client),
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
	c.takeover = episode.NewTakeover(o.Client)
	h.Takeover = c.takeover
	c.handler = episode.NewHandler(cfg, o.Client, o.Logger, h)
	c.notices = newNoticeIntake(c, hooks)
	c.messages = &messageIntake{cfg: cfg, log: o.Logger, metrics: m, events: c.events, ownPod: c.ownPod(), ec2: o.EC2, instances: c.instances,
		notices: c.notices}
	return c
}

// newNoticeIntake is the controller's intake of notices, on the parts New built.
func newNoticeIntake(c *Controller, hooks *cloud.HookTimeoutCache) *noticeIntake {
	return &noticeIntake{cfg: c.cfg, client: c.client, metrics: c.metrics, events: c.events, ownPod: c.ownPod(), gate: c.gate,
		asg: c.asg, hooks: hooks, heartbeats: c.heartbeats, handler: c.handler, episodes: &c.episodes,
		intake: driver.IntakePolicy{NotOurs: episode.ErrNotOurs, MaxPause: retrySoon,
			Budget: time.Duration(c.cfg.NodeTerminationGracePeriod) * time.Second},
		starting: make(chan struct{}, max(c.cfg.Workers, 1)), foreignLogged: cache.NewLRUExpireCache(10000)}
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
	// One list for the first reconciles of the nodes this term takes over, rather than a read
	// each (episode.Takeover); without it, each reads its own.
	start := time.Now()
	if n, err := c.takeover.Read(ctx); err != nil {
		c.log.Warn("cannot list the nodes at the start of the term: each reconcile reads its node", "err", err)
	} else {
		c.log.Info("listed the nodes at the start of the term", "nodes", n, "took", time.Since(start).Round(time.Millisecond).String())
	}
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
		return c.notices.handleNotice(ctx, resolver, n, log)
	}
	return consumer.Run(ctx, func(ctx context.Context, m sqs.Message) (sqs.Outcome, time.Duration) {
		if m.ReceiveCount <= 1 && !m.SentAt.IsZero() {
			c.metrics.QueueLag(time.Since(m.SentAt))
		}
		outcome, delay := c.messages.handleMessage(ctx, resolver, m, handle)
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

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
