// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/rhysd/actionlint"
	"go.yaml.in/yaml/v3"
)

// repoRoot is the repository, relative to this package's directory (where go test runs).
var repoRoot = filepath.Join("..", "..")

var releaseWorkflow = filepath.Join(repoRoot, ".github", "workflows", "release.yaml")

// lint runs actionlint (the pinned module, as a library) on one workflow's content.
// shellcheck and pyflakes are not run: neither is pinned here.
func lint(t *testing.T, path string, content []byte) []*actionlint.Error {
	t.Helper()
	var out bytes.Buffer
	l, err := actionlint.NewLinter(&out, &actionlint.LinterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	errs, err := l.Lint(path, content, nil)
	if err != nil {
		t.Fatalf("actionlint %s: %v", path, err)
	}
	return errs
}

// TestWorkflowsLint: every workflow passes actionlint (syntax, expressions and their types,
// contexts available where they are used, action inputs, runner labels, cron, globs).
func TestWorkflowsLint(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(repoRoot, ".github", "workflows", "*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no workflow under .github/workflows")
	}
	for _, f := range files {
		if ext := filepath.Ext(f); ext != ".yaml" && ext != ".yml" {
			t.Errorf("%s: GitHub reads only .yml and .yaml workflow files", f)
			continue
		}
		content, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range lint(t, f, content) {
			t.Errorf("%s:%d:%d: %s [%s]", f, e.Line, e.Column, e.Message, e.Kind)
		}
	}
}

// TestWorkflowLintCatchesMistakes: the linter reads this workflow for real: the same file
// with one typical mistake each fails.
func TestWorkflowLintCatchesMistakes(t *testing.T) {
	content, err := os.ReadFile(releaseWorkflow)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, old, new string }{
		{"unknown permission value", "id-token: write", "id-token: writ"},
		{"undefined step output", "steps.image.outputs.digest", "steps.imag.outputs.digest"},
		{"unknown context", "${{ secrets.GITHUB_TOKEN }}", "${{ secret.GITHUB_TOKEN }}"},
		{"unknown permission", "packages: write", "package: write"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !bytes.Contains(content, []byte(tc.old)) {
				t.Fatalf("the workflow no longer contains %q: update the test", tc.old)
			}
			broken := bytes.Replace(content, []byte(tc.old), []byte(tc.new), 1)
			if errs := lint(t, releaseWorkflow, broken); len(errs) == 0 {
				t.Errorf("actionlint passed the workflow with %q in place of %q", tc.new, tc.old)
			}
		})
	}
}

