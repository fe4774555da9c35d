// SPDX-License-Identifier: Apache-2.0

// Package version reports which Lifeboat build is running.
//
// `make build` stamps Version, Commit and CommitTime with -ldflags -X (see LDFLAGS in the
// Makefile): the commit's time rather than the build's, so that two builds of one commit are
// the same binary. A plain `go build` leaves them at their defaults; when the Go toolchain
// recorded the VCS revision (-buildvcs), String falls back to it.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Stamped at build time with -ldflags "-X lifeboat.dev/lifeboat/internal/version.<Name>=<value>".
var (
	// Version is the release, as `git describe --tags --always --dirty` names it.
	Version = "dev"
	// Commit is the full hash of the commit built.
	Commit = ""
	// CommitTime is that commit's committer time, RFC 3339.
	CommitTime = ""
)

// unknown stands in for a commit or time nobody recorded.
const unknown = "unknown"

// Build returns the commit and commit time: the stamped ones, else those the Go toolchain
// recorded, else "unknown".
func Build() (commit, commitTime string) {
	commit, commitTime = Commit, CommitTime
	if commit == "" || commitTime == "" {
		if info, ok := debug.ReadBuildInfo(); ok {
			for _, s := range info.Settings {
				switch {
				case s.Key == "vcs.revision" && commit == "":
					commit = s.Value
				case s.Key == "vcs.time" && commitTime == "":
					commitTime = s.Value
				}
			}
		}
	}
	if commit == "" {
		commit = unknown
	}
	if commitTime == "" {
		commitTime = unknown
	}
	return commit, commitTime
}

// String describes the build: version, commit, commit time, Go version and platform.
func String() string {
	commit, at := Build()
	return fmt.Sprintf("lifeboat %s commit %s committed %s %s %s/%s", Version, commit, at, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// UserAgent is sent to the Kubernetes and AWS APIs, so audit logs show who made a request.
func UserAgent() string { return "lifeboat/" + Version }
