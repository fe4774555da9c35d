// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"context"
	"errors"
	"log/slog"

	"lifeboat.dev/lifeboat/internal/config"
)

// The daemon's exit statuses (DESIGN.md's): both binaries exit with these.
const (
	ExitOK      = 0
	ExitFailure = 1 // a runtime failure, or a missing permission (each one logged)
	ExitConfig  = 2 // bad configuration: nothing was started, and a setting fixes it
)

// Start logs the start, builds the daemon of the mode with build and runs it until ctx ends;
// it returns the exit status.
func Start(ctx context.Context, loaded *config.Loaded, mode config.Mode, version string, logger *slog.Logger, build Build) int {
	LogStart(loaded, mode, version, logger)
	d, err := New(ctx, loaded.Config, mode, logger, build)
	var cerr *ConfigError
	switch {
	case errors.Is(err, ErrPermissions):
		return ExitFailure
	case errors.As(err, &cerr):
		logger.Error(cerr.Error())
		return ExitConfig
	case err != nil:
		logger.Error("not starting", "mode", mode, "err", err)
		return ExitFailure
	}
	if err := d.Run(ctx); err != nil {
		logger.Error(err.Error())
		return ExitFailure
	}
	return ExitOK
}
