// Package agent runs Lifeboat's agent mode: a DaemonSet pod that watches its own instance's
// metadata and cordons and drains its own node (NODE_NAME). Intake records each notice on the
// Node; one loop drives the node's episode from that record (interruption.Handler.Reconcile),
// the same code as the controller's reconciler.
//
// While no notice is active the agent makes no Kubernetes request at all: one node read at
// start to check NODE_NAME (which also resumes work a previous agent left on the node), then
// instance-metadata polling only.
package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/interruption"
	"lifeboat.dev/lifeboat/internal/lifecycle"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/source/imds"
)

// Options are what an Agent works with. Config, Client and IMDS are required.
type Options struct {
	Config *config.Config
	Client kubernetes.Interface
	// IMDS reads instance metadata (imds.NewClient outside tests).
	IMDS   imds.Getter
	Logger *slog.Logger
	// Metrics counts polls and notices.
	Metrics *metrics.Metrics
	// FailingAfter is how long instance metadata must fail before Healthy reports it
	// (default 30 s).
	FailingAfter time.Duration
	// Handler holds the process's parts of the interruption handler (Events, webhook,
	// hand-back waits, cordon client); the agent adds its own: instance metadata as origin,
	// and the completion of its instance's termination hook.
	Handler interruption.Options
}

// Agent protects one node.
type Agent struct {
	failingAfter time.Duration
	metrics      *metrics.Metrics

	cfg     *config.Config
	client  kubernetes.Interface
	imds    imds.Getter
	log     *slog.Logger
	handler *interruption.Handler

	mu     sync.Mutex
	poller *imds.Poller

	// reconcile is handler.Reconcile; tests put a panicking one in its place.
	reconcile func(ctx context.Context, node *corev1.Node) (time.Duration, error)
	// firstRetry is the first pause after a failed reconcile (doubling from there).
	firstRetry time.Duration

	// With ASG_LIFECYCLE_HOOK_NAME: the instance's group and its hook's timeouts, and the
	// hook's completion, all set up by Run once the instance is known.
	group *lifecycle.InstanceGroup
	hooks *cloud.HookTimeoutCache
	hook  lifecycle.OwnHook
}

// New builds an agent.
func New(o Options) *Agent {
	a := &Agent{cfg: o.Config, client: o.Client, imds: o.IMDS, log: o.Logger, metrics: o.Metrics, failingAfter: o.FailingAfter, firstRetry: time.Second}
	h := o.Handler
	h.Origin, h.Completer, h.Metrics = string(notice.SourceIMDS), &a.hook, o.Metrics
	a.handler = interruption.NewHandler(o.Config, o.Client, o.Logger, h)
	a.reconcile = a.handler.Reconcile
	return a
}

// ErrWrongNode means NODE_NAME names a node of another instance: acting would drain the
// wrong node, so the agent refuses to start.
var ErrWrongNode = errors.New("NODE_NAME is another instance's node")