// TestReleasePushesWhereTheChartPoints: the workflow pushes the image to the repository the
// chart's default values pull from, which is also make image-push's default.
func TestReleasePushesWhereTheChartPoints(t *testing.T) {
	var workflow struct {
		Env map[string]string `yaml:"env"`
	}
	readYAML(t, releaseWorkflow, &workflow)
	var values struct {
		Image struct {
			Repository string `yaml:"repository"`
		} `yaml:"image"`
	}
	readYAML(t, filepath.Join(repoRoot, "deploy", "chart", "lifeboat", "values.yaml"), &values)

	chartRepo := values.Image.Repository
	if got := workflow.Env["IMAGE_REPOSITORY"]; got != chartRepo {
		t.Errorf("release workflow pushes the image to %q, the chart's image.repository is %q", got, chartRepo)
	}
	if got := makeVariable(t, "IMAGE_REPOSITORY"); got != chartRepo {
		t.Errorf("the Makefile's IMAGE_REPOSITORY is %q, the chart's image.repository is %q", got, chartRepo)
	}
	registry, _, _ := strings.Cut(chartRepo, "/")
	if got := workflow.Env["REGISTRY"]; got != registry {
		t.Errorf("release workflow logs in to %q, the image is pushed to %q", got, registry)
	}
	if got := workflow.Env["CHART_REPOSITORY"]; !strings.HasPrefix(got, "oci://"+registry+"/") {
		t.Errorf("release workflow pushes the chart to %q, want an oci:// path on %s (the registry it logs in to)", got, registry)
	}
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// makeVariable reads a "NAME ?= value" default from the Makefile.
func makeVariable(t *testing.T, name string) string {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for s := bufio.NewScanner(f); s.Scan(); {
		fields := strings.Fields(s.Text())
		if len(fields) == 3 && fields[0] == name && fields[1] == "?=" {
			return fields[2]
		}
	}
	t.Fatalf("the Makefile sets no %s ?= default", name)
	return ""
}

// usesLine is a step's or a job's `uses:`, with what follows on the line.
var usesLine = regexp.MustCompile(`^\s*(?:-\s+)?uses:\s*(\S+)(.*)$`)

// pinned is an action pinned to a commit, with the release it is in a comment.
var pinned = regexp.MustCompile(`^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+(?:/[^@\s]+)?@[0-9a-f]{40}$`)
var versionComment = regexp.MustCompile(`^\s+#\s*v[0-9]+(\.[0-9]+)*\b`)

// unpinned returns each `uses:` of a workflow not pinned to a 40-hex commit with its release
// in a comment (a tag or a branch can be moved to other code). Local actions (./) are the
// repository's own.
func unpinned(content []byte) []string {
	var out []string
	for i, line := range strings.Split(string(content), "\n") {
		m := usesLine.FindStringSubmatch(line)
		if m == nil || strings.HasPrefix(m[1], "./") {
			continue
		}
		if !pinned.MatchString(m[1]) || !versionComment.MatchString(m[2]) {
			out = append(out, fmt.Sprintf("line %d: %s", i+1, strings.TrimSpace(line)))
		}
	}
	return out
}

// TestActionsArePinned: every action every workflow uses is pinned by commit SHA, with its
// release in a comment, and the check refuses a tag, a branch, a short SHA and a pin without
// its comment.
func TestActionsArePinned(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(repoRoot, ".github", "workflows", "*.y*ml"))
	if err != nil {
		t.Fatal(err)
	}
	uses := 0
	recorded := recordedPins(t)
	for _, f := range files {
		content, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		uses += strings.Count(string(content), "uses:")
		for _, u := range unpinned(content) {
			t.Errorf("%s: %s: pin the action to a commit SHA with its release in a comment (uses: owner/repo@<40 hex> # vX.Y.Z)", f, u)
		}
		for _, u := range unrecorded(content, recorded) {
			t.Errorf("%s: %s: not a commit its repository names by that release in %s", f, u, actionPins)
		}
	}
	if uses == 0 {
		t.Fatal("no uses: found: the check reads nothing")
	}
	for _, bad := range []string{
		"      - uses: actions/checkout@v4",
		"      - uses: actions/checkout@main # v4.2.2",
		"      - uses: actions/checkout@11bd719 # v4.2.2",
		"      - uses: actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683",
		"    uses: octo/workflows/.github/workflows/x.yaml@v1",
		"      - uses: docker://alpine:3",
	} {
		if len(unpinned([]byte(bad))) != 1 {
			t.Errorf("the check passes %q", bad)
		}
	}
	if got := unpinned([]byte("      - uses: actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683 # v4.2.2\n      - uses: ./local")); len(got) != 0 {
		t.Errorf("the check refuses a pinned action: %v", got)
	}
	// A 40-hex pin the action's repository never had, and a real commit under another release.
	for _, bad := range []string{
		"      - uses: sigstore/cosign-installer@d7d6e079ac29fd41e9a4c81c7a1b6e4e8b7fe1ec # v3.7.0",
		"      - uses: actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683 # v4.2.1",
		"      - uses: octo/unknown@11bd71901bbe5b1630ceea73d27597364c9af683 # v4.2.2",
	} {
		if len(unrecorded([]byte(bad), recorded)) != 1 {
			t.Errorf("the recorded-pin check passes %q", bad)
		}
	}
}

