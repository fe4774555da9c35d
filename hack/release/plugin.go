// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Names inside a plugin archive: krew links kubectl-lifeboat onto PATH, and kubectl runs
// kubectl_complete-lifeboat to complete the plugin's arguments.
const (
	pluginBinary     = "kubectl-lifeboat"
	pluginCompletion = "kubectl_complete-lifeboat"
	krewManifest     = "lifeboat.yaml"
)

// pluginArchive is the release asset of one platform's plugin, e.g.
// kubectl-lifeboat_linux_arm64.tar.gz; its SBOM is the same name with .spdx.json.
func pluginArchive(p v1.Platform) string {
	return pluginBinary + "_" + p.OS + "_" + p.Architecture + ".tar.gz"
}

func pluginSBOM(p v1.Platform) string {
	return strings.TrimSuffix(pluginArchive(p), ".tar.gz") + ".spdx.json"
}

// pluginSpec is what `release plugin` writes from: the binaries, the completion script, the
// krew manifest's template, and the stamp every archive and SBOM carries.
type pluginSpec struct {
	image       imageSpec // version, created and source, as for the image
	completion  string
	template    string
	downloadURL string // where the release's assets are downloaded from, without the file name
}

func (s pluginSpec) validate() error {
	var errs []error
	if len(s.image.binaries) == 0 {
		errs = append(errs, errors.New("no -binary given: at least one os/arch=path"))
	}
	seen := map[string]bool{}
	for _, b := range s.image.binaries {
		if seen[b.platform.String()] {
			errs = append(errs, fmt.Errorf("-binary: platform %s given twice", b.platform.String()))
		}
		seen[b.platform.String()] = true
	}
	for flag, v := range map[string]string{"-version": s.image.version, "-source": s.image.source, "-download-url": s.downloadURL, "-completion": s.completion, "-template": s.template} {
		if v == "" {
			errs = append(errs, fmt.Errorf("%s is empty", flag))
		}
	}
	if s.image.created.IsZero() {
		errs = append(errs, errors.New("-created is empty (the commit's time, RFC 3339)"))
	}
	return errors.Join(errs...)
}

// writePlugin writes, into out, each platform's archive (the binary as kubectl-lifeboat and
// the completion script, owned by root and dated at the commit, so two builds give the same
// bytes), its SBOM, and the krew manifest naming every archive by URL and SHA-256.
func writePlugin(out string, s pluginSpec) error {
	if err := s.validate(); err != nil {
		return err
	}
	completion, err := os.ReadFile(s.completion)
	if err != nil {
		return fmt.Errorf("-completion: %w", err)
	}
	tmpl, err := os.ReadFile(s.template)
	if err != nil {
		return fmt.Errorf("-template: %w", err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("-out %s: %w", out, err)
	}
	sums := map[string]string{}
	for _, b := range s.image.binaries {
		if b.platform.Variant != "" {
			return fmt.Errorf("-binary %s: krew names platforms by os and arch only", b.platform.String())
		}
		sum, err := writePluginArchive(out, s, b, completion)
		if err != nil {
			return fmt.Errorf("-binary %s=%s: %w", b.platform.String(), b.path, err)
		}
		sums[b.platform.String()] = sum
	}
	manifest, err := fillKrewManifest(tmpl, s.image.version, s.downloadURL, sums)
	if err != nil {
		return fmt.Errorf("-template %s: %w", s.template, err)
	}
	return os.WriteFile(filepath.Join(out, krewManifest), manifest, 0o644)
}

// writePluginArchive writes one platform's archive and SBOM and returns the archive's SHA-256.
func writePluginArchive(out string, s pluginSpec, b platformBinary, completion []byte) (string, error) {
	binary, err := os.ReadFile(b.path)
	if err != nil {
		return "", err
	}
	if err := checkExecutable(binary, b.platform); err != nil {
		return "", err
	}
	tarBytes, err := layerTar(s.image.created, []layerFile{
		{name: pluginBinary, mode: 0o755, data: binary},
		{name: pluginCompletion, mode: 0o755, data: completion},
	})
	if err != nil {
		return "", err
	}
	var gz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	if err != nil {
		return "", err
	}
	if _, err := zw.Write(tarBytes); err != nil {
		return "", err
	}
	if err := zw.Close(); err != nil {
		return "", err
	}
	sbom, err := spdxSBOM(s.image, b.platform, binary)
	if err != nil {
		return "", fmt.Errorf("SBOM: %w", err)
	}
	if err := os.WriteFile(filepath.Join(out, pluginArchive(b.platform)), gz.Bytes(), 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(out, pluginSBOM(b.platform)), sbom, 0o644); err != nil {
		return "", err
	}
	sum := sha256.Sum256(gz.Bytes())
	return hex.EncodeToString(sum[:]), nil
}

// fillKrewManifest replaces the template's placeholders: ${VERSION}, and ${URI_<OS>_<ARCH>}
// and ${SHA256_<OS>_<ARCH>} for each platform built (sums: os/arch → the archive's SHA-256). A placeholder without a value, or a
// platform the template does not name, is refused: a manifest must install every archive
// and nothing else.
func fillKrewManifest(tmpl []byte, version, downloadURL string, sums map[string]string) ([]byte, error) {
	values := map[string]string{"VERSION": version}
	for platform, sum := range sums {
		p, err := v1.ParsePlatform(platform)
		if err != nil {
			return nil, err
		}
		key := strings.ToUpper(p.OS + "_" + p.Architecture)
		values["URI_"+key] = strings.TrimSuffix(downloadURL, "/") + "/" + pluginArchive(*p)
		values["SHA256_"+key] = sum
	}
	used := map[string]bool{}
	var unknown []string
	out := os.Expand(string(tmpl), func(name string) string {
		v, ok := values[name]
		if !ok {
			unknown = append(unknown, "${"+name+"}")
		}
		used[name] = true
		return v
	})
	var errs []error
	if len(unknown) > 0 {
		errs = append(errs, fmt.Errorf("no value for %s (no archive built for that platform?)", strings.Join(unknown, ", ")))
	}
	var unused []string
	for name := range values {
		if !used[name] {
			unused = append(unused, "${"+name+"}")
		}
	}
	sort.Strings(unused)
	if len(unused) > 0 {
		errs = append(errs, fmt.Errorf("no placeholder %s: the manifest would not install that archive", strings.Join(unused, ", ")))
	}
	return []byte(out), errors.Join(errs...)
}
