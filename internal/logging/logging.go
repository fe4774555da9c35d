// SPDX-License-Identifier: Apache-2.0

// Package logging builds Lifeboat's slog logger and routes client-go's klog output into it, so
// every line has one format whatever library wrote it.
package logging

import (
	"io"
	"log/slog"

	"k8s.io/klog/v2"
)

// New returns a text or JSON logger at the given level ("debug", "info", "warn", "error").
func New(w io.Writer, json bool, level string) *slog.Logger {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		lvl = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: lvl}
	var h slog.Handler = slog.NewTextHandler(w, opts)
	if json {
		h = slog.NewJSONHandler(w, opts)
	}
	return slog.New(h)
}

// RouteKlog sends klog (client-go, leader election) through logger.
func RouteKlog(logger *slog.Logger) {
	klog.SetSlogLogger(logger.With("logger", "client-go"))
}
