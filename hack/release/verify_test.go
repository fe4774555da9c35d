// SPDX-License-Identifier: Apache-2.0

package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"go.yaml.in/yaml/v3"
)

// The stand-in release: its version, and a binary stamped with it the way make stamps
// Lifeboat's, which prints it as `lifeboat version` does.
const (
	fixtureVersion = "v0.1.0"
	stampedSource  = `package main

import (
	"fmt"
	"os"

	"lifeboat.dev/lifeboat/internal/version"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "version" {
		fmt.Println("lifeboat " + version.Version + " commit 0123 committed 2026-01-02T03:04:05+01:00 go linux")
	}
}
`
)

var (
	stampedOnce sync.Once
	stampedDir  string
	stampedErr  error
)

// stampedFixture builds the stand-in for the host's linux platform, static, -trimpath, with
// the version stamped by -X as the Makefile does.
func stampedFixture(t *testing.T) string {
	t.Helper()
	stampedOnce.Do(func() {
		if stampedDir, stampedErr = os.MkdirTemp("", "release-stamped-"); stampedErr != nil {
			return
		}
		files := map[string]string{
			"go.mod":                      "module lifeboat.dev/lifeboat\n\ngo 1.26.0\n",
			"main.go":                     stampedSource,
			"internal/version/version.go": "package version\n\nvar Version = \"dev\"\n",
		}
		for name, content := range files {
			path := filepath.Join(stampedDir, "src", name)
			if stampedErr = os.MkdirAll(filepath.Dir(path), 0o755); stampedErr != nil {
				return
			}
			if stampedErr = os.WriteFile(path, []byte(content), 0o644); stampedErr != nil {
				return
			}
		}
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags",
			"-s -w -X lifeboat.dev/lifeboat/internal/version.Version="+fixtureVersion, "-o", filepath.Join(stampedDir, "lifeboat"), ".")
		cmd.Dir = filepath.Join(stampedDir, "src")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH, "GOFLAGS=-buildvcs=false")
		if out, err := cmd.CombinedOutput(); err != nil {
			stampedErr = &buildError{err: err, out: string(out)}
		}
	})
	if stampedErr != nil {
		t.Fatal(stampedErr)
	}
	return filepath.Join(stampedDir, "lifeboat")
}

func hostPlatform() string { return "linux/" + runtime.GOARCH }

