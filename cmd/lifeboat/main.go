// Command lifeboat drains Kubernetes nodes before AWS takes their instances away.
//
//	lifeboat agent       one node, notices from instance metadata (a DaemonSet)
//	lifeboat controller  every node, notices from an SQS queue (a Deployment)
//	lifeboat preflight   check permissions, the notice source and identity settings; exit 1 on failure
//	lifeboat config      print the effective configuration and where each value came from
//	lifeboat version     print the build
//
// With no sub-command it behaves like aws-node-termination-handler: controller mode when
// ENABLE_SQS_TERMINATION_DRAINING is true, agent mode otherwise. Before it starts either mode
// it checks its Kubernetes permissions and exits 1 naming each one it lacks.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/daemon"
	"lifeboat.dev/lifeboat/internal/handback/targets"
	"lifeboat.dev/lifeboat/internal/kube"
	"lifeboat.dev/lifeboat/internal/logging"
	"lifeboat.dev/lifeboat/internal/preflight"
	"lifeboat.dev/lifeboat/internal/readiness"
	"lifeboat.dev/lifeboat/internal/source/imds"
	"lifeboat.dev/lifeboat/internal/status"
	"lifeboat.dev/lifeboat/internal/version"
	"lifeboat.dev/lifeboat/internal/wiring"
)

// Exit statuses.
const (
	exitOK      = 0
	exitFailure = 1 // a runtime failure
	exitUsage   = 2 // bad configuration or arguments; nothing was started
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) int {
	sub, preflightMode, output, loadBalancers := "", config.Mode(""), status.FormatTable, false
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		sub, args = args[0], args[1:]
	}
	switch sub {
	case "version":
		fmt.Fprintln(stdout, version.String())
		return exitOK
	case "help":
		usage(stdout)
		return exitOK
	case "", "agent", "controller", "config":
	case "status", "check":
		var err error
		if output, args, err = outputFlag(args); err != nil {
			fmt.Fprintf(stderr, "lifeboat: %s: %v\n", sub, err)
			return exitUsage
		}
		if sub == "status" {
			loadBalancers, args = boolFlag(args, "load-balancers")
		}
		if sub == "check" && output == status.FormatYAML {
			fmt.Fprintln(stderr, "lifeboat: check: -o yaml is not offered; use table or json")
			return exitUsage
		}
	case "preflight":
		// An optional mode argument; without one the mode is chosen as NTH does.
		if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
			if m := config.Mode(args[0]); m != config.ModeAgent && m != config.ModeController {
				fmt.Fprintf(stderr, "lifeboat: preflight: unknown mode %q (agent or controller)\n", args[0])
				return exitUsage
			}
			preflightMode, args = config.Mode(args[0]), args[1:]
		}
	default:
		fmt.Fprintf(stderr, "lifeboat: unknown command %q\n\n", sub)
		usage(stderr)
		return exitUsage
	}

	loaded, err := config.Load(args, lookupEnv)
	if errors.Is(err, config.ErrHelp) {
		usage(stdout)
		return exitOK
	}
	if err != nil {
		return configError(stderr, err)
	}
	mode := loaded.Config.ModeFromEnv()
	if sub == "agent" || sub == "controller" {
		mode = config.Mode(sub)
	}
	if preflightMode != "" {
		mode = preflightMode
	}
	switch sub {
	case "status":
		// Read-only, from an operator's machine: the mode's required settings do not apply.
		return runStatus(ctx, loaded.Config, output, loadBalancers, stdout, stderr)
	case "check":
		return runCheck(ctx, loaded.Config, output, stdout, stderr)
	}
	if err := loaded.Validate(mode); err != nil {
		return configError(stderr, err)
	}

	if sub == "config" {
		fmt.Fprintf(stdout, "# mode: %s\n", mode)
		for _, w := range loaded.Warnings {
			fmt.Fprintf(stdout, "# warning: %s\n", w)
		}
		if err := loaded.Print(stdout); err != nil {
			fmt.Fprintf(stderr, "lifeboat: %v\n", err)
			return exitFailure
		}
		return exitOK
	}

	logger := logging.New(stderr, loaded.Config.JSONLogging, loaded.Config.LogLevel)
	logging.RouteKlog(logger)
	if sub == "preflight" {
		return runPreflight(ctx, mode, loaded.Config, stdout, stderr)
	}
	daemon.LogStart(loaded, mode, version.Version, logger)
	d, err := daemon.New(ctx, loaded.Config, mode, logger)
	var cerr *daemon.ConfigError
	switch {
	case errors.Is(err, daemon.ErrPermissions):
		return exitFailure // each missing permission is logged
	case errors.As(err, &cerr):
		logger.Error(cerr.Error())
		return exitUsage
	case err != nil:
		logger.Error("not starting", "mode", mode, "err", err)
		return exitFailure
	}
	if err := d.Run(ctx); err != nil {
		logger.Error(err.Error())
		return exitFailure
	}
	return exitOK
}

