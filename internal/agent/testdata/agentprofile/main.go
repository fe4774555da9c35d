// SPDX-License-Identifier: Apache-2.0

// Command agentprofile runs Lifeboat's agent as `lifeboat agent` does (its settings from the
// environment, the daemon package) and serves Go's profiles on PPROF_ADDRESS, so that
// BenchmarkAgentDrainMemory can read where the agent's heap goes. The profiles' server is its
// only difference from the real binary.
package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	_ "net/http/pprof" // the profiles, on the default mux
	"os"
	"os/signal"
	"syscall"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/daemon"
	"lifeboat.dev/lifeboat/internal/logging"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "agentprofile:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	ln, err := net.Listen("tcp", os.Getenv("PPROF_ADDRESS"))
	if err != nil {
		return err
	}
	go func() { _ = http.Serve(ln, nil) }()
	loaded, err := config.Load(nil, os.LookupEnv)
	if err != nil {
		return err
	}
	if err := loaded.Validate(config.ModeAgent); err != nil {
		return err
	}
	logger := logging.New(os.Stderr, loaded.Config.JSONLogging, loaded.Config.LogLevel)
	logging.RouteKlog(logger)
	daemon.LogStart(loaded, config.ModeAgent, "profiled", logger) // the runtime's settings, as the binary sets them
	d, err := daemon.New(ctx, loaded.Config, config.ModeAgent, logger, daemon.Agent)
	if err != nil {
		return err
	}
	return d.Run(ctx)
}
