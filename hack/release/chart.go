// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// emptyImageTag is the one line of the chart's values.yaml the release fills: image.tag,
// empty in the repository so that the chart defaults to its appVersion.
var emptyImageTag = regexp.MustCompile(`(?m)^  tag: ""$`)

// fillImageTag sets image.tag in a values.yaml to tag. The line must be the only empty tag of
// the file and sit in the top-level image: block, so that no other tag is changed by mistake.
func fillImageTag(values []byte, tag string) ([]byte, error) {
	lines := emptyImageTag.FindAllIndex(values, -1)
	if len(lines) != 1 {
		return nil, fmt.Errorf("%d lines '  tag: \"\"', want 1 (image.tag, which the release fills)", len(lines))
	}
	start := lines[0][0]
	image := bytes.LastIndex(values[:start], []byte("\nimage:\n"))
	if image < 0 || bytes.Contains(values[image+1:start], []byte("\n\n")) {
		return nil, errors.New("the empty tag line is not image.tag")
	}
	var out bytes.Buffer
	out.Write(values[:start])
	fmt.Fprintf(&out, "  tag: %q", tag)
	out.Write(values[lines[0][1]:])
	return out.Bytes(), nil
}

// packageChart copies the chart at src, names the layout's index by digest in its image.tag
// (<version>@sha256:…) and packages it with helm at version into out. The chart in the
// repository is left as it is.
func packageChart(ctx context.Context, helm, src, layoutDir, version, out string) (string, error) {
	idx, err := readLayoutIndex(layoutDir)
	if err != nil {
		return "", fmt.Errorf("-layout: %w", err)
	}
	digest, err := idx.Digest()
	if err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp("", "lifeboat-chart-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	chart := filepath.Join(tmp, filepath.Base(filepath.Clean(src)))
	if err := copyDir(src, chart); err != nil {
		return "", fmt.Errorf("-src %s: %w", src, err)
	}
	valuesPath := filepath.Join(chart, "values.yaml")
	values, err := os.ReadFile(valuesPath)
	if err != nil {
		return "", fmt.Errorf("-src %s: %w", src, err)
	}
	if values, err = fillImageTag(values, version+"@"+digest.String()); err != nil {
		return "", fmt.Errorf("-src %s: values.yaml: %w", src, err)
	}
	if err := os.WriteFile(valuesPath, values, 0o644); err != nil {
		return "", err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", fmt.Errorf("-out %s: %w", out, err)
	}
	cmd := exec.CommandContext(ctx, helm, "package", chart, "--version", version, "--app-version", version, "--destination", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%s: %w\n%s", strings.Join(cmd.Args, " "), err, b)
	}
	return filepath.Join(out, chartArchive(version)), nil
}

// chartArchive is the name helm package gives the chart at version.
func chartArchive(version string) string { return "lifeboat-" + version + ".tgz" }

// copyDir copies a directory of regular files, keeping their modes.
func copyDir(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case !info.Mode().IsRegular():
			return fmt.Errorf("%s is not a regular file", p)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, info.Mode().Perm())
	})
}
