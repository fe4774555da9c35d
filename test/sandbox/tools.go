// SPDX-License-Identifier: Apache-2.0

// Package sandbox starts and stops the real programs that Lifeboat's tests and demo run
// against, as local processes on 127.0.0.1: etcd and kube-apiserver (optionally
// kube-controller-manager and kube-scheduler), kwok with fake nodes, the EC2 instance
// metadata mock, and an SQS server. Ports are chosen at run time; every process is stopped by
// Stop, and also killed if the parent process dies first. Each process logs to a file in the
// sandbox directory, so a failing test can show what happened.
package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Tools is the directory of sandbox binaries that hack/tools.sh builds.
type Tools struct{ Dir string }

// ErrNoTools means the sandbox binaries have not been built.
var ErrNoTools = errors.New("sandbox tools are not built: run 'make sandbox' (or set LIFEBOAT_TOOLS_BIN)")

// FindTools locates the binaries: LIFEBOAT_TOOLS_BIN when set, else the directory that
// hack/tools.sh reports for this checkout.
func FindTools() (Tools, error) {
	dir := os.Getenv("LIFEBOAT_TOOLS_BIN")
	if dir == "" {
		root, err := moduleRoot()
		if err != nil {
			return Tools{}, err
		}
		out, err := exec.Command("bash", filepath.Join(root, "hack", "tools.sh"), "--dir").Output()
		if err != nil {
			return Tools{}, fmt.Errorf("hack/tools.sh --dir: %w", err)
		}
		dir = strings.TrimSpace(string(out))
	}
	t := Tools{Dir: dir}
	for _, name := range []string{"etcd", "kube-apiserver", "kwok"} {
		if _, err := os.Stat(t.Path(name)); err != nil {
			return Tools{}, fmt.Errorf("%w (%s missing in %s)", ErrNoTools, name, dir)
		}
	}
	return t, nil
}

// Path is the path of the named binary.
func (t Tools) Path(name string) string { return filepath.Join(t.Dir, name) }

// moduleRoot walks up from the working directory to the directory holding go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("cannot find the module root (go.mod) above the working directory")
		}
		dir = parent
	}
}
