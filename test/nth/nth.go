// SPDX-License-Identifier: Apache-2.0

// Package nth finds aws-node-termination-handler's source, at the version pinned in
// tools/nth/go.mod, for tests that hold Lifeboat to NTH's facts (its Helm chart's values, its
// webhook kinds and templates). The go command fetches it into the module cache on first use.
package nth

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// Module is NTH's module path.
const Module = "github.com/aws/aws-node-termination-handler"

var (
	once   sync.Once
	dir    string
	dirErr error
)

// Dir is the root of NTH's source in the module cache. It fails the test when the module
// cannot be had (no module proxy and no cached copy).
func Dir(t testing.TB) string {
	t.Helper()
	once.Do(func() { dir, dirErr = download() })
	if dirErr != nil {
		t.Fatalf("NTH's source (%s, pinned in tools/nth/go.mod): %v", Module, dirErr)
	}
	return dir
}

// ChartDir is NTH's Helm chart.
func ChartDir(t testing.TB) string {
	return filepath.Join(Dir(t), "config", "helm", "aws-node-termination-handler")
}

func download() (string, error) {
	tools, err := toolsDir()
	if err != nil {
		return "", err
	}
	cmd := exec.Command("go", "mod", "download", "-json", Module)
	cmd.Dir = tools
	out, err := cmd.Output()
	var info struct {
		Dir   string
		Error string
	}
	if jerr := json.Unmarshal(out, &info); jerr != nil && err == nil {
		err = jerr
	}
	switch {
	case info.Error != "":
		return "", errors.New(info.Error)
	case err != nil:
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return "", fmt.Errorf("go mod download: %w: %s", err, exit.Stderr)
		}
		return "", fmt.Errorf("go mod download: %w", err)
	case info.Dir == "":
		return "", errors.New("go mod download named no directory")
	}
	return info.Dir, nil
}

// toolsDir is tools/nth of this checkout, found from the working directory upwards.
func toolsDir() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "tools", "nth", "go.mod")); err == nil {
			return filepath.Join(d, "tools", "nth"), nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no tools/nth/go.mod above %s", wd)
		}
	}
}