// Run polls until ctx ends. In-flight work is left resumable: its progress is on the node.
func (a *Agent) Run(ctx context.Context) error {
	instanceID, err := a.instanceID(ctx)
	if err != nil {
		return err
	}
	node, err := a.client.CoreV1().Nodes().Get(ctx, a.cfg.NodeName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("read node NODE_NAME=%q: %w", a.cfg.NodeName, err)
	}
	if id := interruption.InstanceIDOf(node); id != "" && id != instanceID {
		return fmt.Errorf("%w: node %s has providerID %q but instance metadata says %s; check that NODE_NAME comes from spec.nodeName",
			ErrWrongNode, a.cfg.NodeName, node.Spec.ProviderID, instanceID)
	}
	a.releaseAfterReboot(ctx, node)
	if _, err := a.handler.EndBootedEpisode(ctx, node); err != nil {
		a.log.Error("ending the interruption episode of a node that booted again failed", "err", err)
	}
	if a.cfg.ASGLifecycleHookName != "" && a.cfg.EnableASGLifecycleDraining {
		if err := a.useLifecycleHook(ctx, instanceID); err != nil {
			return fmt.Errorf("ASG_LIFECYCLE_HOOK_NAME=%q: %w", a.cfg.ASGLifecycleHookName, err)
		}
	}
	opts := imds.Options{
		Spot:         a.cfg.EnableSpotInterruptionDraining,
		Scheduled:    a.cfg.EnableScheduledEventDraining,
		Rebalance:    a.cfg.EnableRebalanceMonitoring || a.cfg.EnableRebalanceDraining,
		Lifecycle:    a.cfg.EnableASGLifecycleDraining,
		Interval:     a.cfg.IMDSPollInterval,
		DrainBudget:  time.Duration(a.cfg.NodeTerminationGracePeriod) * time.Second,
		FailingAfter: a.failingAfter,
		Logger:       a.log,
	}
	if a.metrics != nil {
		opts.Observe = a.metrics.ObserveIMDS
		opts.Warn = a.metrics.NoticeWarning
	}
	poller := imds.NewPoller(a.imds, instanceID, opts)
	a.mu.Lock()
	a.poller = poller
	a.mu.Unlock()
	go a.metrics.ReportSourceHealth(ctx, "imds", poller.Healthy)
	a.log.Info("agent watching instance metadata", "node", a.cfg.NodeName, "instance", instanceID, "interval", a.cfg.IMDSPollInterval)

	notices := make(chan notice.Notice)
	wake := make(chan struct{}, 1)
	var wg sync.WaitGroup
	wg.Go(func() { poller.Run(ctx, notices) })
	wg.Go(func() { a.episodes(ctx, node, wake) })
	sem := make(chan struct{}, a.cfg.Workers)
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			return nil
		case n := <-notices:
			a.log.Info("notice received", "notice", n.ID, "kind", n.Kind, "deadline", n.Deadline, "description", n.Description)
			a.metrics.Notice(string(n.Kind), string(n.Source))
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				wg.Wait()
				return nil
			}
			wg.Go(func() {
				defer func() { <-sem }()
				if n.Kind == notice.ASGTermination && !n.Released {
					n.Deadline = a.hookDeadline(ctx, n)
				}
				if a.intake(ctx, n) {
					select {
					case wake <- struct{}{}:
					default: // a wake is already due
					}
				}
			})
		}
	}
}

// intake records the notice on the node (interruption.Handler.Intake), retrying until it is
// recorded, its deadline passes, or ctx ends: a brief API server outage must not lose it. It
// reports whether the notice was recorded.
func (a *Agent) intake(ctx context.Context, n notice.Notice) bool {
	backoff, started := retryBackoff(30*time.Second), time.Now()
	for {
		err := a.handler.Intake(ctx, n, a.cfg.NodeName, nil)
		if err == nil {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		giveUp := n.Deadline
		if giveUp.IsZero() { // a cordon-only notice: no deadline, a budget of its own
			giveUp = started.Add(time.Duration(a.cfg.NodeTerminationGracePeriod) * time.Second)
		}
		if errors.Is(err, interruption.ErrNotOurs) || time.Now().After(giveUp.Add(time.Minute)) {
			a.log.Error("giving up on notice", "notice", n.ID, "err", err)
			return false
		}
		pause := backoff.Step()
		a.log.Warn("notice not recorded yet; retrying", "notice", n.ID, "retryIn", pause, "err", err)
		select {
		case <-ctx.Done():
			return false
		case <-time.After(pause):
		}
	}
}

// retryBackoff is how the agent's loops wait between failed attempts: from one second,
// doubling up to limit, each wait up to a fifth longer at random so that the agents of many
// nodes do not retry in step after an API server outage.
func retryBackoff(limit time.Duration) wait.Backoff {
	return wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.2, Steps: math.MaxInt32, Cap: limit}
}

