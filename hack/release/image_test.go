// SPDX-License-Identifier: Apache-2.0

package main

import (
	"archive/tar"
	"bytes"
	"crypto/x509"
	"debug/elf"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"go.yaml.in/yaml/v3"
)

// The stamp the test gives make: a commit time with an offset, which the image states in UTC.
const (
	testVersion    = "v1.2.3-imagetest"
	testCommit     = "0123456789abcdef0123456789abcdef01234567"
	testCommitTime = "2026-01-02T03:04:05+01:00"
	testCreated    = "2026-01-02T02:04:05Z"
	testSource     = "https://github.com/lifeboat-dev/lifeboat"
)

// testPlatforms are the platforms TestMakeImage builds: the host's linux platform, unless
// LIFEBOAT_IMAGE_PLATFORMS names others (make release-dry-run: every platform the image is
// released for, each of which compiles every package once more on a cold build cache).
func testPlatforms() []string {
	if p := strings.Fields(os.Getenv("LIFEBOAT_IMAGE_PLATFORMS")); len(p) > 0 {
		return p
	}
	return []string{"linux/" + runtime.GOARCH}
}

// makeImage runs `make image` (the Makefile's own rule and flags) for platforms into dir.
func makeImage(t *testing.T, dir string, platforms []string) string {
	t.Helper()
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "image")
	args := []string{"-s", "--no-print-directory", "-C", root, "image",
		"BIN=" + filepath.Join(dir, "bin"), "IMAGE_DIR=" + out,
		"VERSION=" + testVersion, "COMMIT=" + testCommit, "COMMIT_TIME=" + testCommitTime,
		"IMAGE_SOURCE=" + testSource, "IMAGE_LICENSES=Apache-2.0", "IMAGE_PLATFORMS=" + strings.Join(platforms, " ")}
	start := time.Now()
	if b, err := exec.Command("make", args...).CombinedOutput(); err != nil {
		t.Fatalf("make %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	t.Logf("make image: %s", time.Since(start).Round(time.Second))
	return out
}

// TestMakeImage builds the image twice from the same commit (the second build from Go's
// build cache) and reads it back: the two layouts are byte-identical, and the index holds an
// image for each platform built that runs the stamped binary as the chart's user, with CA
// roots, labels and an SBOM.
func TestMakeImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the Lifeboat binary")
	}
	platforms := testPlatforms()
	first := makeImage(t, t.TempDir(), platforms)
	second := makeImage(t, t.TempDir(), platforms)

	t.Run("reproducible", func(t *testing.T) {
		a, b := layoutFiles(t, first), layoutFiles(t, second)
		if !slices.Equal(sortedKeys(a), sortedKeys(b)) {
			t.Fatalf("two builds wrote different files:\n%v\n%v", sortedKeys(a), sortedKeys(b))
		}
		for name, data := range a {
			if !bytes.Equal(data, b[name]) {
				t.Errorf("%s differs between two builds of one commit", name)
			}
		}
	})

	idx, err := readLayoutIndex(first)
	if err != nil {
		t.Fatal(err)
	}
	// The layout names the index as the chart's appVersion would: the release without its v.
	root, err := layout.ImageIndexFromPath(first)
	if err != nil {
		t.Fatal(err)
	}
	rm, err := root.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := rm.Manifests[0].Annotations[labelRefName], strings.TrimPrefix(testVersion, "v"); got != want {
		t.Errorf("the layout names the index %q, want %q", got, want)
	}
	wantLabels := map[string]string{
		labelTitle:    "lifeboat",
		labelSource:   testSource,
		labelVersion:  testVersion,
		labelRevision: testCommit,
		labelLicenses: "Apache-2.0",
		labelCreated:  testCreated,
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.MediaType != types.OCIImageIndex {
		t.Errorf("index media type %s, want %s", m.MediaType, types.OCIImageIndex)
	}
	if !mapsEqual(m.Annotations, wantLabels) {
		t.Errorf("index annotations %v, want %v", m.Annotations, wantLabels)
	}
	var built []string
	for _, d := range m.Manifests {
		built = append(built, d.Platform.String())
	}
	if want := sorted(platforms); !slices.Equal(built, want) {
		t.Fatalf("platforms %v, want %v", built, want)
	}

	user := chartUser(t)
	created, _ := time.Parse(time.RFC3339, testCreated)
	for _, d := range m.Manifests {
		t.Run(d.Platform.String(), func(t *testing.T) {
			img, err := idx.Image(d.Digest)
			if err != nil {
				t.Fatal(err)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if cf.OS != d.Platform.OS || cf.Architecture != d.Platform.Architecture {
				t.Errorf("config says %s/%s, the index %s", cf.OS, cf.Architecture, d.Platform)
			}
			if cf.Config.User != user {
				t.Errorf("user %q, want the chart's %q", cf.Config.User, user)
			}
			if want := []string{"/lifeboat"}; !slices.Equal(cf.Config.Entrypoint, want) || len(cf.Config.Cmd) != 0 {
				t.Errorf("entrypoint %q cmd %q, want %q and no cmd (the chart passes only args)", cf.Config.Entrypoint, cf.Config.Cmd, want)
			}
			if !mapsEqual(cf.Config.Labels, wantLabels) {
				t.Errorf("labels %v, want %v", cf.Config.Labels, wantLabels)
			}
			if !cf.Created.Time.Equal(created) {
				t.Errorf("created %s, want the commit's time %s", cf.Created.Time, created)
			}
			for _, h := range cf.History {
				if !h.Created.Time.Equal(created) {
					t.Errorf("history entry created %s, want the commit's time %s", h.Created.Time, created)
				}
			}
			layers, err := img.Layers()
			if err != nil {
				t.Fatal(err)
			}
			if len(layers) != 1 {
				t.Fatalf("%d layers, want 1 (an empty base and one layer)", len(layers))
			}
			files := readLayer(t, layers[0], created)
			checkBinary(t, binaryPath, files[binaryPath], *d.Platform)
			checkBinary(t, agentBinaryPath, files[agentBinaryPath], *d.Platform)
			checkCABundle(t, files[caPath])
			checkSBOM(t, sbomPath, files[sbomPath], *d.Platform, true)
			checkSBOM(t, agentSBOMPath, files[agentSBOMPath], *d.Platform, false)
		})
	}
}

// layoutFiles reads every file of a layout, by path relative to it.
func layoutFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		files[rel], err = os.ReadFile(p)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

// readLayer returns the layer's regular files and checks every entry: owned by root, dated
// at the commit, and exactly the files the image should hold.
func readLayer(t *testing.T, layer v1.Layer, created time.Time) map[string][]byte {
	t.Helper()
	mt, err := layer.MediaType()
	if err != nil {
		t.Fatal(err)
	}
	if mt != types.OCILayer {
		t.Errorf("layer media type %s, want %s", mt, types.OCILayer)
	}
	rc, err := layer.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files := map[string][]byte{}
	var names []string
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s is owned by %d:%d, want root (the user cannot change it)", h.Name, h.Uid, h.Gid)
		}
		if !h.ModTime.Equal(created) {
			t.Errorf("%s dated %s, want the commit's time %s", h.Name, h.ModTime, created)
		}
		if h.Typeflag == tar.TypeReg {
			if files[h.Name], err = io.ReadAll(tr); err != nil {
				t.Fatal(err)
			}
		}
		if (h.Name == binaryPath || h.Name == agentBinaryPath) && h.Mode != 0o755 {
			t.Errorf("%s mode %o, want 755", h.Name, h.Mode)
		}
	}
	want := []string{"etc/", "etc/ssl/", "etc/ssl/certs/", caPath, binaryPath, agentBinaryPath, "usr/", "usr/share/", "usr/share/doc/", "usr/share/doc/lifeboat/", agentSBOMPath, sbomPath}
	if !slices.Equal(names, want) {
		t.Errorf("layer entries %q, want %q", names, want)
	}
	return files
}