// actionPins is the recorded list of release → commit of each action, from the actions' own
// repositories.
const actionPins = "testdata/action-pins.txt"

// recordedPins reads actionPins: "owner/repo@commit" → the release it is.
func recordedPins(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(actionPins)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for i, line := range strings.Split(string(raw), "\n") {
		if line = strings.TrimSpace(line); line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 3 || !regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(f[2]) {
			t.Fatalf("%s:%d: want \"owner/repo vX.Y.Z <40 hex>\", got %q", actionPins, i+1, line)
		}
		out[f[0]+"@"+f[2]] = f[1]
	}
	return out
}

// unrecorded are the uses: lines whose pin is not recorded, or is recorded as another release
// than its comment names.
func unrecorded(content []byte, recorded map[string]string) []string {
	var out []string
	for i, line := range strings.Split(string(content), "\n") {
		m := usesLine.FindStringSubmatch(line)
		if m == nil || strings.HasPrefix(m[1], "./") || !pinned.MatchString(m[1]) {
			continue
		}
		action, sha, _ := strings.Cut(m[1], "@")
		if parts := strings.SplitN(action, "/", 3); len(parts) == 3 {
			action = parts[0] + "/" + parts[1] // a sub-path of the repository
		}
		release := strings.Fields(strings.TrimLeft(strings.TrimSpace(m[2]), "# "))
		if want, ok := recorded[action+"@"+sha]; !ok || len(release) == 0 || release[0] != want {
			out = append(out, fmt.Sprintf("line %d: %s", i+1, strings.TrimSpace(line)))
		}
	}
	return out
}

// TestWorkflowHoldsItsToken: no checkout leaves its token in .git/config for later steps, the
// workflow grants nothing by default, and every job names its own permissions.
func TestWorkflowHoldsItsToken(t *testing.T) {
	var workflow struct {
		Permissions any `yaml:"permissions"`
		Jobs        map[string]struct {
			Permissions map[string]string `yaml:"permissions"`
			Steps       []struct {
				Uses string         `yaml:"uses"`
				With map[string]any `yaml:"with"`
			} `yaml:"steps"`
		} `yaml:"jobs"`
	}
	readYAML(t, releaseWorkflow, &workflow)
	if m, ok := workflow.Permissions.(map[string]any); !ok || len(m) != 0 {
		t.Errorf("the workflow's permissions are %v, want {} (each job names its own)", workflow.Permissions)
	}
	for name, job := range workflow.Jobs {
		if len(job.Permissions) == 0 {
			t.Errorf("job %s names no permissions", name)
		}
		for _, step := range job.Steps {
			if strings.HasPrefix(step.Uses, "actions/checkout@") && step.With["persist-credentials"] != false {
				t.Errorf("job %s: checkout without persist-credentials: false leaves the token in .git/config for every later step", name)
			}
		}
		signs := false
		for _, step := range job.Steps {
			signs = signs || strings.HasPrefix(step.Uses, "actions/attest-build-provenance@")
		}
		if signs && (job.Permissions["id-token"] != "write" || job.Permissions["attestations"] != "write") {
			t.Errorf("job %s attests provenance without id-token: write and attestations: write", name)
		}
		if !signs && (job.Permissions["id-token"] != "" || job.Permissions["attestations"] != "") {
			t.Errorf("job %s may mint OIDC tokens or attestations and makes none", name)
		}
	}
}

// versionPattern is a release version, with or without its v.
const versionPattern = `(v?[0-9]+\.[0-9]+\.[0-9]+(?:-[0-9A-Za-z.-]+)?)`

