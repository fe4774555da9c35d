// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// A small Go program stands in for Lifeboat here: these tests are about the builder, and
// TestMakeImage covers the real binary.
const fixtureSource = `package main

import "fmt"

func main() { fmt.Println("fixture") }
`

var (
	fixtureOnce sync.Once
	fixtureDir  string
	fixtureErr  error
)

// fixtures builds the stand-in twice, for the host's platform: as make builds Lifeboat
// (static, -trimpath), and without -trimpath.
func fixtures(t *testing.T) (good, untrimmed string) {
	t.Helper()
	fixtureOnce.Do(func() {
		fixtureDir, fixtureErr = os.MkdirTemp("", "release-fixture-")
		if fixtureErr != nil {
			return
		}
		src := filepath.Join(fixtureDir, "src")
		if fixtureErr = os.MkdirAll(src, 0o755); fixtureErr != nil {
			return
		}
		if fixtureErr = os.WriteFile(filepath.Join(src, "go.mod"), []byte("module example.com/fixture\n\ngo 1.26.0\n"), 0o644); fixtureErr != nil {
			return
		}
		if fixtureErr = os.WriteFile(filepath.Join(src, "main.go"), []byte(fixtureSource), 0o644); fixtureErr != nil {
			return
		}
		for _, b := range []struct {
			out   string
			flags []string
		}{{"good", []string{"-trimpath"}}, {"untrimmed", nil}} {
			cmd := exec.Command("go", append(append([]string{"build"}, b.flags...), "-o", filepath.Join(fixtureDir, b.out), ".")...)
			cmd.Dir = src
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH, "GOFLAGS=-buildvcs=false")
			if out, err := cmd.CombinedOutput(); err != nil {
				fixtureErr = &buildError{err: err, out: string(out)}
				return
			}
		}
	})
	if fixtureErr != nil {
		t.Fatal(fixtureErr)
	}
	return filepath.Join(fixtureDir, "good"), filepath.Join(fixtureDir, "untrimmed")
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return "building the fixture: " + e.err.Error() + "\n" + e.out }

func TestMain(m *testing.M) {
	code := m.Run()
	for _, dir := range []string{fixtureDir, stampedDir} {
		if dir != "" {
			os.RemoveAll(dir)
		}
	}
	os.Exit(code)
}

// otherArch is an architecture the fixture is not built for.
func otherArch() string {
	if runtime.GOARCH == "arm64" {
		return "amd64"
	}
	return "arm64"
}

func imageArgs(out string, extra ...string) []string {
	return append([]string{"image", "-out", out, "-version", "v1.2.3", "-revision", testCommit,
		"-created", testCommitTime, "-source", testSource}, extra...)
}

// TestBadInput: each mistake is refused with a message naming the flag or file at fault,
// and nothing is written.
func TestBadInput(t *testing.T) {
	good, untrimmed := fixtures(t)
	host := "linux/" + runtime.GOARCH
	notLayout := t.TempDir()
	keep := filepath.Join(notLayout, "keep.txt")
	if err := os.WriteFile(keep, []byte("not an image"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no command", nil, "usage"},
		{"unknown command", []string{"build"}, `unknown command "build"`},
		{"no -out", []string{"image", "-binary", host + "=" + good}, "-out is empty"},
		{"no binary", imageArgs("OUT"), "no -binary given"},
		{"binary without platform", imageArgs("OUT", "-binary", good), "want os/arch=path"},
		{"platform without arch", imageArgs("OUT", "-binary", "linux="+good), `platform "linux" is not os/arch`},
		{"platform twice", imageArgs("OUT", "-binary", host+"="+good, "-binary", host+"="+good), "platform " + host + " given twice"},
		{"missing binary", imageArgs("OUT", "-binary", host+"="+filepath.Join(t.TempDir(), "nope"), "-agent-binary", host+"="+good), "nope"},
		{"not a Go binary", imageArgs("OUT", "-binary", host+"="+keep, "-agent-binary", host+"="+good), "keep.txt: not a Go binary"},
		{"other architecture", imageArgs("OUT", "-binary", "linux/"+otherArch()+"="+good, "-agent-binary", "linux/"+otherArch()+"="+good), `GOARCH="` + runtime.GOARCH + `", the image needs "` + otherArch() + `"`},
		{"paths not trimmed", imageArgs("OUT", "-binary", host+"="+untrimmed, "-agent-binary", host+"="+good), `-trimpath=""`},
		{"created not a time", []string{"image", "-out", "OUT", "-binary", host + "=" + good, "-version", "v1", "-revision", testCommit, "-created", "yesterday", "-source", testSource}, `-created "yesterday" is not an RFC 3339 time`},
		{"no revision", []string{"image", "-out", "OUT", "-binary", host + "=" + good, "-version", "v1", "-created", testCommitTime, "-source", testSource}, "-revision is empty"},
		{"no created", []string{"image", "-out", "OUT", "-binary", host + "=" + good, "-version", "v1", "-revision", testCommit, "-source", testSource}, "-created is empty"},
		{"no agent binary", imageArgs("OUT", "-binary", host+"="+good), "-agent-binary: none for platform " + host},
		{"agent binary without its platform's binary", imageArgs("OUT", "-binary", host+"="+good, "-agent-binary", host+"="+good,
			"-agent-binary", "linux/"+otherArch()+"="+good), "-agent-binary: platform linux/" + otherArch() + " has no -binary"},
		{"agent binary not a Go binary", imageArgs("OUT", "-binary", host+"="+good, "-agent-binary", host+"="+keep), "-agent-binary " + host + "=" + keep + ": not a Go binary"},
		{"out is another directory", imageArgs(notLayout, "-binary", host+"="+good, "-agent-binary", host+"="+good), "not an OCI layout; refusing to replace it"},
		{"push without tag", []string{"push", "-layout", "OUT", "-repository", "ghcr.io/lifeboat-dev/lifeboat"}, "no -tag given"},
		{"push without layout", []string{"push", "-layout", filepath.Join(t.TempDir(), "none"), "-repository", "ghcr.io/x/y", "-tag", "1"}, "none: not an OCI image layout"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "layout")
			for i, a := range tc.args {
				if a == "OUT" {
					tc.args[i] = out
				}
			}
			var stdout bytes.Buffer
			err := run(context.Background(), tc.args, &stdout)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("run %q: error %v, want one containing %q", tc.args, err, tc.want)
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("%s was written although the input was refused", out)
			}
		})
	}
	if _, err := os.Stat(keep); err != nil {
		t.Errorf("a refused -out lost its file: %v", err)
	}
}

