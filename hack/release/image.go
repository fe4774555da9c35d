// SPDX-License-Identifier: Apache-2.0

package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// Paths inside the image. The binary sits at the root, as the chart runs it with only args
// (the image's entrypoint supplies the command); the agent's own binary beside it, which
// `lifeboat agent` hands over to. Each binary has its SBOM.
const (
	binaryPath      = "lifeboat"
	agentBinaryPath = "lifeboat-agent"
	caPath          = "etc/ssl/certs/ca-certificates.crt"
	sbomPath        = "usr/share/doc/lifeboat/sbom.spdx.json"
	agentSBOMPath   = "usr/share/doc/lifeboat/lifeboat-agent.spdx.json"
	// The chart's podSecurityContext runs as this user and group; the image says the same, so
	// a runtime without the chart (docker run, another chart) is not root either.
	imageUser = "65532:65532"
)

// OCI annotation keys used as labels, on the index and on each image manifest.
const (
	labelSource   = "org.opencontainers.image.source"
	labelVersion  = "org.opencontainers.image.version"
	labelRevision = "org.opencontainers.image.revision"
	labelLicenses = "org.opencontainers.image.licenses"
	labelCreated  = "org.opencontainers.image.created"
	labelTitle    = "org.opencontainers.image.title"
	labelRefName  = "org.opencontainers.image.ref.name"
)

// platformBinary is one platform's Lifeboat binary.
type platformBinary struct {
	platform v1.Platform
	path     string
}

// imageSpec is everything an image build depends on: the same spec gives the same bytes.
type imageSpec struct {
	binaries []platformBinary
	agents   []platformBinary // lifeboat-agent, one for each of binaries' platforms
	version  string
	revision string
	created  time.Time
	source   string
	licenses string
	tag      string // the layout's ref.name, how `skopeo`/`crane` address the index in the layout
}

// parsePlatformBinary reads "os/arch=path" (or "os/arch/variant=path") of -binary.
func parsePlatformBinary(s string) (platformBinary, error) { return parseFlagBinary("binary", s) }

// parseFlagBinary reads "os/arch=path" of the flag named flagName.
func parseFlagBinary(flagName, s string) (platformBinary, error) {
	p, file, ok := strings.Cut(s, "=")
	if !ok || file == "" {
		return platformBinary{}, fmt.Errorf("-%s %q: want os/arch=path, e.g. linux/arm64=bin/linux_arm64/lifeboat", flagName, s)
	}
	parts := strings.Split(p, "/")
	if len(parts) < 2 || len(parts) > 3 || parts[0] == "" || parts[1] == "" {
		return platformBinary{}, fmt.Errorf("-%s %q: platform %q is not os/arch[/variant]", flagName, s, p)
	}
	pl := v1.Platform{OS: parts[0], Architecture: parts[1]}
	if len(parts) == 3 {
		pl.Variant = parts[2]
	}
	return platformBinary{platform: pl, path: file}, nil
}

func (s imageSpec) validate() error {
	var errs []error
	if len(s.binaries) == 0 {
		errs = append(errs, errors.New("no -binary given: at least one os/arch=path"))
	}
	seen := map[string]bool{}
	for _, b := range s.binaries {
		if seen[b.platform.String()] {
			errs = append(errs, fmt.Errorf("-binary: platform %s given twice", b.platform.String()))
		}
		seen[b.platform.String()] = true
	}
	agents := map[string]bool{}
	for _, a := range s.agents {
		switch p := a.platform.String(); {
		case agents[p]:
			errs = append(errs, fmt.Errorf("-agent-binary: platform %s given twice", p))
		case !seen[p]:
			errs = append(errs, fmt.Errorf("-agent-binary: platform %s has no -binary", p))
		}
		agents[a.platform.String()] = true
	}
	for _, bin := range s.binaries { // in the flags' order: the same input, the same message
		if p := bin.platform.String(); !agents[p] {
			errs = append(errs, fmt.Errorf("-agent-binary: none for platform %s (the agent's own binary, cmd/lifeboat-agent)", p))
			agents[p] = true
		}
	}
	if s.version == "" {
		errs = append(errs, errors.New("-version is empty"))
	}
	if s.revision == "" {
		errs = append(errs, errors.New("-revision is empty (the commit built; run in a git checkout or give COMMIT=...)"))
	}
	if s.created.IsZero() {
		errs = append(errs, errors.New("-created is empty (the commit's time, RFC 3339; run in a git checkout or give COMMIT_TIME=...)"))
	}
	if s.source == "" {
		errs = append(errs, errors.New("-source is empty"))
	}
	return errors.Join(errs...)
}