// runPreflight prints the preflight table; exit 1 when a check failed.
func runPreflight(ctx context.Context, mode config.Mode, cfg *config.Config, stdout, stderr io.Writer) int {
	env := preflight.Env{}
	if rc, err := kube.RESTConfig(wiring.Kube(cfg)); err != nil {
		env.KubeErr = err
	} else if env.Kube, err = kube.NewClientset(rc); err != nil {
		env.KubeErr = err
	}
	loadAWS := func(region string) {
		awsCfg, err := cloud.LoadAWSConfig(ctx, region, cfg.AWSEndpoint)
		if err != nil {
			env.AWSErr = err
		} else {
			env.AWS = preflight.NewAWS(awsCfg)
		}
	}
	switch mode {
	case config.ModeAgent:
		metadata := imds.NewClient(cfg.MetadataURL, cfg.MetadataTries, cfg.AllowIMDSv1)
		env.IMDS = metadata
		if cfg.EnableASGLifecycleDraining && cfg.ASGLifecycleHookName != "" {
			// The agent completes its hook with the region from AWS_REGION, else metadata.
			region := cfg.AWSRegion
			if region == "" {
				body, found, err := metadata.Get(ctx, "placement/region")
				region = strings.TrimSpace(string(body))
				if err == nil && !found {
					err = errors.New("not found")
				}
				if err != nil {
					env.AWSErr = fmt.Errorf("AWS region: AWS_REGION is unset and instance metadata placement/region failed: %v", err)
				}
			}
			if env.AWSErr == nil {
				loadAWS(region)
			}
		}
	case config.ModeController:
		loadAWS(cfg.AWSRegion)
	}
	fmt.Fprintf(stdout, "lifeboat preflight, %s mode\n\n", mode)
	rows := preflight.Run(ctx, mode, cfg, env)
	if err := preflight.Print(stdout, rows); err != nil {
		fmt.Fprintf(stderr, "lifeboat: %v\n", err)
		return exitFailure
	}
	if preflight.Failed(rows) {
		return exitFailure
	}
	return exitOK
}

// outputFlag takes -o / --output FORMAT (or -o=FORMAT) out of args.
func outputFlag(args []string) (format string, rest []string, err error) {
	format = status.FormatTable
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, value, hasValue := strings.Cut(a, "=")
		if name != "-o" && name != "--output" && name != "-output" {
			rest = append(rest, a)
			continue
		}
		if !hasValue {
			if i+1 >= len(args) {
				return "", nil, fmt.Errorf("%s needs a format: table, json or yaml", a)
			}
			i++
			value = args[i]
		}
		switch value {
		case status.FormatTable, status.FormatJSON, status.FormatYAML:
			format = value
		default:
			return "", nil, fmt.Errorf("unknown output format %q (table, json or yaml)", value)
		}
	}
	return format, rest, nil
}

// boolFlag takes --name (or --name=true|false, one dash or two) out of args.
func boolFlag(args []string, name string) (set bool, rest []string) {
	for _, a := range args {
		flag, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || flag != name {
			rest = append(rest, a)
			continue
		}
		set = !hasValue || value == "true"
	}
	return set, rest
}

// readClient is the client of the read-only commands (status, check).
func readClient(cfg *config.Config) (kubernetes.Interface, error) {
	rc, err := kube.RESTConfig(wiring.Kube(cfg))
	if err != nil {
		return nil, fmt.Errorf("cannot reach Kubernetes: %w", err)
	}
	return kube.NewClientset(rc)
}

// runCheck prints the workloads that cannot leave a node within a Spot warning; exit 1 when
// there are any, so a CI job can run it.
func runCheck(ctx context.Context, cfg *config.Config, output string, stdout, stderr io.Writer) int {
	client, err := readClient(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "lifeboat: check: %v\n", err)
		return exitUsage
	}
	opts := wiring.Drain(cfg, client, nil)
	findings, err := readiness.Check(ctx, client, readiness.Options{Policy: opts.Policy, PodGracePeriod: opts.PodGracePeriod})
	if err != nil {
		fmt.Fprintf(stderr, "lifeboat: check: %v\n", err)
		return exitFailure
	}
	if err := readiness.Print(stdout, findings, output); err != nil {
		fmt.Fprintf(stderr, "lifeboat: check: %v\n", err)
		return exitFailure
	}
	if len(findings) > 0 {
		return exitFailure
	}
	return exitOK
}

