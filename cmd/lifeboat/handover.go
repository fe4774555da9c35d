// SPDX-License-Identifier: Apache-2.0

package main

import (
	"debug/buildinfo"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"syscall"
)

// agentBinaryName is the agent's own binary (cmd/lifeboat-agent), which `lifeboat agent`
// hands over to when it sits in the same directory and comes from the same build.
const agentBinaryName = "lifeboat-agent"

// handOver is set by main: tests run the agent in their own process.
var handOver bool

// handOverToAgent replaces this process with the agent's own binary, which starts with less
// and reads the same settings and environment. It returns only when there is none of the same
// build, or the exec failed: then the agent runs in this binary, as it always could.
func handOverToAgent(args []string, logger *slog.Logger) {
	path, skipped := agentBinary()
	if path == "" {
		if skipped != "" {
			logger.Warn("running the agent in this binary: "+skipped, "path", filepath.Join(filepath.Dir(executable()), agentBinaryName))
		}
		return
	}
	err := syscall.Exec(path, append([]string{path}, args...), os.Environ())
	logger.Warn("running the agent in this binary: could not hand over to the agent's own", "path", path, "err", err)
}

func executable() string {
	self, _ := os.Executable()
	return self
}

// agentBinary is the path of the agent's own binary beside this one when it is of this build;
// otherwise "" and why it was passed over ("" when there is none).
func agentBinary() (path, skipped string) {
	self := executable()
	if self == "" {
		return "", ""
	}
	path = filepath.Join(filepath.Dir(self), agentBinaryName)
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return "", ""
	}
	theirs, err := buildinfo.ReadFile(path)
	if err != nil {
		return "", fmt.Sprintf("%s is not a Go binary Lifeboat can read (%v)", agentBinaryName, err)
	}
	ours, ok := debug.ReadBuildInfo()
	if !ok {
		return "", "this binary carries no build information to compare " + agentBinaryName + " with"
	}
	if why := otherBuild(ours, theirs); why != "" {
		return "", agentBinaryName + " beside it is of another build (" + why + ")"
	}
	return path, ""
}

// otherBuild says how two binaries' builds differ, "" when they are of one build: the same
// module at the same version, toolchain, stamp (-ldflags, which carries the release) and
// commit. A lifeboat-agent left from an earlier install must not run under a newer lifeboat.
func otherBuild(ours, theirs *debug.BuildInfo) string {
	if ours.Main.Path != theirs.Main.Path || ours.Main.Version != theirs.Main.Version {
		return fmt.Sprintf("module %s@%s, this one %s@%s", theirs.Main.Path, theirs.Main.Version, ours.Main.Path, ours.Main.Version)
	}
	if ours.GoVersion != theirs.GoVersion {
		return fmt.Sprintf("built with %s, this one with %s", theirs.GoVersion, ours.GoVersion)
	}
	for _, key := range []string{"-ldflags", "vcs.revision", "vcs.modified"} {
		if a, b := setting(ours, key), setting(theirs, key); a != b {
			return fmt.Sprintf("%s %q, this one %q", key, b, a)
		}
	}
	return ""
}

func setting(info *debug.BuildInfo, key string) string {
	for _, s := range info.Settings {
		if s.Key == key {
			return s.Value
		}
	}
	return ""
}