// hostKrewTemplate is deploy/krew's template reduced to the host's platform, as a release
// built for that platform only would need it.
func hostKrewTemplate(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "krew", "lifeboat.yaml.tmpl"))
	if err != nil {
		t.Fatal(err)
	}
	head, _, ok := strings.Cut(string(data), "  platforms:\n")
	if !ok {
		t.Fatal("deploy/krew/lifeboat.yaml.tmpl has no platforms: list")
	}
	key := strings.ToUpper("linux_" + runtime.GOARCH)
	tmpl := head + "  platforms:\n    - selector:\n        matchLabels: {os: linux, arch: " + runtime.GOARCH + "}\n" +
		"      uri: ${URI_" + key + "}\n      sha256: ${SHA256_" + key + "}\n      bin: kubectl-lifeboat\n"
	path := filepath.Join(t.TempDir(), "lifeboat.yaml.tmpl")
	if err := os.WriteFile(path, []byte(tmpl), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// writeChartArchive writes what helm package would for the chart at version: its Chart.yaml
// and its values.yaml with image.tag set to tag (TestPackageChart runs helm itself).
func writeChartArchive(t *testing.T, path, version, tag string) {
	t.Helper()
	values, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "chart", "lifeboat", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if values, err = fillImageTag(values, tag); err != nil {
		t.Fatal(err)
	}
	chart := "apiVersion: v2\nname: lifeboat\nversion: " + version + "\nappVersion: \"" + version + "\"\n"
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, f := range []struct{ name, data string }{{"lifeboat/Chart.yaml", chart}, {"lifeboat/values.yaml", string(values)}} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: 0o644, Size: int64(len(f.data))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(f.data)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	if err := run(context.Background(), args, &out); err != nil {
		t.Fatalf("release %s: %v", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(out.String())
}

// pluginArgs are `release plugin`'s arguments for the stand-in, for the host's platform.
func pluginArgs(t *testing.T, out, binary string) []string {
	return []string{"plugin", "-out", out, "-binary", hostPlatform() + "=" + binary,
		"-completion", filepath.Join(repoRoot, "deploy", "krew", "kubectl_complete-lifeboat"),
		"-template", hostKrewTemplate(t), "-version", fixtureVersion, "-created", testCommitTime,
		"-source", testSource, "-download-url", testSource + "/releases/download/" + fixtureVersion}
}

// buildFixtureRelease writes a release of the stand-in for the host's platform into dir with
// the same sub-commands make release-artifacts runs (the chart written as helm would).
func buildFixtureRelease(t *testing.T, dir string) {
	t.Helper()
	binary := stampedFixture(t)
	mustRun(t, "image", "-out", filepath.Join(dir, releaseImageDir), "-binary", hostPlatform()+"="+binary, "-agent-binary", hostPlatform()+"="+binary,
		"-version", fixtureVersion, "-revision", testCommit, "-created", testCommitTime, "-source", testSource,
		"-tag", strings.TrimPrefix(fixtureVersion, "v"))
	mustRun(t, pluginArgs(t, dir, binary)...)
	digest := mustRun(t, "digest", "-layout", filepath.Join(dir, releaseImageDir))
	version := strings.TrimPrefix(fixtureVersion, "v")
	writeChartArchive(t, filepath.Join(dir, chartArchive(version)), version, version+"@"+digest)
	mustRun(t, "checksums", "-dir", dir)
}

func verifyArgs(dir string) []string {
	return []string{"verify", "-dir", dir, "-version", fixtureVersion, "-image-platform", hostPlatform(),
		"-plugin-platform", hostPlatform(), "-repository", "ghcr.io/lifeboat-dev/lifeboat"}
}

// TestVerifyRelease builds a small release and verifies it, then breaks one part at a time:
// verify refuses each, naming the file and what disagrees.
func TestVerifyRelease(t *testing.T) {
	good := t.TempDir()
	buildFixtureRelease(t, good)
	if out := mustRun(t, verifyArgs(good)...); !strings.Contains(out, "agree") {
		t.Errorf("verify printed %q", out)
	}
	version := strings.TrimPrefix(fixtureVersion, "v")
	zeros := "sha256:" + strings.Repeat("0", 64)
	tests := []struct {
		name   string
		tamper func(t *testing.T, dir string)
		want   []string
	}{
		{"the chart names another image", func(t *testing.T, dir string) {
			writeChartArchive(t, filepath.Join(dir, chartArchive(version)), version, version+"@"+zeros)
			mustRun(t, "checksums", "-dir", dir)
		}, []string{chartArchive(version) + ": image.tag is \"" + version + "@" + zeros + "\""}},
		{"a file changed after the checksums", func(t *testing.T, dir string) {
			appendTo(t, filepath.Join(dir, krewManifest), "\n")
		}, []string{"SHA256SUMS: lifeboat.yaml has sha256"}},
		{"a file the checksums do not cover", func(t *testing.T, dir string) {
			appendTo(t, filepath.Join(dir, "notes.txt"), "left over")
		}, []string{"SHA256SUMS does not list notes.txt", "notes.txt: not part of release"}},
		{"the krew manifest names another archive", func(t *testing.T, dir string) {
			replaceIn(t, filepath.Join(dir, krewManifest), "sha256: ", "sha256: 00")
			mustRun(t, "checksums", "-dir", dir)
		}, []string{"lifeboat.yaml: " + hostPlatform() + ": sha256 00"}},
		{"the SBOM misses the Go version", func(t *testing.T, dir string) {
			replaceIn(t, filepath.Join(dir, pluginSBOM(mustPlatform(t, hostPlatform()))), `"versionInfo": "go`, `"versionInfo": "gox`)
			mustRun(t, "checksums", "-dir", dir)
		}, []string{"lists stdlib at \"gox"}},
		{"the plugin's binary is not the image's", func(t *testing.T, dir string) {
			other := filepath.Join(t.TempDir(), "lifeboat")
			data, err := os.ReadFile(stampedFixture(t))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(other, append(data, 0), 0o755); err != nil {
				t.Fatal(err)
			}
			mustRun(t, pluginArgs(t, dir, other)...)
			mustRun(t, "checksums", "-dir", dir)
		}, []string{"differs from the image's " + hostPlatform() + " binary"}},
		{"an image blob changed", func(t *testing.T, dir string) {
			blobs, err := filepath.Glob(filepath.Join(dir, releaseImageDir, "blobs", "sha256", "*"))
			if err != nil || len(blobs) == 0 {
				t.Fatalf("no blobs: %v", err)
			}
			appendTo(t, blobs[0], " ")
		}, []string{"holds content of sha256"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "release")
			if err := copyDir(good, dir); err != nil {
				t.Fatal(err)
			}
			tc.tamper(t, dir)
			err := run(context.Background(), verifyArgs(dir), &bytes.Buffer{})
			if err == nil {
				t.Fatal("verify passed")
			}
			t.Log(err)
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("verify: %v\nwant an error containing %q", err, w)
				}
			}
		})
	}
	t.Run("another version", func(t *testing.T) {
		args := verifyArgs(good)
		args[4] = "v0.2.0"
		err := run(context.Background(), args, &bytes.Buffer{})
		for _, w := range []string{"lifeboat-0.2.0.tgz", "the index says version \"v0.1.0\", want \"v0.2.0\"", "lifeboat-0.1.0.tgz: not part of release v0.2.0"} {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("verify -version v0.2.0: %v\nwant an error containing %q", err, w)
			}
		}
	})
}