// TestImageReplacesLayout: a second build over the first replaces it, and gives the same index.
func TestImageReplacesLayout(t *testing.T) {
	good, _ := fixtures(t)
	out := filepath.Join(t.TempDir(), "layout")
	args := imageArgs(out, "-binary", "linux/"+runtime.GOARCH+"="+good, "-agent-binary", "linux/"+runtime.GOARCH+"="+good)
	var first, second bytes.Buffer
	if err := run(context.Background(), args, &first); err != nil {
		t.Fatal(err)
	}
	if err := run(context.Background(), args, &second); err != nil {
		t.Fatal(err)
	}
	if first.String() != second.String() || !strings.Contains(first.String(), "sha256:") {
		t.Errorf("two builds printed %q and %q, want the same digest", first.String(), second.String())
	}
}

// TestPush pushes a layout to a registry on loopback under two tags and reads it back: both
// tags name the index the layout holds, by the digest push printed.
func TestPush(t *testing.T) {
	good, _ := fixtures(t)
	t.Setenv("DOCKER_CONFIG", t.TempDir()) // no credentials from the machine's config
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")

	out := filepath.Join(t.TempDir(), "layout")
	if err := run(context.Background(), imageArgs(out, "-binary", "linux/"+runtime.GOARCH+"="+good, "-agent-binary", "linux/"+runtime.GOARCH+"="+good), &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	idx, err := readLayoutIndex(out)
	if err != nil {
		t.Fatal(err)
	}
	want, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}

	repo := host + "/lifeboat-dev/lifeboat"
	var stdout bytes.Buffer
	if err := run(context.Background(), []string{"push", "-layout", out, "-repository", repo, "-tag", "1.2.3", "-tag", "v1.2.3"}, &stdout); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(stdout.String()); got != repo+"@"+want.String() {
		t.Errorf("push printed %q, want %q", got, repo+"@"+want.String())
	}
	for _, tag := range []string{"1.2.3", "v1.2.3"} {
		ref, err := name.NewTag(repo + ":" + tag)
		if err != nil {
			t.Fatal(err)
		}
		desc, err := remote.Head(ref)
		if err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
		if desc.Digest != want {
			t.Errorf("%s is %s, want the layout's index %s", ref, desc.Digest, want)
		}
	}
}

// TestSBOMModules: every linked module is listed once, a replaced module as its replacement,
// under an identifier of its own even where two paths map to the same characters.
func TestSBOMModules(t *testing.T) {
	info := &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Main:      debug.Module{Path: "lifeboat.dev/lifeboat", Version: "(devel)"},
		Deps: []*debug.Module{
			{Path: "example.com/a/b-c", Version: "v1.0.0"},
			{Path: "example.com/a-b/c", Version: "v2.0.0"},
			{Path: "example.com/old", Version: "v0.1.0", Replace: &debug.Module{Path: "example.com/fork", Version: "v0.1.1"}},
		},
	}
	spec := imageSpec{version: "v1.2.3", source: testSource}
	spec.created, _ = time.Parse(time.RFC3339, testCommitTime)
	out, err := spdxFor(spec, v1.Platform{OS: "linux", Architecture: "arm64"}, info, "00ff")
	if err != nil {
		t.Fatal(err)
	}
	var doc spdxDocument
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	ids := map[string]bool{}
	for _, p := range doc.Packages {
		if ids[p.SPDXID] {
			t.Errorf("identifier %s used twice", p.SPDXID)
		}
		ids[p.SPDXID] = true
		got[p.Name] = p.VersionInfo
	}
	want := map[string]string{
		"lifeboat.dev/lifeboat": "v1.2.3", "stdlib": "go1.26.8",
		"example.com/a/b-c": "v1.0.0", "example.com/a-b/c": "v2.0.0", "example.com/fork": "v0.1.1",
	}
	if !mapsEqual(got, want) {
		t.Errorf("packages %v, want %v", got, want)
	}
	depends := 0
	for _, r := range doc.Relationships {
		if !ids[r.Related] {
			t.Errorf("relationship %s %s %s names an unknown package", r.Element, r.Type, r.Related)
		}
		if r.Type == "DEPENDS_ON" {
			depends++
		}
	}
	if depends != 4 {
		t.Errorf("%d DEPENDS_ON relationships, want 4 (stdlib and three modules)", depends)
	}
	if doc.CreationInfo.Created != testCreated || !strings.HasSuffix(doc.DocumentNamespace, "/v1.2.3/linux-arm64/00ff") {
		t.Errorf("created %s namespace %s, want %s and a namespace naming the release, platform and sum", doc.CreationInfo.Created, doc.DocumentNamespace, testCreated)
	}
}
