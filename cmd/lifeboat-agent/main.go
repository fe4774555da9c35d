// SPDX-License-Identifier: Apache-2.0

// Command lifeboat-agent is Lifeboat's agent alone: what `lifeboat agent` runs, without the
// controller, the command-line tools and the AWS clients only they use, so that the process
// on every node starts with less. It takes the agent's settings as `lifeboat agent` does, and
// `lifeboat agent` hands over to it when it sits in the same directory (as in the image).
//
//	lifeboat-agent [agent] [--setting=value ...]
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/daemon"
	"lifeboat.dev/lifeboat/internal/logging"
	"lifeboat.dev/lifeboat/internal/version"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	code := run(ctx, os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run runs the agent with the command line's settings and returns the exit status.
func run(ctx context.Context, args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == string(config.ModeAgent) {
		args = args[1:] // as `lifeboat agent` was given them
	}
	if len(args) > 0 && args[0] == "version" {
		fmt.Fprintln(stdout, version.String()) // the release's, as `lifeboat version` prints it
		return daemon.ExitOK
	}
	loaded, err := config.Load(args, lookupEnv)
	if errors.Is(err, config.ErrHelp) {
		config.WriteSettings(stdout, `Usage: lifeboat-agent [--setting=value ...]

Lifeboat's agent: one node, notices from instance metadata. Settings are environment
variables or flags (a flag wins; an empty variable counts as unset).
`)
		return daemon.ExitOK
	}
	if err == nil {
		err = loaded.Validate(config.ModeAgent)
	}
	if err != nil {
		config.WriteError(stderr, "lifeboat-agent", err)
		fmt.Fprintln(stderr, "Run 'lifeboat-agent --help' for the settings.")
		return daemon.ExitConfig
	}
	logger := logging.New(stderr, loaded.Config.JSONLogging, loaded.Config.LogLevel)
	logging.RouteKlog(logger)
	return daemon.Start(ctx, loaded, config.ModeAgent, version.Version, logger, daemon.Agent)
}