// labels are the OCI labels of the image config, also set as annotations on the manifests.
func (s imageSpec) labels() map[string]string {
	l := map[string]string{
		labelTitle:    "lifeboat",
		labelSource:   s.source,
		labelVersion:  s.version,
		labelRevision: s.revision,
		labelCreated:  s.created.UTC().Format(time.RFC3339),
	}
	if s.licenses != "" {
		l[labelLicenses] = s.licenses
	}
	return l
}

// buildIndex assembles the multi-platform index, one single-layer image per binary, on an
// empty base. Every time in it (config, history, file times in the layer) is the commit's.
func buildIndex(s imageSpec) (v1.ImageIndex, error) {
	if err := s.validate(); err != nil {
		return nil, err
	}
	ca, err := caBundle()
	if err != nil {
		return nil, err
	}
	// The index lists platforms in a fixed order, whatever order the flags came in.
	bins := append([]platformBinary(nil), s.binaries...)
	sort.Slice(bins, func(i, j int) bool { return bins[i].platform.String() < bins[j].platform.String() })

	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, b := range bins {
		img, err := buildImage(s, b, ca)
		if err != nil {
			return nil, err
		}
		pl := b.platform
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &pl},
		})
	}
	return mutate.Annotations(idx, s.labels()).(v1.ImageIndex), nil
}

// readBinary reads one platform's binary given with the flag flagName, checks it, and writes
// its SBOM.
func readBinary(s imageSpec, flagName string, b platformBinary) (binary, sbom []byte, err error) {
	binary, err = os.ReadFile(b.path)
	if err != nil {
		return nil, nil, fmt.Errorf("-%s %s: %w", flagName, b.platform.String(), err)
	}
	if err := checkExecutable(binary, b.platform); err != nil {
		return nil, nil, fmt.Errorf("-%s %s=%s: %w", flagName, b.platform.String(), b.path, err)
	}
	sbom, err = spdxSBOM(s, b.platform, binary)
	if err != nil {
		return nil, nil, fmt.Errorf("-%s %s=%s: SBOM: %w", flagName, b.platform.String(), b.path, err)
	}
	return binary, sbom, nil
}

// agentFor is the agent's binary of the platform (validate made sure there is one).
func (s imageSpec) agentFor(p v1.Platform) platformBinary {
	for _, a := range s.agents {
		if a.platform.String() == p.String() {
			return a
		}
	}
	return platformBinary{platform: p}
}