// releaseVersionRefs are the ways the docs' install examples name a Lifeboat release: a
// chart's --version on a line about Lifeboat, an image or chart reference's tag, a tag checked
// out or built, the filled image.tag, the image's version label, and the prose that spells
// out a tag's image and chart versions.
var releaseVersionRefs = []*regexp.Regexp{
	regexp.MustCompile(`(?i)lifeboat.*--version[ =]` + versionPattern),
	regexp.MustCompile(`lifeboat-dev/(?:charts/)?lifeboat:` + versionPattern),
	regexp.MustCompile(`(?:git checkout |VERSION=)` + versionPattern),
	regexp.MustCompile(`image\.tag: "?` + versionPattern),
	regexp.MustCompile("org\\.opencontainers\\.image\\.version.*`" + versionPattern + "`"),
	regexp.MustCompile("(?:tag|image|chart) `" + versionPattern + "`"),
}

// docVersions returns each release version the install examples of a document name, with
// its line.
func docVersions(content string) (refs []string, lines []int) {
	for i, line := range strings.Split(content, "\n") {
		for _, re := range releaseVersionRefs {
			for _, m := range re.FindAllStringSubmatch(line, -1) {
				refs, lines = append(refs, m[1]), append(lines, i+1)
			}
		}
	}
	return refs, lines
}

// installDocs are the documents whose examples install, verify or build a release.
func installDocs(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	top, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append(append(docs, top...), filepath.Join(repoRoot, "README.md"), filepath.Join(repoRoot, "deploy", "README.md"))
}