// runStatus prints every node's interruption episode, read-only.
func runStatus(ctx context.Context, cfg *config.Config, output string, loadBalancers bool, stdout, stderr io.Writer) int {
	if loadBalancers && cfg.AWSRegion == "" {
		fmt.Fprintln(stderr, "lifeboat: status: --load-balancers needs AWS_REGION (or --aws-region): the region of the cluster's load balancers")
		return exitUsage
	}
	client, err := readClient(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "lifeboat: status: %v\n", err)
		return exitUsage
	}
	var opts status.Options
	if loadBalancers {
		// The hand-back's own target reader: the same calls, the same idea of "held".
		awsCfg, err := cloud.LoadAWSConfig(ctx, cfg.AWSRegion, cfg.AWSEndpoint)
		if err != nil {
			fmt.Fprintf(stderr, "lifeboat: status: --load-balancers needs AWS credentials and AWS_REGION: %v\n", err)
			return exitUsage
		}
		opts.Targets = targets.New(cloud.NewAWSLoadBalancing(awsCfg), targets.Options{})
	}
	report, err := status.Collect(ctx, client, cfg, time.Now(), opts)
	if err != nil {
		fmt.Fprintf(stderr, "lifeboat: status: %v\n", err)
		return exitFailure
	}
	if err := status.Print(stdout, report, output); err != nil {
		fmt.Fprintf(stderr, "lifeboat: status: %v\n", err)
		return exitFailure
	}
	return exitOK
}

func configError(w io.Writer, err error) int {
	var cerr *config.Error
	if errors.As(err, &cerr) {
		fmt.Fprintln(w, "lifeboat: invalid configuration:")
		for _, p := range cerr.Problems {
			fmt.Fprintf(w, "  %s\n", p)
		}
	} else {
		fmt.Fprintf(w, "lifeboat: %v\n", err)
	}
	fmt.Fprintln(w, "Run 'lifeboat help' for the settings.")
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprint(w, `Usage: lifeboat [agent|controller|preflight [agent|controller]|status [-o table|json|yaml] [--load-balancers]|check [-o table|json]|config|version] [--flag=value ...]

Lifeboat cordons and drains Kubernetes nodes before AWS interrupts, retires or scales in
their EC2 instances, then completes the Auto Scaling lifecycle action.

Commands:
  agent       protect this node (NODE_NAME) using instance metadata notices
  controller  protect every node of the cluster using notices from an SQS queue
  preflight   check Kubernetes permissions (SelfSubjectAccessReviews), instance metadata and
              NODE_NAME's Node (agent), or the queue, EC2 and Auto Scaling permissions and
              identity settings (controller); print a table with a fix for each failure and
              exit 1 if any check failed. The mode is the argument after it, else chosen as
              with no sub-command
  status      every node in an interruption episode: its notices, phase, deadline and time
              left, the pods still on it and what holds each (a PodDisruptionBudget, a
              do-not-disrupt mark, a policy), volumes attached, lifecycle actions pending.
              Read-only, with KUBECONFIG; -o json or -o yaml for scripts; --load-balancers
              also asks ELBv2 (AWS credentials, AWS_REGION) which target groups still hold
              each instance or its pods' IPs
  check       workloads that could not leave a node within a Spot warning's two minutes
              (a PodDisruptionBudget allowing no disruption, a grace period of 2 min or
              more, do-not-disrupt pods, single replicas without a budget, emptyDir data
              kept, pods without a controller), each with the fix; exit 1 when any is
              found. Read-only; -o json
  config      print the effective configuration and where each value came from
  version     print the build
  (none)      as aws-node-termination-handler: controller when ENABLE_SQS_TERMINATION_DRAINING=true

Settings are environment variables or flags (a flag wins; an empty variable counts as unset):
`)
	group := ""
	for _, s := range config.Settings() {
		if s.Group != group {
			group = s.Group
			fmt.Fprintf(w, "\n  %s\n", group)
		}
		def := ""
		if s.Default != "" && len(s.Default) < 40 {
			def = " (default " + s.Default + ")"
		}
		fmt.Fprintf(w, "    --%s, %s%s\n        %s\n", s.Flag, s.Env, def, s.Usage)
	}
}