// checkBinary: the binary at name is the platform's; the host's one runs and prints the stamp
// make was given (the agent's own binary prints the release's too).
func checkBinary(t *testing.T, name string, binary []byte, p v1.Platform) {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(binary))
	if err != nil {
		t.Fatalf("/%s is not an ELF binary: %v", name, err)
	}
	machine := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[p.Architecture]
	if f.Machine != machine {
		t.Errorf("/%s is built for %s, want %s", name, f.Machine, machine)
	}
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			t.Errorf("/%s needs a dynamic loader; the image has none", name)
		}
	}
	if p.OS != runtime.GOOS || p.Architecture != runtime.GOARCH {
		return
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, binary, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(path, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s version from the image: %v\n%s", name, err, out)
	}
	got := strings.TrimSpace(string(out))
	want := "lifeboat " + testVersion + " commit " + testCommit + " committed " + testCommitTime + " "
	if !strings.HasPrefix(got, want) || !strings.HasSuffix(got, " "+p.OS+"/"+p.Architecture) {
		t.Errorf("%s version from the image = %q, want %q… %s/%s", name, got, want, p.OS, p.Architecture)
	}
}

// checkCABundle: the CA file holds PEM certificates only, among them Amazon's roots.
func checkCABundle(t *testing.T, data []byte) {
	t.Helper()
	if len(data) == 0 {
		t.Fatalf("/%s is missing or empty", caPath)
	}
	subjects := map[string]bool{}
	for rest := data; len(bytes.TrimSpace(rest)) > 0; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil || block.Type != "CERTIFICATE" {
			t.Fatalf("/%s holds something other than PEM certificates", caPath)
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatalf("/%s: %v", caPath, err)
		}
		if !cert.IsCA {
			t.Errorf("/%s: %s is not a CA certificate", caPath, cert.Subject)
		}
		subjects[cert.Subject.CommonName] = true
	}
	for _, cn := range []string{"Amazon Root CA 1", "Amazon Root CA 2", "Amazon Root CA 3", "Amazon Root CA 4", "Starfield Services Root Certificate Authority - G2"} {
		if !subjects[cn] {
			t.Errorf("/%s lacks %q, a root AWS endpoints chain to", caPath, cn)
		}
	}
}