func mustPlatform(t *testing.T, s string) v1.Platform {
	t.Helper()
	p, err := v1.ParsePlatform(s)
	if err != nil {
		t.Fatal(err)
	}
	return *p
}

func appendTo(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func replaceIn(t *testing.T, path, old, new string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte(old)) {
		t.Fatalf("%s holds no %q", path, old)
	}
	if err := os.WriteFile(path, bytes.Replace(data, []byte(old), []byte(new), 1), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestPluginArchivesReproducible: two runs of `release plugin` write the same bytes.
func TestPluginArchivesReproducible(t *testing.T) {
	binary := stampedFixture(t)
	a, b := t.TempDir(), t.TempDir()
	mustRun(t, pluginArgs(t, a, binary)...)
	mustRun(t, pluginArgs(t, b, binary)...)
	fa, fb := layoutFiles(t, a), layoutFiles(t, b)
	if len(fa) != 3 {
		t.Errorf("plugin wrote %v, want an archive, its SBOM and lifeboat.yaml", sortedKeys(fa))
	}
	for name, data := range fa {
		if !bytes.Equal(data, fb[name]) {
			t.Errorf("%s differs between two runs", name)
		}
	}
}

// TestKrewManifest fills the real template for the four platforms a release builds: each
// names its archive in the release's downloads and its sum; a platform left out, or one the
// template does not name, is refused.
func TestKrewManifest(t *testing.T) {
	tmpl, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "krew", "lifeboat.yaml.tmpl"))
	if err != nil {
		t.Fatal(err)
	}
	sums := map[string]string{}
	for i, p := range []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64"} {
		sums[p] = strings.Repeat(string(rune('a'+i)), 64)
	}
	url := testSource + "/releases/download/v0.1.0"
	out, err := fillKrewManifest(tmpl, "v0.1.0", url, sums)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Spec struct {
			Version   string `yaml:"version"`
			Platforms []struct {
				Selector struct {
					MatchLabels map[string]string `yaml:"matchLabels"`
				} `yaml:"selector"`
				URI    string `yaml:"uri"`
				SHA256 string `yaml:"sha256"`
			} `yaml:"platforms"`
		} `yaml:"spec"`
	}
	if err := yaml.Unmarshal(out, &m); err != nil {
		t.Fatal(err)
	}
	if m.Spec.Version != "v0.1.0" || len(m.Spec.Platforms) != 4 {
		t.Fatalf("version %q, %d platforms; want v0.1.0 and 4", m.Spec.Version, len(m.Spec.Platforms))
	}
	for _, pl := range m.Spec.Platforms {
		p := v1.Platform{OS: pl.Selector.MatchLabels["os"], Architecture: pl.Selector.MatchLabels["arch"]}
		if pl.URI != url+"/"+pluginArchive(p) || pl.SHA256 != sums[p.String()] {
			t.Errorf("%s: uri %s sha256 %s, want %s and %s", p, pl.URI, pl.SHA256, url+"/"+pluginArchive(p), sums[p.String()])
		}
	}
	delete(sums, "darwin/arm64")
	if _, err := fillKrewManifest(tmpl, "v0.1.0", url, sums); err == nil || !strings.Contains(err.Error(), "${URI_DARWIN_ARM64}") {
		t.Errorf("a platform not built: %v, want the placeholder named", err)
	}
	sums["windows/amd64"] = strings.Repeat("f", 64)
	if _, err := fillKrewManifest(tmpl, "v0.1.0", url, sums); err == nil || !strings.Contains(err.Error(), "no placeholder ${SHA256_WINDOWS_AMD64}") {
		t.Errorf("a platform the template does not name: %v, want it named", err)
	}
}

