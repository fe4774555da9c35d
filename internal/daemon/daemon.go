// SPDX-License-Identifier: Apache-2.0

// Package daemon is Lifeboat's composition root. From the configuration it builds every part of
// a running agent or controller: the metrics and probe servers, the Kubernetes clients and their
// shared request budget, Kubernetes Events, the webhook, the hand-back waits, and then the
// mode's driver (Agent here; the controller's, with its AWS clients, in package
// controllerdaemon, which the agent's binary does not link); it checks the Kubernetes
// permissions the mode needs before anything acts. Each part is given what it works with when
// it is built, and nothing is set on it later.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"

	"lifeboat.dev/lifeboat/internal/agent"
	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/episode"
	"lifeboat.dev/lifeboat/internal/events"
	"lifeboat.dev/lifeboat/internal/health"
	"lifeboat.dev/lifeboat/internal/kube"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/permissions"
	"lifeboat.dev/lifeboat/internal/source/imds"
	"lifeboat.dev/lifeboat/internal/webhook"
	"lifeboat.dev/lifeboat/internal/wiring"
)

// ConfigError is a start refused because of the configuration (a port taken, an invalid
// Events or webhook setting, no Kubernetes API configured): nothing was started, and changing
// a setting fixes it. Other errors from New are runtime failures.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// Daemon is one Lifeboat process in agent or controller mode, built and ready to run.
type Daemon struct {
	mode    config.Mode
	cfg     *config.Config
	log     *slog.Logger
	metrics *metrics.Metrics
	// metricsServer and probesServer are open before anything else, so that a port clash ends
	// the start with the setting to change; nil when turned off.
	metricsServer, probesServer net.Listener
	// run is the mode's driver; ready its readiness check.
	run   func(context.Context) error
	ready health.Checker
	// closers release what New opened, last first.
	closers []func()
}

// Parts are what New has built for the mode's driver.
type Parts struct {
	Config  *config.Config
	Clients *Clients
	// Handler is the episode handler's parts: Events, the webhook, the drainer, the waits.
	Handler episode.Options
	Logger  *slog.Logger
	Metrics *metrics.Metrics
}

// Driver is a mode's work: Run until ctx ends or the mode stops by itself, Ready for the
// readiness probe.
type Driver struct {
	Run   func(context.Context) error
	Ready health.Checker
}

// Build makes the mode's driver from the parts: Agent, or controllerdaemon.Build.
type Build func(ctx context.Context, p Parts) (Driver, error)

// New builds the process of the mode from the configuration, with build for the mode's
// driver, and checks that Lifeboat holds every Kubernetes permission the mode needs (each
// missing one is logged). On error nothing is left open.
func New(ctx context.Context, cfg *config.Config, mode config.Mode, logger *slog.Logger, build Build) (_ *Daemon, err error) {
	if build == nil {
		return nil, errors.New("no driver for the mode: daemon.New needs a Build")
	}
	d := &Daemon{mode: mode, cfg: cfg, log: logger, metrics: metrics.New()}
	defer func() {
		if err != nil {
			d.Close()
		}
	}()
	if err := d.listen(); err != nil {
		return nil, err
	}
	clients, err := d.connect()
	if err != nil {
		return nil, err
	}
	if err := permitted(ctx, clients.Main, mode, cfg, logger, d.metrics); err != nil {
		return nil, err
	}
	handler, err := d.handlerOptions(ctx, clients)
	if err != nil {
		return nil, err
	}
	driver, err := build(ctx, Parts{Config: cfg, Clients: clients, Handler: handler, Logger: logger, Metrics: d.metrics})
	if err != nil {
		return nil, err
	}
	d.run, d.ready = driver.Run, driver.Ready
	return d, nil
}

// connect builds the Kubernetes clients and checks that the API server answers. One request
// budget, sized by the API server's answers, serves every client but the Lease's.
func (d *Daemon) connect() (*Clients, error) {
	base, err := kube.RESTConfig(wiring.Kube(d.cfg))
	if err != nil {
		return nil, &ConfigError{fmt.Errorf("cannot reach Kubernetes: %w", err)}
	}
	clients, err := KubeClients(base, d.cfg, d.metrics)
	if err != nil {
		return nil, fmt.Errorf("cannot build Kubernetes client: %w", err)
	}
	sv, err := clients.Main.Discovery().ServerVersion()
	if err != nil {
		return nil, fmt.Errorf("cannot reach the Kubernetes API server %s: %w", base.Host, err)
	}
	d.log.Info("connected to Kubernetes", "host", base.Host, "serverVersion", sv.GitVersion)
	return clients, nil
}