// TestOneVersion: the chart's version and appVersion are one 0.x version, CHANGELOG.md has a
// section for it (the release workflow refuses a tag that names another, and make
// release-dry-run stamps the binary with it), and every version the docs' install examples
// name is that version.
func TestOneVersion(t *testing.T) {
	var chart struct {
		Version    string `yaml:"version"`
		AppVersion string `yaml:"appVersion"`
	}
	readYAML(t, filepath.Join(repoRoot, "deploy", "chart", "lifeboat", "Chart.yaml"), &chart)
	if !regexp.MustCompile(`^0\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`).MatchString(chart.Version) {
		t.Errorf("chart version %q is not 0.x semver", chart.Version)
	}
	if chart.AppVersion != chart.Version {
		t.Errorf("chart appVersion %q, version %q: one version for binary, image and chart", chart.AppVersion, chart.Version)
	}
	changelog, err := os.ReadFile(filepath.Join(repoRoot, "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^## \[` + regexp.QuoteMeta(chart.Version) + `\]`).Match(changelog) {
		t.Errorf("CHANGELOG.md has no \"## [%s]\" section", chart.Version)
	}
	found := 0
	for _, path := range installDocs(t) {
		content, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		refs, lines := docVersions(string(content))
		found += len(refs)
		for i, v := range refs {
			if strings.TrimPrefix(v, "v") != chart.Version {
				t.Errorf("%s:%d: names release %s; the chart's version is %s: one version everywhere", path, lines[i], v, chart.Version)
			}
		}
	}
	if found == 0 {
		t.Error("no release version found in the docs' install examples: the check reads nothing")
	}
	// Each way of naming a release is read.
	for _, example := range []string{
		"helm install lifeboat oci://ghcr.io/lifeboat-dev/charts/lifeboat --version 9.9.9 \\",
		"helm upgrade lifeboat oci://ghcr.io/lifeboat-dev/charts/lifeboat --namespace x --version=9.9.9",
		"cosign verify ghcr.io/lifeboat-dev/lifeboat:9.9.9 \\",
		"gh attestation verify oci://ghcr.io/lifeboat-dev/charts/lifeboat:9.9.9 --repo lifeboat-dev/lifeboat",
		"git checkout v9.9.9 && make image",
		"make release-dry-run RELEASE_VERSION=v9.9.9",
		"A released chart names its image by digest (`image.tag: 9.9.9@sha256:<digest>`, filled in",
		"| `org.opencontainers.image.version` | the release as `git describe` names it (`v9.9.9`) |",
		"`<version>` is the release without its `v` (tag `v9.9.9`: image `9.9.9`, chart `9.9.9`). The",
	} {
		if refs, _ := docVersions(example); len(refs) == 0 || strings.TrimPrefix(refs[0], "v") != "9.9.9" {
			t.Errorf("the check reads no version in %q (got %v)", example, refs)
		}
	}
	if refs, _ := docVersions("Kubernetes 1.30 or later; Helm 3.8; actions/checkout@<sha> # v4.2.2; kwok 0.5.4"); len(refs) != 0 {
		t.Errorf("the check takes other software's versions for Lifeboat's: %v", refs)
	}
}

// TestReleasedChartNamesTheImageByDigest: values.yaml keeps the one empty image.tag line that
// `release chart` fills with <version>@<digest>, and filling it changes nothing else.
func TestReleasedChartNamesTheImageByDigest(t *testing.T) {
	path := filepath.Join(repoRoot, "deploy", "chart", "lifeboat", "values.yaml")
	values, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tag := "0.1.0@sha256:" + strings.Repeat("ab", 32)
	filled, err := fillImageTag(values, tag)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var before, after map[string]any
	if err := yaml.Unmarshal(values, &before); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(filled, &after); err != nil {
		t.Fatalf("filled values.yaml: %v", err)
	}
	image, _ := after["image"].(map[string]any)
	if image["tag"] != tag {
		t.Errorf("filled image.tag is %v, want %q", image["tag"], tag)
	}
	image["tag"] = ""
	if !reflect.DeepEqual(before, after) {
		t.Error("filling image.tag changed other values")
	}
	for _, bad := range []string{"image:\n  repository: x\n", "image:\n  tag: \"\"\nsidecar:\n  tag: \"\"\n", "sidecar:\n  tag: \"\"\n"} {
		if _, err := fillImageTag([]byte(bad), tag); err == nil {
			t.Errorf("fillImageTag(%q) found a line to fill", bad)
		}
	}
}

// workflowJob is the part of a job the release's shape depends on.
type workflowJob struct {
	Needs       any               `yaml:"needs"`
	Permissions map[string]string `yaml:"permissions"`
	Steps       []struct {
		Uses string            `yaml:"uses"`
		Run  string            `yaml:"run"`
		With map[string]string `yaml:"with"`
	} `yaml:"steps"`
}

func (j workflowJob) needs() []string {
	switch n := j.Needs.(type) {
	case string:
		return []string{n}
	case []any:
		var out []string
		for _, v := range n {
			out = append(out, fmt.Sprint(v))
		}
		return out
	}
	return nil
}

// action is a step's action without its pin.
func action(uses string) string {
	a, _, _ := strings.Cut(uses, "@")
	return a
}

// releaseShapeProblems checks the split of the release workflow: the build job holds no write
// permission and no secret; every job that holds a write permission takes only the build's
// outputs (it needs the build, checks out nothing, sets up no Go, builds nothing, and
// downloads only artifacts the build uploads); the job that publishes the GitHub release
// waits for the one that signs.
func releaseShapeProblems(content []byte) []string {
	var wf struct {
		Jobs map[string]workflowJob `yaml:"jobs"`
	}
	if err := yaml.Unmarshal(content, &wf); err != nil {
		return []string{err.Error()}
	}
	var problems []string
	build, ok := wf.Jobs["build"]
	if !ok {
		return []string{"no build job"}
	}
	uploaded := map[string]bool{}
	for _, st := range build.Steps {
		if action(st.Uses) == "actions/upload-artifact" {
			uploaded[st.With["name"]] = true
		}
		if strings.Contains(st.Run, "secrets.") || strings.Contains(fmt.Sprint(st.With), "secrets.") {
			problems = append(problems, "the build job reads a secret")
		}
	}
	for p, v := range build.Permissions {
		if v != "read" && v != "none" {
			problems = append(problems, fmt.Sprintf("the build job holds %s: %s", p, v))
		}
	}
	if len(uploaded) == 0 {
		problems = append(problems, "the build job uploads no artifact")
	}
	for _, name := range sortedKeys(wf.Jobs) {
		if name != "build" {
			problems = append(problems, takesOnlyBuildOutputs(name, wf.Jobs[name], uploaded)...)
		}
	}
	if publish, ok := wf.Jobs["publish"]; !ok || !slices.Contains(publish.needs(), "sign") {
		problems = append(problems, "the publish job does not need the sign job: it would publish without the image and chart")
	}
	return problems
}

// takesOnlyBuildOutputs: a job holding a write permission runs no code of the checkout.
func takesOnlyBuildOutputs(name string, job workflowJob, uploaded map[string]bool) []string {
	writes := false
	for _, v := range job.Permissions {
		writes = writes || v == "write"
	}
	if !writes {
		return nil
	}
	var problems []string
	if !slices.Contains(job.needs(), "build") {
		problems = append(problems, fmt.Sprintf("job %s holds a write permission and does not need the build job", name))
	}
	downloads := 0
	for _, st := range job.Steps {
		switch action(st.Uses) {
		case "actions/checkout", "actions/setup-go":
			problems = append(problems, fmt.Sprintf("job %s holds a write permission and uses %s: it must take only the build's outputs", name, action(st.Uses)))
		case "actions/download-artifact":
			downloads++
			if !uploaded[st.With["name"]] {
				problems = append(problems, fmt.Sprintf("job %s downloads artifact %q, which the build job does not upload", name, st.With["name"]))
			}
		}
		for _, word := range []string{"make ", "go build", "go run", "go test", "git "} {
			if strings.Contains(st.Run, word) {
				problems = append(problems, fmt.Sprintf("job %s holds a write permission and runs %q: it must take only the build's outputs", name, strings.TrimSpace(word)))
			}
		}
	}
	if downloads == 0 {
		problems = append(problems, fmt.Sprintf("job %s holds a write permission and downloads none of the build's outputs", name))
	}
	return problems
}

// TestReleaseJobsSplit: the release workflow builds without write permissions, and signs,
// attests and publishes in jobs that take only the build's outputs; each way of undoing that
// split fails the check.
func TestReleaseJobsSplit(t *testing.T) {
	content, err := os.ReadFile(releaseWorkflow)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range releaseShapeProblems(content) {
		t.Errorf("%s: %s", releaseWorkflow, p)
	}
	checkout := "      - uses: actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683 # v4.2.2\n        with:\n          persist-credentials: false\n\n"
	tests := []struct{ name, old, new, want string }{
		{"build may push", "    permissions:\n      contents: read\n", "    permissions:\n      contents: read\n      packages: write\n", "the build job holds packages: write"},
		{"sign checks out", "          name: release\n          path: release\n\n", "          name: release\n          path: release\n\n" + checkout, "job sign holds a write permission and uses actions/checkout"},
		{"sign builds", "          chmod +x tools/release tools/helm\n", "          chmod +x tools/release tools/helm\n          make image\n", "job sign holds a write permission and runs \"make\""},
		{"sign downloads another artifact", "          name: tools\n          path: tools\n", "          name: sources\n          path: tools\n", "downloads artifact \"sources\""},
		{"publish does not wait", "    needs: [build, sign]\n", "    needs: [build]\n", "the publish job does not need the sign job"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !bytes.Contains(content, []byte(tc.old)) {
				t.Fatalf("the workflow no longer contains %q: update the test", tc.old)
			}
			broken := bytes.Replace(content, []byte(tc.old), []byte(tc.new), 1)
			problems := strings.Join(releaseShapeProblems(broken), "\n")
			if !strings.Contains(problems, tc.want) {
				t.Errorf("problems:\n%s\nwant one containing %q", problems, tc.want)
			}
		})
	}
}