// TestSBOMCheck: the SBOM written for a binary passes; one module missing, one more, another
// version or another binary's sum each fail, naming the module.
func TestSBOMCheck(t *testing.T) {
	info := &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Main:      debug.Module{Path: "lifeboat.dev/lifeboat", Version: "(devel)"},
		Deps: []*debug.Module{
			{Path: "k8s.io/client-go", Version: "v0.34.1"},
			{Path: "example.com/old", Version: "v0.1.0", Replace: &debug.Module{Path: "example.com/fork", Version: "v0.1.1"}},
		},
	}
	spec := imageSpec{version: "v0.1.0", source: testSource}
	doc, err := spdxFor(spec, v1.Platform{OS: "linux", Architecture: "amd64"}, info, "00ff")
	if err != nil {
		t.Fatal(err)
	}
	if err := checkSBOMAgainst(doc, info, "00ff", "v0.1.0"); err != nil {
		t.Fatalf("the SBOM written for the binary: %v", err)
	}
	more := *info
	more.Deps = append(append([]*debug.Module(nil), info.Deps...), &debug.Module{Path: "example.com/new", Version: "v1.0.0"})
	fewer := *info
	fewer.Deps = info.Deps[:1]
	other := *info
	other.Deps = []*debug.Module{{Path: "k8s.io/client-go", Version: "v0.34.2"}, info.Deps[1]}
	for _, tc := range []struct {
		name string
		info *debug.BuildInfo
		sum  string
		want string
	}{
		{"a module the SBOM lacks", &more, "00ff", "lists example.com/new at \"\", the binary links \"v1.0.0\""},
		{"a module the binary lacks", &fewer, "00ff", "lists example.com/fork, which the binary does not link"},
		{"another version", &other, "00ff", "lists k8s.io/client-go at \"v0.34.1\", the binary links \"v0.34.2\""},
		{"another binary", info, "0fff", "is not the binary's sha256 0fff"},
	} {
		if err := checkSBOMAgainst(doc, tc.info, tc.sum, "v0.1.0"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

// helmBinary is the helm to package with: HELM, the sandbox's, or PATH's.
func helmBinary(t *testing.T) string {
	t.Helper()
	candidates := []string{os.Getenv("HELM")}
	if dir := os.Getenv("LIFEBOAT_TOOLS_BIN"); dir != "" {
		candidates = append(candidates, filepath.Join(dir, "helm"))
	}
	if p, err := exec.LookPath("helm"); err == nil {
		candidates = append(candidates, p)
	}
	for _, c := range candidates {
		if fi, err := os.Stat(c); c != "" && err == nil && fi.Mode()&0o111 != 0 {
			return c
		}
	}
	if os.Getenv("LIFEBOAT_REQUIRE_SANDBOX") != "" {
		t.Fatal("no helm: set HELM or LIFEBOAT_TOOLS_BIN (make sandbox builds it)")
	}
	t.Skip("no helm (HELM, LIFEBOAT_TOOLS_BIN or PATH)")
	return ""
}

// TestPackageChart packages the repository's chart with helm as a release does: the archive
// names the layout's index by digest in image.tag, at the release's version, and verify's
// chart check accepts it; the chart in the repository is left as it is.
func TestPackageChart(t *testing.T) {
	helm := helmBinary(t)
	good, _ := fixtures(t)
	dir := t.TempDir()
	layoutDir := filepath.Join(dir, releaseImageDir)
	mustRun(t, imageArgs(layoutDir, "-binary", hostPlatform()+"="+good, "-agent-binary", hostPlatform()+"="+good)...)
	src := filepath.Join(repoRoot, "deploy", "chart", "lifeboat")
	before, err := os.ReadFile(filepath.Join(src, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	path := mustRun(t, "chart", "-src", src, "-layout", layoutDir, "-version", "0.1.0", "-helm", helm, "-out", dir)
	if path != filepath.Join(dir, "lifeboat-0.1.0.tgz") {
		t.Errorf("chart printed %q", path)
	}
	idx, err := readLayoutIndex(layoutDir)
	if err != nil {
		t.Fatal(err)
	}
	digest, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	c := releaseCheck{dir: dir, version: "v0.1.0", repository: "ghcr.io/lifeboat-dev/lifeboat"}
	if errs := verifyChart(c, digest); len(errs) > 0 {
		t.Errorf("the packaged chart: %v", errs)
	}
	after, err := os.ReadFile(filepath.Join(src, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Error("packaging changed the repository's values.yaml")
	}
	if err := run(context.Background(), []string{"chart", "-src", src, "-layout", layoutDir, "-version", "v0.1.0", "-helm", helm, "-out", dir}, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "no leading v") {
		t.Errorf("chart -version v0.1.0: %v, want it refused", err)
	}
}
