// SPDX-License-Identifier: Apache-2.0

// Package agent runs Lifeboat's agent mode: a DaemonSet pod that watches its own instance's
// metadata and cordons and drains its own node (NODE_NAME). Intake records each notice on the
// Node; the reconcile driver both modes share (episode/driver), with one worker for the one
// node, drives the node's episode from that record.
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
	"lifeboat.dev/lifeboat/internal/episode"
	"lifeboat.dev/lifeboat/internal/episode/driver"
	"lifeboat.dev/lifeboat/internal/lifecycle"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/ownership"
	"lifeboat.dev/lifeboat/internal/panics"
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
	Handler episode.Options
}

// Agent protects one node.
type Agent struct {
	failingAfter time.Duration
	metrics      *metrics.Metrics

	cfg     *config.Config
	client  kubernetes.Interface
	imds    imds.Getter
	log     *slog.Logger
	handler *episode.Handler

	mu     sync.Mutex
	poller *imds.Poller

	// With ASG_LIFECYCLE_HOOK_NAME: the instance's group and its hook's timeouts, and the
	// hook's completion, all set up by Run once the instance is known.
	group *lifecycle.InstanceGroup
	hooks *cloud.HookTimeoutCache
	hook  lifecycle.OwnHook
}

// New builds an agent.
func New(o Options) *Agent {
	a := &Agent{cfg: o.Config, client: o.Client, imds: o.IMDS, log: o.Logger, metrics: o.Metrics, failingAfter: o.FailingAfter}
	a.metrics.ClaimPaths(metrics.ClaimCheckInstanceMetadata, []string{string(ownership.PathInstanceMetadata)})
	h := o.Handler
	h.Origin, h.Completer, h.Metrics = string(notice.SourceIMDS), &a.hook, o.Metrics
	a.handler = episode.NewHandler(o.Config, o.Client, o.Logger, h)
	return a
}

// ErrWrongNode means NODE_NAME names a node of another instance: acting would drain the
// wrong node, so the agent refuses to start.
var ErrWrongNode = errors.New("NODE_NAME is another instance's node")

// Run polls until ctx ends. In-flight work is left resumable: its progress is on the node.
func (a *Agent) Run(ctx context.Context) error {
	instanceID, node, err := a.start(ctx)
	if err != nil {
		return err
	}
	episodes, err := driver.New(driver.Options{Reconciler: a.handler, Nodes: driver.NewOwnNode(a.client, node),
		MaxRetry: 30 * time.Second, Name: "lifeboat-agent-episode", Panics: a.metrics, Logger: a.log})
	if err != nil {
		return err
	}
	poller := a.newPoller(instanceID)
	go a.metrics.ReportSourceHealth(ctx, "imds", poller.Healthy)
	a.log.Info("agent watching instance metadata", "node", a.cfg.NodeName, "instance", instanceID, "interval", a.cfg.IMDSPollInterval)

	notices := make(chan notice.Notice)
	var wg sync.WaitGroup
	wg.Go(func() { poller.Run(ctx, notices) })
	// The first pass works on the node read at start: work a previous agent left goes on,
	// and with none there is no request.
	episodes.Add(a.cfg.NodeName)
	wg.Go(func() { episodes.Run(ctx) })
	defer wg.Wait()
	sem := make(chan struct{}, a.cfg.Workers)
	for {
		var n notice.Notice
		select {
		case <-ctx.Done():
			return nil
		case n = <-notices:
		}
		a.log.Info("notice received", "notice", n.ID, "kind", n.Kind, "deadline", n.Deadline, "description", n.Description)
		a.metrics.Notice(string(n.Kind), string(n.Source))
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		wg.Go(func() {
			defer func() { <-sem }()
			// The notice's own goroutine: a panic outside its tries ends this notice only.
			defer panics.Recover(panics.Notice, a.log, a.metrics, nil, "notice", n.ID)
			if a.intake(ctx, n) {
				episodes.Add(a.cfg.NodeName)
			}
		})
	}
}

// start reads the instance id and the agent's node, refuses a NODE_NAME of another
// instance, and settles what the node's last boot left: a reboot's cordon, an episode of the
// instance's previous life. With a termination hook to complete it learns how.
func (a *Agent) start(ctx context.Context) (instanceID string, node *corev1.Node, err error) {
	instanceID, err = a.instanceID(ctx)
	if err != nil {
		return "", nil, err
	}
	node, err = a.client.CoreV1().Nodes().Get(ctx, a.cfg.NodeName, metav1.GetOptions{})
	if err != nil {
		return "", nil, fmt.Errorf("read node NODE_NAME=%q: %w", a.cfg.NodeName, err)
	}
	if id := episode.InstanceIDOf(node); id != "" && id != instanceID {
		a.handler.ReportRefusedClaim(node, instanceID, notice.SourceIMDS, "the agent stops: check that NODE_NAME comes from spec.nodeName")
		return "", nil, fmt.Errorf("%w: node %s has providerID %q but instance metadata says %s; check that NODE_NAME comes from spec.nodeName",
			ErrWrongNode, a.cfg.NodeName, node.Spec.ProviderID, instanceID)
	}
	a.releaseAfterReboot(ctx, node)
	if _, err := a.handler.EndBootedEpisode(ctx, node); err != nil {
		a.log.Error("ending the interruption episode of a node that booted again failed", "err", err)
	}
	if a.cfg.ASGLifecycleHookName != "" && a.cfg.EnableASGLifecycleDraining {
		if err := a.useLifecycleHook(ctx, instanceID); err != nil {
			return "", nil, fmt.Errorf("ASG_LIFECYCLE_HOOK_NAME=%q: %w", a.cfg.ASGLifecycleHookName, err)
		}
	}
	return instanceID, node, nil
}

// newPoller builds the instance-metadata poller from the configuration; Healthy reports its
// health from then on.
func (a *Agent) newPoller(instanceID string) *imds.Poller {
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
		opts.Panics = a.metrics
	}
	poller := imds.NewPoller(a.imds, instanceID, opts)
	a.mu.Lock()
	a.poller = poller
	a.mu.Unlock()
	return poller
}

// intake records the notice on the node (episode.Handler.Intake), retried by the
// shared intake policy, and reports whether it was recorded.
func (a *Agent) intake(ctx context.Context, n notice.Notice) bool {
	if n.Kind.Hook() == notice.HookTermination && !n.Released {
		n.Deadline = a.hookDeadlineOrAssumed(ctx, n)
	}
	policy := driver.IntakePolicy{NotOurs: episode.ErrNotOurs, MaxPause: 30 * time.Second,
		Budget: time.Duration(a.cfg.NodeTerminationGracePeriod) * time.Second}
	log := a.log.With("notice", n.ID)
	return policy.Record(ctx, n.Deadline, func(ctx context.Context) (err error) {
		// A panic is this try's failure, retried as an error is.
		defer panics.Recover(panics.Notice, log, a.metrics, &err)
		return a.handler.Intake(ctx, n, a.cfg.NodeName, nil)
	}, log)
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
	backoff := wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.2, Steps: math.MaxInt32, Cap: 10 * time.Second}
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
