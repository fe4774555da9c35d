// SPDX-License-Identifier: Apache-2.0

package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"go.yaml.in/yaml/v3"
)

// The image layout's directory inside a release directory.
const releaseImageDir = "image"

// releaseCheck is what a release directory must hold: the image layout, the packaged chart,
// each platform's plugin archive and its SBOM, the krew manifest and the checksums, all of
// one version.
type releaseCheck struct {
	dir             string
	version         string // the tag: v0.1.0
	imagePlatforms  []v1.Platform
	pluginPlatforms []v1.Platform
	repository      string // the chart's image.repository; not checked when empty
}

var releaseTag = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`)

// chartVersion is the version without its v: the chart's version and appVersion, and the
// image's tag.
func (c releaseCheck) chartVersion() string { return strings.TrimPrefix(c.version, "v") }

func (c releaseCheck) path(name string) string { return filepath.Join(c.dir, name) }

// verifyRelease checks every part of a release directory against the others and returns the
// index digest. Every problem is reported, each naming its file: the chart names the layout's
// index by digest, each binary is its platform's and carries the version, each SBOM lists its
// binary's modules, the plugin's linux binaries are the image's, the krew manifest names
// each archive by its SHA-256, and the checksums cover every file and match.
func verifyRelease(c releaseCheck) (v1.Hash, error) {
	if !releaseTag.MatchString(c.version) {
		return v1.Hash{}, fmt.Errorf("-version %q is not a release tag (v<major>.<minor>.<patch>)", c.version)
	}
	if len(c.imagePlatforms) == 0 || len(c.pluginPlatforms) == 0 {
		return v1.Hash{}, errors.New("no -image-platform or no -plugin-platform: name what the release builds")
	}
	digest, binaries, errs := verifyImageLayout(c)
	errs = append(errs, verifyChart(c, digest)...)
	sums, pluginErrs := verifyPlugins(c, binaries)
	errs = append(errs, pluginErrs...)
	errs = append(errs, verifyKrew(c, sums)...)
	errs = append(errs, verifyChecksums(c)...)
	errs = append(errs, verifyNothingElse(c)...)
	return digest, errors.Join(errs...)
}

// verifyImageLayout checks the layout's blobs, its one index and each platform's image, and
// returns the index digest and each platform's binary.
func verifyImageLayout(c releaseCheck) (v1.Hash, map[string][]byte, []error) {
	dir := c.path(releaseImageDir)
	errs := verifyBlobs(dir)
	idx, err := readLayoutIndex(dir)
	if err != nil {
		return v1.Hash{}, nil, append(errs, err)
	}
	digest, err := idx.Digest()
	if err != nil {
		return v1.Hash{}, nil, append(errs, err)
	}
	root, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return digest, nil, append(errs, err)
	}
	rm, err := root.IndexManifest()
	if err != nil {
		return digest, nil, append(errs, err)
	}
	if got := rm.Manifests[0].Annotations[labelRefName]; got != c.chartVersion() {
		errs = append(errs, fmt.Errorf("%s: the layout names the index %q, want the image tag %q", dir, got, c.chartVersion()))
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return digest, nil, append(errs, err)
	}
	if got := m.Annotations[labelVersion]; got != c.version {
		errs = append(errs, fmt.Errorf("%s: the index says version %q, want %q", dir, got, c.version))
	}
	var platforms []string
	binaries := map[string][]byte{}
	for _, d := range m.Manifests {
		if d.Platform == nil {
			errs = append(errs, fmt.Errorf("%s: manifest %s names no platform", dir, d.Digest))
			continue
		}
		platforms = append(platforms, d.Platform.String())
		img, err := idx.Image(d.Digest)
		if err == nil {
			binaries[d.Platform.String()], err = verifyImage(c, img, *d.Platform)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %s image: %w", dir, d.Platform, err))
		}
	}
	if want := platformNames(c.imagePlatforms); !slices.Equal(sorted(platforms), want) {
		errs = append(errs, fmt.Errorf("%s: the index holds %v, want %v", dir, platforms, want))
	}
	return digest, binaries, errs
}

// verifyImage checks one platform's image: its labels, its one layer, the binary in it and
// the SBOM beside the binary; it returns the binary.
func verifyImage(c releaseCheck, img v1.Image, p v1.Platform) ([]byte, error) {
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	var errs []error
	if got := cf.Config.Labels[labelVersion]; got != c.version {
		errs = append(errs, fmt.Errorf("label %s is %q, want %q", labelVersion, got, c.version))
	}
	if cf.OS != p.OS || cf.Architecture != p.Architecture {
		errs = append(errs, fmt.Errorf("config says %s/%s", cf.OS, cf.Architecture))
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	if len(layers) != 1 {
		return nil, fmt.Errorf("%d layers, want 1", len(layers))
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	files, err := tarFiles(rc)
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	binary := files[binaryPath].data
	if err := checkReleaseBinary(binary, p, c.version); err != nil {
		errs = append(errs, fmt.Errorf("/%s: %w", binaryPath, err))
	}
	if err := checkSBOMNamesBinary(files[sbomPath].data, binary, c.version); err != nil {
		errs = append(errs, fmt.Errorf("/%s: %w", sbomPath, err))
	}
	agent := files[agentBinaryPath].data
	if err := checkReleaseBinary(agent, p, c.version); err != nil {
		errs = append(errs, fmt.Errorf("/%s: %w", agentBinaryPath, err))
	}
	if err := checkSBOMNamesBinary(files[agentSBOMPath].data, agent, c.version); err != nil {
		errs = append(errs, fmt.Errorf("/%s: %w", agentSBOMPath, err))
	}
	return binary, errors.Join(errs...)
}

// verifyBlobs checks that each blob of a layout hashes to its name: the layout is content
// addressed, and nothing else lists its files' sums.
func verifyBlobs(dir string) []error {
	blobs := filepath.Join(dir, "blobs", "sha256")
	entries, err := os.ReadDir(blobs)
	if err != nil {
		return []error{fmt.Errorf("%s: %w", dir, err)}
	}
	var errs []error
	for _, e := range entries {
		sum, err := fileSHA256(filepath.Join(blobs, e.Name()))
		if err != nil {
			errs = append(errs, err)
		} else if sum != e.Name() {
			errs = append(errs, fmt.Errorf("%s: blob %s holds content of sha256 %s", dir, e.Name(), sum))
		}
	}
	return errs
}

// verifyChart checks the packaged chart: its version and appVersion are the release's, and
// its image.tag names the layout's index by digest.
func verifyChart(c releaseCheck, digest v1.Hash) []error {
	path := c.path(chartArchive(c.chartVersion()))
	f, err := os.Open(path)
	if err != nil {
		return []error{err}
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return []error{fmt.Errorf("%s: %w", path, err)}
	}
	files, err := tarFiles(zr)
	if err != nil {
		return []error{fmt.Errorf("%s: %w", path, err)}
	}
	var chart struct {
		Name       string `yaml:"name"`
		Version    string `yaml:"version"`
		AppVersion string `yaml:"appVersion"`
	}
	var values struct {
		Image struct {
			Repository string `yaml:"repository"`
			Tag        string `yaml:"tag"`
		} `yaml:"image"`
	}
	var errs []error
	for name, v := range map[string]any{"lifeboat/Chart.yaml": &chart, "lifeboat/values.yaml": &values} {
		if files[name].data == nil {
			errs = append(errs, fmt.Errorf("%s: no %s", path, name))
		} else if err := yaml.Unmarshal(files[name].data, v); err != nil {
			errs = append(errs, fmt.Errorf("%s: %s: %w", path, name, err))
		}
	}
	want := c.chartVersion()
	if chart.Name != "lifeboat" || chart.Version != want || chart.AppVersion != want {
		errs = append(errs, fmt.Errorf("%s: chart %s version %q appVersion %q, want lifeboat %q for both", path, chart.Name, chart.Version, chart.AppVersion, want))
	}
	if tag := want + "@" + digest.String(); values.Image.Tag != tag {
		errs = append(errs, fmt.Errorf("%s: image.tag is %q, want %q: the image layout's index", path, values.Image.Tag, tag))
	}
	if c.repository != "" && values.Image.Repository != c.repository {
		errs = append(errs, fmt.Errorf("%s: image.repository is %q, want %q", path, values.Image.Repository, c.repository))
	}
	return errs
}

// verifyPlugins checks each platform's archive and SBOM and returns the archives' sums. A
// linux archive must hold the very binary of the image for that platform.
func verifyPlugins(c releaseCheck, imageBinaries map[string][]byte) (map[string]string, []error) {
	sums := map[string]string{}
	var errs []error
	for _, p := range c.pluginPlatforms {
		path := c.path(pluginArchive(p))
		data, err := os.ReadFile(path)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		sum := sha256.Sum256(data)
		sums[p.String()] = hex.EncodeToString(sum[:])
		binary, err := readPluginArchive(data)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", path, err))
			continue
		}
		if err := checkReleaseBinary(binary, p, c.version); err != nil {
			errs = append(errs, fmt.Errorf("%s: %s: %w", path, pluginBinary, err))
		}
		if img, ok := imageBinaries[p.String()]; ok && !bytes.Equal(img, binary) {
			errs = append(errs, fmt.Errorf("%s: %s differs from the image's %s binary: one release, one binary per platform", path, pluginBinary, p))
		}
		sbom, err := os.ReadFile(c.path(pluginSBOM(p)))
		if err == nil {
			err = checkSBOMNamesBinary(sbom, binary, c.version)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.path(pluginSBOM(p)), err))
		}
	}
	return sums, errs
}

// readPluginArchive returns the binary of a plugin archive, which must hold the binary and
// the completion script, both executable, and nothing else.
func readPluginArchive(data []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	files, err := tarFiles(zr)
	if err != nil {
		return nil, err
	}
	if names := sortedKeys(files); !slices.Equal(names, []string{pluginBinary, pluginCompletion}) {
		return nil, fmt.Errorf("holds %v, want %s and %s", names, pluginBinary, pluginCompletion)
	}
	for name, f := range files {
		if f.mode&0o111 != 0o111 {
			return nil, fmt.Errorf("%s has mode %o, want it executable", name, f.mode)
		}
	}
	return files[pluginBinary].data, nil
}

// verifyKrew checks the krew manifest: the release's version, and for each platform built,
// the URL of its archive in this release and the archive's SHA-256, and no other platform.
func verifyKrew(c releaseCheck, sums map[string]string) []error {
	path := c.path(krewManifest)
	var m struct {
		Kind string `yaml:"kind"`
		Spec struct {
			Version   string `yaml:"version"`
			Platforms []struct {
				Selector struct {
					MatchLabels map[string]string `yaml:"matchLabels"`
				} `yaml:"selector"`
				URI    string `yaml:"uri"`
				SHA256 string `yaml:"sha256"`
				Bin    string `yaml:"bin"`
			} `yaml:"platforms"`
		} `yaml:"spec"`
	}
	data, err := os.ReadFile(path)
	if err == nil {
		err = yaml.Unmarshal(data, &m)
	}
	if err != nil {
		return []error{fmt.Errorf("%s: %w", path, err)}
	}
	var errs []error
	if m.Kind != "Plugin" || m.Spec.Version != c.version {
		errs = append(errs, fmt.Errorf("%s: %s version %q, want a Plugin of version %q", path, m.Kind, m.Spec.Version, c.version))
	}
	var named []string
	for _, pl := range m.Spec.Platforms {
		p := v1.Platform{OS: pl.Selector.MatchLabels["os"], Architecture: pl.Selector.MatchLabels["arch"]}
		named = append(named, p.String())
		if want := "/" + c.version + "/" + pluginArchive(p); !strings.HasSuffix(pl.URI, want) {
			errs = append(errs, fmt.Errorf("%s: %s: uri %q, want one ending %s", path, p, pl.URI, want))
		}
		if sum, ok := sums[p.String()]; ok && pl.SHA256 != sum {
			errs = append(errs, fmt.Errorf("%s: %s: sha256 %s, the archive %s has %s", path, p, pl.SHA256, pluginArchive(p), sum))
		}
		if pl.Bin != pluginBinary {
			errs = append(errs, fmt.Errorf("%s: %s: bin %q, want %s", path, p, pl.Bin, pluginBinary))
		}
	}
	if want := platformNames(c.pluginPlatforms); !slices.Equal(sorted(named), want) {
		errs = append(errs, fmt.Errorf("%s: names platforms %v, want %v", path, named, want))
	}
	return errs
}

// verifyChecksums checks that SHA256SUMS lists every file of the release once, with its sum.
func verifyChecksums(c releaseCheck) []error {
	path := c.path(checksumsFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return []error{err}
	}
	sums, err := readChecksums(data)
	if err != nil {
		return []error{fmt.Errorf("%s: %w", path, err)}
	}
	files, err := releaseFiles(c.dir)
	if err != nil {
		return []error{err}
	}
	var errs []error
	for _, name := range files {
		want, ok := sums[name]
		if !ok {
			errs = append(errs, fmt.Errorf("%s does not list %s", path, name))
			continue
		}
		delete(sums, name)
		got, err := fileSHA256(c.path(name))
		switch {
		case err != nil:
			errs = append(errs, err)
		case got != want:
			errs = append(errs, fmt.Errorf("%s: %s has sha256 %s, listed as %s", path, name, got, want))
		}
	}
	for _, name := range sortedKeys(sums) {
		errs = append(errs, fmt.Errorf("%s lists %s, which the release does not hold", path, name))
	}
	return errs
}

// verifyNothingElse refuses files a release does not publish: a leftover of another version
// would be uploaded with it.
func verifyNothingElse(c releaseCheck) []error {
	want := map[string]bool{releaseImageDir: true, chartArchive(c.chartVersion()): true, krewManifest: true, checksumsFile: true}
	for _, p := range c.pluginPlatforms {
		want[pluginArchive(p)], want[pluginSBOM(p)] = true, true
	}
	entries, err := os.ReadDir(c.dir)
	if err != nil {
		return []error{err}
	}
	var errs []error
	for _, e := range entries {
		if !want[e.Name()] {
			errs = append(errs, fmt.Errorf("%s: not part of release %s", c.path(e.Name()), c.version))
		}
	}
	return errs
}

// checkReleaseBinary checks that a binary is its platform's, static and without the build
// machine's paths, and carries the release's version. One the host can run is asked for its
// version; another platform's must hold the version's bytes (its symbols are stripped).
func checkReleaseBinary(binary []byte, p v1.Platform, version string) error {
	if len(binary) == 0 {
		return errors.New("missing or empty")
	}
	if err := checkExecutable(binary, p); err != nil {
		return err
	}
	if p.OS != runtime.GOOS || p.Architecture != runtime.GOARCH {
		if !bytes.Contains(binary, []byte(version)) {
			return fmt.Errorf("does not hold the version %s", version)
		}
		return nil
	}
	f, err := os.CreateTemp("", "lifeboat-verify-")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	_, err = f.Write(binary)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o755)
	}
	if err != nil {
		return err
	}
	out, err := exec.Command(f.Name(), "version").Output()
	if err != nil {
		return fmt.Errorf("version: %w", err)
	}
	if want := "lifeboat " + version + " "; !strings.HasPrefix(string(out), want) {
		return fmt.Errorf("version prints %q, want %q…", strings.TrimSpace(string(out)), want)
	}
	return nil
}

// checkSBOMNamesBinary checks that an SPDX document lists exactly the modules the binary was
// linked from, at their versions, the Go version it was built with, and the binary itself,
// by its SHA-256, as the release's version of its main module.
func checkSBOMNamesBinary(doc, binary []byte, version string) error {
	if len(doc) == 0 {
		return errors.New("missing or empty")
	}
	info, err := buildinfo.Read(bytes.NewReader(binary))
	if err != nil {
		return fmt.Errorf("the binary: %w", err)
	}
	sum := sha256.Sum256(binary)
	return checkSBOMAgainst(doc, info, hex.EncodeToString(sum[:]), version)
}

// checkSBOMAgainst checks an SPDX document against the build information of a binary of SHA-256 sum.
func checkSBOMAgainst(doc []byte, info *debug.BuildInfo, sum, version string) error {
	var d spdxDocument
	if err := json.Unmarshal(doc, &d); err != nil {
		return err
	}
	want := map[string]string{info.Main.Path: version, "stdlib": info.GoVersion}
	for _, dep := range info.Deps {
		if dep.Replace != nil {
			dep = dep.Replace
		}
		want[dep.Path] = dep.Version
	}
	got := map[string]string{}
	var errs []error
	for _, p := range d.Packages {
		if _, dup := got[p.Name]; dup {
			errs = append(errs, fmt.Errorf("lists %s twice", p.Name))
		}
		got[p.Name] = p.VersionInfo
		if p.Name == info.Main.Path && (len(p.Checksums) != 1 || p.Checksums[0].ChecksumValue != sum) {
			errs = append(errs, fmt.Errorf("%s's checksum %v is not the binary's sha256 %s", p.Name, p.Checksums, sum))
		}
	}
	for _, name := range sortedKeys(want) {
		if v, ok := got[name]; !ok || v != want[name] {
			errs = append(errs, fmt.Errorf("lists %s at %q, the binary links %q", name, v, want[name]))
		}
	}
	for _, name := range sortedKeys(got) {
		if _, ok := want[name]; !ok {
			errs = append(errs, fmt.Errorf("lists %s, which the binary does not link", name))
		}
	}
	return errors.Join(errs...)
}

type tarEntry struct {
	mode int64
	data []byte
}

// tarFiles reads a tar's regular files by name; anything but files and directories is
// refused, as is a name given twice.
func tarFiles(r io.Reader) (map[string]tarEntry, error) {
	files := map[string]tarEntry{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, nil
		}
		if err != nil {
			return nil, err
		}
		switch h.Typeflag {
		case tar.TypeDir:
			continue
		case tar.TypeReg:
		default:
			return nil, fmt.Errorf("%s: not a regular file or directory", h.Name)
		}
		if _, dup := files[h.Name]; dup {
			return nil, fmt.Errorf("%s twice", h.Name)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		files[h.Name] = tarEntry{mode: h.Mode, data: data}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func platformNames(ps []v1.Platform) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.String())
	}
	return sorted(out)
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}