// Agent builds the agent, the driver of agent mode.
func Agent(_ context.Context, p Parts) (Driver, error) {
	cfg, logger := p.Config, p.Logger
	a := agent.New(agent.Options{Config: cfg, Client: p.Clients.Main, Logger: logger, Metrics: p.Metrics, Handler: p.Handler,
		IMDS: imds.NewClient(cfg.MetadataURL, cfg.MetadataTries, cfg.AllowIMDSv1)})
	return Driver{Ready: a.Healthy, Run: func(ctx context.Context) error {
		if err := a.Run(ctx); err != nil {
			return fmt.Errorf("agent stopped: %w", err)
		}
		logger.Info("agent stopped; unfinished work resumes from the node's record")
		return nil
	}}, nil
}

// handlerOptions are the process's parts of the episode's handler: Events, the webhook, the
// drainer, the detach waits, and the cordon and status clients. Cordons go through the budget's urgent lane: in a
// burst they never queue behind the evictions of nodes cordoned earlier; the node's condition goes through the
// background lane, with the Events, behind every ordinary request.
func (d *Daemon) handlerOptions(ctx context.Context, clients *Clients) (episode.Options, error) {
	recorder, stopEvents, err := events.New(clients.Events, wiring.Events(d.cfg, d.log, d.metrics))
	if err != nil {
		return episode.Options{}, &ConfigError{fmt.Errorf("invalid Kubernetes Events settings: %w", err)}
	}
	d.closers = append(d.closers, stopEvents)
	hooks, err := webhook.New(wiring.Webhook(d.cfg), webhook.Options{Logger: d.log, Panics: d.metrics}) // the handler counts results
	if err != nil {
		return episode.Options{}, &ConfigError{fmt.Errorf("invalid webhook settings: %w", err)}
	}
	return episode.Options{Metrics: d.metrics, Events: recorder, Webhook: hooks, CordonClient: clients.Cordon, StatusClient: clients.Events,
		Drainer:     episode.NewDrainer(d.cfg, clients.Main, d.metrics, recorder, d.log),
		DetachWaits: DetachWaits(ctx, d.cfg, d.mode, clients.Main, d.metrics, d.log)}, nil
}

// Run serves metrics and probes and runs the mode until ctx ends or the mode stops by itself;
// then it closes what New opened.
func (d *Daemon) Run(ctx context.Context) error {
	defer d.Close()
	ctx, stopServers := context.WithCancel(ctx)
	defer stopServers()
	if d.metricsServer != nil {
		d.serve(ctx, d.metricsServer, metrics.ServerMetrics, d.metrics.Handler())
	}
	if d.probesServer != nil {
		d.serve(ctx, d.probesServer, metrics.ServerProbes, health.Handler(d.cfg.ProbesServerEndpoint, d.ready))
	}
	return d.run(ctx)
}

// Close releases what New opened; Run calls it when it returns.
func (d *Daemon) Close() {
	for i := len(d.closers) - 1; i >= 0; i-- {
		d.closers[i]()
	}
	d.closers = nil
}

// listen takes both ports before anything else, so a clash ends the start here with the setting
// to change; a server that failed later would leave probes that never answer.
func (d *Daemon) listen() error {
	c := d.cfg
	var err error
	if c.EnablePrometheusServer {
		if d.metricsServer, err = listen("metrics", "PROMETHEUS_SERVER_PORT", "ENABLE_PROMETHEUS_SERVER", c.PrometheusServerBindAddress, c.PrometheusServerPort); err != nil {
			return &ConfigError{err}
		}
		d.closers = append(d.closers, func() { d.metricsServer.Close() })
	}
	if c.EnableProbesServer {
		if d.probesServer, err = listen("probes", "PROBES_SERVER_PORT", "ENABLE_PROBES_SERVER", c.ProbesServerBindAddress, c.ProbesServerPort); err != nil {
			return &ConfigError{err}
		}
		d.closers = append(d.closers, func() { d.probesServer.Close() })
	}
	return nil
}

// serve runs one of the servers, with the limits of a server on the host network, until ctx
// ends.
func (d *Daemon) serve(ctx context.Context, ln net.Listener, server string, h http.Handler) {
	go func() {
		if err := health.Serve(ctx, ln, h, health.WithLogger(d.log.With("server", server)), health.WithRefused(d.metrics.ConnectionRefused(server))); err != nil {
			d.log.Error(server+" server stopped", "addr", ln.Addr().String(), "err", err)
		}
	}()
}

