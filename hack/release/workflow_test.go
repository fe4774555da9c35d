package main

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
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
		{"misspelt action input", "fetch-depth: 0", "fetch-dept: 0"},
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
