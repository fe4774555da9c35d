// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/spf13/cobra"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/daemon"
	"lifeboat.dev/lifeboat/internal/daemon/controllerdaemon"
	"lifeboat.dev/lifeboat/internal/kube"
	"lifeboat.dev/lifeboat/internal/logging"
	"lifeboat.dev/lifeboat/internal/preflight"
	"lifeboat.dev/lifeboat/internal/source/imds"
	"lifeboat.dev/lifeboat/internal/version"
	"lifeboat.dev/lifeboat/internal/wiring"
)

// The daemon's commands (agent, controller, preflight, config, and none at all) keep
// aws-node-termination-handler's interface: settings are environment variables or
// --flag=value, parsed by package config rather than by the command line library, and the
// exit statuses are DESIGN.md's: 0 ok, 1 runtime failure, 2 bad configuration.

// daemonCommands are the commands that run or check the daemon.
func (a *app) daemonCommands() []*cobra.Command {
	return []*cobra.Command{
		a.daemonCommand("agent", "Protect this node (NODE_NAME) using instance metadata notices (a DaemonSet)"),
		a.daemonCommand("controller", "Protect every node of the cluster using notices from an SQS queue (a Deployment)"),
		a.daemonCommand("config", "Print the effective configuration and where each value came from"),
		a.daemonCommand("preflight", "Check permissions, the notice source and identity settings of a mode; exit 1 if any check failed"),
	}
}

func (a *app) daemonCommand(name, short string) *cobra.Command {
	use := name + " [--setting=value ...]"
	if name == "preflight" {
		use = "preflight [agent|controller] [--setting=value ...]"
	}
	return &cobra.Command{
		Use: use, Short: short, GroupID: groupDaemon,
		// The settings' own parser reads the flags, NTH's names and aliases included.
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return exitWith(a.runDaemon(cmd.Context(), name, args))
		},
	}
}

// runDaemon runs one of the daemon's commands ("" is none: NTH's choice of mode).
func (a *app) runDaemon(ctx context.Context, sub string, args []string) int {
	preflightMode := config.Mode("")
	if sub == "preflight" && len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		if m := config.Mode(args[0]); m != config.ModeAgent && m != config.ModeController {
			fmt.Fprintf(a.stderr, "lifeboat: preflight: unknown mode %q (agent or controller)\n", args[0])
			return exitUsage
		}
		preflightMode, args = config.Mode(args[0]), args[1:]
	}
	loaded, err := config.Load(args, a.lookupEnv)
	if errors.Is(err, config.ErrHelp) {
		settingsUsage(a.stdout, sub)
		return exitOK
	}
	if err != nil {
		return configError(a.stderr, err)
	}
	mode := loaded.Config.ModeFromEnv()
	if sub == "agent" || sub == "controller" {
		mode = config.Mode(sub)
	}
	if preflightMode != "" {
		mode = preflightMode
	}
	if err := loaded.Validate(mode); err != nil {
		return configError(a.stderr, err)
	}
	if sub == "config" {
		fmt.Fprintf(a.stdout, "# mode: %s\n", mode)
		for _, w := range loaded.Warnings {
			fmt.Fprintf(a.stdout, "# warning: %s\n", w)
		}
		if err := loaded.Print(a.stdout); err != nil {
			fmt.Fprintf(a.stderr, "lifeboat: %v\n", err)
			return exitFailure
		}
		return exitOK
	}
	logger := logging.New(a.stderr, loaded.Config.JSONLogging, loaded.Config.LogLevel)
	logging.RouteKlog(logger)
	if sub == "preflight" {
		return runPreflight(ctx, mode, loaded.Config, a.stdout, a.stderr)
	}
	if mode == config.ModeAgent && handOver {
		handOverToAgent(args, logger)
	}
	return start(ctx, loaded, mode, logger)
}

// start builds the daemon of the mode and runs it until ctx ends.
func start(ctx context.Context, loaded *config.Loaded, mode config.Mode, logger *slog.Logger) int {
	build := daemon.Agent
	if mode == config.ModeController {
		build = controllerdaemon.Build
	}
	return daemon.Start(ctx, loaded, mode, version.Version, logger, build)
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

func configError(w io.Writer, err error) int {
	config.WriteError(w, "lifeboat", err)
	fmt.Fprintln(w, "Run 'lifeboat agent --help' (or controller) for the settings.")
	return exitUsage
}

// settingsUsage prints the daemon's settings, grouped as in the docs.
func settingsUsage(w io.Writer, sub string) {
	if sub == "" {
		sub = "[agent|controller]"
	}
	config.WriteSettings(w, fmt.Sprintf(`Usage: lifeboat %s [--setting=value ...]

Settings are environment variables or flags (a flag wins; an empty variable counts as unset).
Without agent or controller, the mode is chosen as aws-node-termination-handler does:
controller when ENABLE_SQS_TERMINATION_DRAINING=true, agent otherwise.
`, sub))
}