// listen opens the port of one of Lifeboat's servers, or says which setting to change.
func listen(server, portSetting, enableSetting, bindAddress string, port int) (net.Listener, error) {
	addr := net.JoinHostPort(bindAddress, strconv.Itoa(port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("cannot serve %s on %s (%v): set %s to a free port, or %s=false", server, addr, err, portSetting, enableSetting)
	}
	return ln, nil
}

// permissionsTimeout bounds the start's access reviews, as preflight bounds its checks.
const permissionsTimeout = 15 * time.Second

// ErrPermissions means Lifeboat lacks Kubernetes permissions the mode needs; New has logged
// each of them.
var ErrPermissions = errors.New("missing Kubernetes permissions")

// permitted checks, with one SelfSubjectAccessReview per permission, that Lifeboat holds every
// Kubernetes permission the mode needs, and logs each one it lacks: failing at start names
// the problem, failing mid-drain would leave a node half done. A permission missing for an
// extra left on by default (the node condition, Events) does not stop the protection: the
// extra is turned off, and that is said (a warning, lifeboat_config_warning) instead.
func permitted(ctx context.Context, client kubernetes.Interface, mode config.Mode, cfg *config.Config, logger *slog.Logger, m *metrics.Metrics) error {
	ctx, cancel := context.WithTimeout(ctx, permissionsTimeout)
	defer cancel()
	missing, err := permissions.CheckRBAC(ctx, client, permissions.Permissions(mode, cfg))
	if err != nil {
		return fmt.Errorf("cannot check Kubernetes permissions: %w", err)
	}
	var names []string
	for _, p := range missing {
		attrs := []any{"verb", p.Verb, "resource", p.ResourceName()}
		for _, kv := range [][2]string{{"apiGroup", p.Group}, {"namespace", p.Namespace}, {"name", p.Name}} {
			if kv[1] != "" {
				attrs = append(attrs, kv[0], kv[1])
			}
		}
		if p.Soft(cfg) {
			logger.Warn("missing Kubernetes permission for an extra that is on by default: starting without it; grant the permission, or set the setting to false",
				append(attrs, "setting", p.Extra, "neededTo", p.Why)...)
			turnOff(cfg, p.Extra)
			m.ConfigWarning("permission_missing_" + strings.ToLower(p.Extra))
			continue
		}
		logger.Error("missing Kubernetes permission", append(attrs, "neededTo", p.Why)...)
		names = append(names, p.String())
	}
	if len(names) == 0 {
		return nil
	}
	logger.Error("not starting: grant the missing Kubernetes permissions (lifeboat preflight shows them all)",
		"mode", mode, "missing", strings.Join(names, ", "))
	return ErrPermissions
}

// turnOff turns off an extra that is on by default (permissions.Permission.Extra).
func turnOff(cfg *config.Config, extra string) {
	switch extra {
	case "NODE_CONDITION":
		cfg.NodeCondition = false
	case "EMIT_KUBERNETES_EVENTS":
		cfg.EmitKubernetesEvents = false
	}
}

// LogStart logs the start: the version, the mode, the settings not at their defaults and the
// warnings of the configuration, and sets the Go runtime's soft memory limit from the
// container's and, for the agent, its garbage collection target.
func LogStart(loaded *config.Loaded, mode config.Mode, version string, logger *slog.Logger) {
	for _, w := range loaded.Warnings {
		logger.Warn(w)
	}
	attrs := []any{"version", version, "mode", mode, "binary", filepath.Base(os.Args[0])}
	for _, e := range loaded.Entries() {
		if e.Origin.Kind != "default" {
			attrs = append(attrs, e.Env, e.Value)
		}
	}
	logger.Info("starting", attrs...)
	if soft, err := softMemoryLimit(cgroupMemoryMax, os.LookupEnv); err != nil {
		logger.Warn("no soft memory limit set", "err", err)
	} else if soft > 0 {
		logger.Info("soft memory limit set from the container's", "bytes", soft, "share", memoryLimitShare)
	}
	if mode == config.ModeAgent {
		if gc := agentGarbageCollection(os.LookupEnv); gc > 0 {
			logger.Info("garbage collection target set for the agent (GOGC unset)", "GOGC", gc)
		}
	}
}
