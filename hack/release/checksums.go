// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// checksumsFile lists the SHA-256 of every file a release publishes beside the image, in the
// format `sha256sum -c` reads.
const checksumsFile = "SHA256SUMS"

// releaseFiles are the regular files directly in dir, but the checksums file: what the
// checksums cover. The image layout, a directory, is named by its own digests.
func releaseFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() && e.Name() != checksumsFile {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names, nil
}

func fileSHA256(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}

// writeChecksums writes dir/SHA256SUMS over every release file in dir.
func writeChecksums(dir string) error {
	names, err := releaseFiles(dir)
	if err != nil {
		return fmt.Errorf("-dir: %w", err)
	}
	if len(names) == 0 {
		return fmt.Errorf("-dir %s: no file to list", dir)
	}
	var buf bytes.Buffer
	for _, n := range names {
		sum, err := fileSHA256(filepath.Join(dir, n))
		if err != nil {
			return err
		}
		fmt.Fprintf(&buf, "%s  %s\n", sum, n)
	}
	return os.WriteFile(filepath.Join(dir, checksumsFile), buf.Bytes(), 0o644)
}

var checksumLine = regexp.MustCompile(`^([0-9a-f]{64}) [ *]([^/\\]+)$`)

// readChecksums parses a SHA256SUMS file: file name → sum. A malformed line, a path and a
// name listed twice are refused.
func readChecksums(data []byte) (map[string]string, error) {
	sums := map[string]string{}
	s := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; s.Scan(); n++ {
		line := strings.TrimRight(s.Text(), "\r")
		m := checksumLine.FindStringSubmatch(line)
		if m == nil {
			return nil, fmt.Errorf("line %d: %q is not \"<sha256>  <file name>\"", n, line)
		}
		if _, dup := sums[m[2]]; dup {
			return nil, fmt.Errorf("line %d: %s listed twice", n, m[2])
		}
		sums[m[2]] = m[1]
	}
	return sums, s.Err()
}