// episodes drives the node's episode from its record (interruption.Handler.Reconcile): first
// on the node read at start (work a previous agent left goes on; with none, no request), then
// each time intake recorded a notice (wake), when a scheduled start comes, and after a failure
// (a panic included) with backoff. It returns when ctx ends.
func (a *Agent) episodes(ctx context.Context, node *corev1.Node, wake <-chan struct{}) {
	newBackoff := func() wait.Backoff {
		b := retryBackoff(30 * time.Second)
		b.Duration = a.firstRetry
		return b
	}
	backoff := newBackoff()
	for {
		var (
			after time.Duration // until the next look, when positive
			err   error
		)
		if node == nil {
			node, err = a.client.CoreV1().Nodes().Get(ctx, a.cfg.NodeName, metav1.GetOptions{})
		}
		if err == nil {
			after, err = a.reconcileSafely(ctx, node)
		}
		node = nil // read again next time
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			after = backoff.Step()
			a.log.Warn("the node's interruption work is not done yet; retrying", "retryIn", after, "err", err)
		} else {
			backoff = newBackoff()
		}
		var due <-chan time.Time
		timer := time.NewTimer(after)
		if after > 0 {
			due = timer.C
		}
		select {
		case <-ctx.Done():
		case <-wake:
		case <-due:
		}
		timer.Stop()
		if ctx.Err() != nil {
			return
		}
	}
}

// reconcileSafely reconciles the node, turning a panic into an error that is retried with
// backoff like any failure, so that a bug met on one record does not end the agent (and with
// it the IMDS polling that catches the next notice). The panic is counted and logged with the
// stack. (A panic in a goroutine the reconcile started cannot be caught here.)
func (a *Agent) reconcileSafely(ctx context.Context, node *corev1.Node) (after time.Duration, err error) {
	defer func() {
		if p := recover(); p != nil {
			a.metrics.ReconcilePanic()
			a.log.Error("reconciling the node panicked; retrying it with backoff", "node", node.Name,
				"panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			after, err = 0, fmt.Errorf("panic: %v", p)
		}
	}()
	return a.reconcile(ctx, node)
}

// releaseAfterReboot uncordons the node if it has been through a scheduled reboot since
// Lifeboat cordoned it, judged from the uptime file (UPTIME_FROM_FILE, else /proc/uptime).
func (a *Agent) releaseAfterReboot(ctx context.Context, node *corev1.Node) {
	path := a.cfg.UptimeFromFile
	if path == "" {
		path = "/proc/uptime"
	}
	uptime, err := readUptime(path)
	if err != nil {
		a.log.Warn("cannot tell whether the node rebooted; a node cordoned for a scheduled reboot stays cordoned", "file", path, "err", err)
		return
	}
	if _, err := a.handler.ReleaseAfterReboot(ctx, node, time.Now().Add(-uptime)); err != nil {
		a.log.Error("uncordon after reboot failed", "err", err)
	}
}

// readUptime reads the first field of a /proc/uptime-style file: seconds since boot.
func readUptime(path string) (time.Duration, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	fields := strings.Fields(string(b))
	if len(fields) == 0 {
		return 0, fmt.Errorf("%s: empty", path)
	}
	secs, err := strconv.ParseFloat(fields[0], 64)
	if err != nil || secs < 0 {
		return 0, fmt.Errorf("%s: %q is not a number of seconds", path, fields[0])
	}
	return time.Duration(secs * float64(time.Second)), nil
}

// instanceID reads the instance id, retrying while the metadata service is unavailable.
func (a *Agent) instanceID(ctx context.Context) (string, error) {
	backoff := retryBackoff(10 * time.Second)
	backoff.Duration = 200 * time.Millisecond
	for {
		id, err := imds.InstanceID(ctx, a.imds)
		if err == nil {
			return id, nil
		}
		a.log.Warn("cannot read the instance id from instance metadata; retrying", "url", a.cfg.MetadataURL, "err", err)
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("instance id: %w", err)
		case <-time.After(backoff.Step()):
		}
	}
}

// Healthy is nil while instance metadata answers; before the agent has started polling it
// reports that.
func (a *Agent) Healthy() error {
	a.mu.Lock()
	p := a.poller
	a.mu.Unlock()
	if p == nil {
		return errors.New("not polling instance metadata yet")
	}
	return p.Healthy()
}