// checkSBOM: the SPDX document at name names the stamped release and the modules the binary
// links, at the versions go.mod requires. The controller's AWS services are in lifeboat's
// (withController) and not in the agent's own binary.
func checkSBOM(t *testing.T, name string, data []byte, p v1.Platform, withController bool) {
	t.Helper()
	var doc spdxDocument
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("/%s: %v", name, err)
	}
	if doc.SPDXVersion != "SPDX-2.3" || doc.CreationInfo.Created != testCreated {
		t.Errorf("SBOM %s created %s, want SPDX-2.3 created %s", doc.SPDXVersion, doc.CreationInfo.Created, testCreated)
	}
	versions := map[string]string{}
	for _, pkg := range doc.Packages {
		versions[pkg.Name] = pkg.VersionInfo
	}
	want := map[string]string{
		"lifeboat.dev/lifeboat": testVersion,
		"stdlib":                runtime.Version(),
		"k8s.io/client-go":      requiredVersion(t, "k8s.io/client-go"),
		"github.com/aws/aws-sdk-go-v2/service/autoscaling": requiredVersion(t, "github.com/aws/aws-sdk-go-v2/service/autoscaling"),
	}
	for _, module := range []string{"github.com/aws/aws-sdk-go-v2/service/sqs", "github.com/aws/aws-sdk-go-v2/service/eks",
		"github.com/aws/aws-sdk-go-v2/service/eventbridge"} {
		if withController {
			want[module] = requiredVersion(t, module)
		} else {
			want[module] = "" // not linked
		}
	}
	for module, v := range want {
		if versions[module] != v {
			t.Errorf("/%s of %s lists %s at %q, want %q", name, p, module, versions[module], v)
		}
	}
}

// requiredVersion reads a module's version from the main go.mod's require lines.
func requiredVersion(t *testing.T, module string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == module {
			return f[1]
		}
	}
	t.Fatalf("go.mod does not require %s", module)
	return ""
}

// chartUser is the user:group the chart runs Lifeboat as, from the rendered manifests (a
// deploy test keeps them equal to the chart). Both workloads must agree, and neither may set
// a command: the chart relies on the image's entrypoint.
func chartUser(t *testing.T) string {
	t.Helper()
	user := ""
	for _, file := range []string{"agent.yaml", "controller.yaml"} {
		path := filepath.Join(repoRoot, "deploy", "manifests", file)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(data))
		for {
			var obj struct {
				Kind string `yaml:"kind"`
				Spec struct {
					Template struct {
						Spec struct {
							SecurityContext struct {
								RunAsUser  *int64 `yaml:"runAsUser"`
								RunAsGroup *int64 `yaml:"runAsGroup"`
							} `yaml:"securityContext"`
							Containers []struct {
								Name    string   `yaml:"name"`
								Command []string `yaml:"command"`
								Args    []string `yaml:"args"`
							} `yaml:"containers"`
						} `yaml:"spec"`
					} `yaml:"template"`
				} `yaml:"spec"`
			}
			if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			if obj.Kind != "DaemonSet" && obj.Kind != "Deployment" {
				continue
			}
			pod := obj.Spec.Template.Spec
			for _, c := range pod.Containers {
				if len(c.Command) != 0 {
					t.Errorf("%s: %s container %s sets command %q: the image's entrypoint would not run", path, obj.Kind, c.Name, c.Command)
				}
				if len(c.Args) == 0 {
					t.Errorf("%s: %s container %s passes no sub-command", path, obj.Kind, c.Name)
				}
			}
			sc := pod.SecurityContext
			if sc.RunAsUser == nil || sc.RunAsGroup == nil {
				t.Fatalf("%s: %s sets no runAsUser/runAsGroup", path, obj.Kind)
			}
			u := strconv.FormatInt(*sc.RunAsUser, 10) + ":" + strconv.FormatInt(*sc.RunAsGroup, 10)
			if user != "" && u != user {
				t.Errorf("%s: %s runs as %s, the other workload as %s", path, obj.Kind, u, user)
			}
			user = u
		}
	}
	if user == "" {
		t.Fatal("no workload in deploy/manifests")
	}
	return user
}