func buildImage(s imageSpec, b platformBinary, ca []byte) (v1.Image, error) {
	binary, sbom, err := readBinary(s, "binary", b)
	if err != nil {
		return nil, err
	}
	agent, agentSBOM, err := readBinary(s, "agent-binary", s.agentFor(b.platform))
	if err != nil {
		return nil, err
	}
	tarBytes, err := layerTar(s.created, []layerFile{
		{name: binaryPath, mode: 0o755, data: binary},
		{name: agentBinaryPath, mode: 0o755, data: agent},
		{name: caPath, mode: 0o644, data: ca},
		{name: sbomPath, mode: 0o644, data: sbom},
		{name: agentSBOMPath, mode: 0o644, data: agentSBOM},
	})
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(
		func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(tarBytes)), nil },
		tarball.WithMediaType(types.OCILayer),
		tarball.WithCompressionLevel(gzip.BestCompression),
		tarball.WithCompressedCaching,
	)
	if err != nil {
		return nil, err
	}

	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	created := v1.Time{Time: s.created.UTC()}
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History: v1.History{
			Created:   created,
			CreatedBy: "lifeboat " + s.version + " (hack/release image)",
			Comment:   "the lifeboat and lifeboat-agent binaries, CA roots, SBOMs",
		},
	})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Created = created
	cf.OS = b.platform.OS
	cf.Architecture = b.platform.Architecture
	cf.Variant = b.platform.Variant
	cf.Config = v1.Config{
		Entrypoint: []string{"/" + binaryPath},
		User:       imageUser,
		WorkingDir: "/",
		Env:        []string{"SSL_CERT_FILE=/" + caPath},
		Labels:     s.labels(),
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, err
	}
	return mutate.Annotations(img, s.labels()).(v1.Image), nil
}

// caBundle is the pinned x509roots module's roots as PEM. Roots that carry a constraint (a
// distrust date for certificates issued after it) are left out: a PEM file cannot say it,
// and trusting them without it would trust more than the module does.
func caBundle() ([]byte, error) {
	var buf bytes.Buffer
	for r := range bundle.Roots() {
		if r.Constraint != nil {
			continue
		}
		if err := pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate}); err != nil {
			return nil, err
		}
	}
	if buf.Len() == 0 {
		return nil, errors.New("the x509roots bundle holds no roots")
	}
	return buf.Bytes(), nil
}

type layerFile struct {
	name string
	mode int64
	data []byte
}

// layerTar writes files (and their parent directories) into a tar with fixed owners and
// times, sorted by path, so the same files give the same bytes.
func layerTar(mtime time.Time, files []layerFile) ([]byte, error) {
	mtime = mtime.UTC().Truncate(time.Second)
	entries := map[string]*tar.Header{}
	contents := map[string][]byte{}
	for _, f := range files {
		for dir := path.Dir(f.name); dir != "."; dir = path.Dir(dir) {
			entries[dir+"/"] = &tar.Header{Typeflag: tar.TypeDir, Name: dir + "/", Mode: 0o755, ModTime: mtime}
		}
		entries[f.name] = &tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: f.mode, Size: int64(len(f.data)), ModTime: mtime}
		contents[f.name] = f.data
	}
	names := make([]string, 0, len(entries))
	for n := range entries {
		names = append(names, n)
	}
	sort.Strings(names)

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range names {
		h := entries[n]
		h.Format = tar.FormatPAX
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("layer: %s: %w", n, err)
		}
		if data, ok := contents[n]; ok {
			if _, err := tw.Write(data); err != nil {
				return nil, fmt.Errorf("layer: %s: %w", n, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// checkOut refuses an output directory that holds something other than an OCI layout.
func checkOut(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("-out %s: %w", dir, err)
	case len(entries) == 0:
		return nil
	}
	if _, err := os.Stat(path.Join(dir, "oci-layout")); err != nil {
		return fmt.Errorf("-out %s: the directory is not empty and is not an OCI layout; refusing to replace it", dir)
	}
	return nil
}

// writeLayout writes idx as an OCI image layout at dir, replacing the layout a previous
// build left there. A directory that is neither empty nor a layout is refused, so a wrong
// -out never deletes anything else.
func writeLayout(dir string, idx v1.ImageIndex, tag string) error {
	if err := checkOut(dir); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("-out %s: %w", dir, err)
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("-out %s: %w", dir, err)
	}
	var opts []layout.Option
	if tag != "" {
		opts = append(opts, layout.WithAnnotations(map[string]string{labelRefName: tag}))
	}
	if err := p.AppendIndex(idx, opts...); err != nil {
		return fmt.Errorf("-out %s: %w", dir, err)
	}
	return nil
}
