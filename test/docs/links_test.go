// SPDX-License-Identifier: Apache-2.0

package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// root is the repository, from this package's directory.
const root = "../.."

func TestSlug(t *testing.T) {
	tests := []struct{ heading, want string }{
		{"Deadlines", "deadlines"},
		{"The hand-back: safe to terminate", "the-hand-back-safe-to-terminate"},
		{"Helm values: NTH → Lifeboat", "helm-values-nth--lifeboat"},
		{"Lifeboat's share of the API server", "lifeboats-share-of-the-api-server"},
		{"Cordon and drain one node (`BenchmarkCordonAndDrain`)", "cordon-and-drain-one-node-benchmarkcordonanddrain"},
		{"Default of WEBHOOK_TEMPLATE", "default-of-webhook_template"},
		{"Idle agent memory, 2026-11-21", "idle-agent-memory-2026-11-21"},
		{"See [the record](node-record.md) first", "see-the-record-first"},
		{"Überblick — kurz", "überblick--kurz"},
	}
	for _, tt := range tests {
		if got := Slug(tt.heading); got != tt.want {
			t.Errorf("Slug(%q) = %q, want %q", tt.heading, got, tt.want)
		}
	}
}

func TestParse(t *testing.T) {
	text := strings.Join([]string{
		"# Title",
		"See [a](a.md), ![b](img/b.svg \"a title\") and `[not](code.md)`.",
		"```",
		"# not a heading",
		"[not a link](fenced.md)",
		"```",
		"## Title",
		"## Title",
		`<a id="explicit"></a>`,
		"[c](#title-1) [d](https://example.com/x)",
	}, "\n")
	p := Parse(text)
	var targets []string
	for _, l := range p.Links {
		targets = append(targets, l.Target)
	}
	if want := []string{"a.md", "img/b.svg", "#title-1", "https://example.com/x"}; !slices.Equal(targets, want) {
		t.Errorf("links %q, want %q", targets, want)
	}
	for _, a := range []string{"title", "title-1", "title-2", "explicit"} {
		if !p.Anchors[a] {
			t.Errorf("anchor %q missing from %v", a, p.Anchors)
		}
	}
	if p.Anchors["not-a-heading"] {
		t.Error("a # line inside a code fence was taken for a heading")
	}
	if p.Lines != 10 {
		t.Errorf("Lines = %d, want 10", p.Lines)
	}
}

// TestCheckLinks: broken files, broken anchors and links out of the repository are found;
// good links, directories and URLs are not reported.
func TestCheckLinks(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, text string) {
		path := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("README.md", "[ok](docs/a.md#part-two) [dir](docs/) [gone](docs/missing.md) [url](https://x.test/y)\n")
	write("docs/a.md", "# A\n\n## Part two\n\n[self](#a) [bad](#nowhere) [up](../README.md) [out](../../etc/passwd) [b](sub/b.md#b)\n")
	write("docs/sub/b.md", "# B\n[back](../a.md#part-two) [wrong](../a.md#part-three)\n")
	problems, err := CheckLinks(dir, []string{"README.md", "docs/a.md", "docs/sub/b.md"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range problems {
		got = append(got, p.File+" "+p.Target)
	}
	want := []string{"README.md docs/missing.md", "docs/a.md #nowhere", "docs/a.md ../../etc/passwd", "docs/sub/b.md ../a.md#part-three"}
	if !slices.Equal(got, want) {
		t.Errorf("problems %q, want %q", got, want)
	}
}

// TestRepositoryLinks: every relative link in README.md, deploy/README.md and docs/ resolves
// to a file, and every anchor to a heading of it.
func TestRepositoryLinks(t *testing.T) {
	files, err := MarkdownFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(files, "docs/README.md") {
		t.Errorf("no docs/README.md, the index of the documentation, among %q", files)
	}
	problems, err := CheckLinks(root, files)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// TestReadmeIsShort: the README stays a front page (under 200 lines) and keeps the two
// commands a newcomer needs; the rest belongs in docs/.
func TestReadmeIsShort(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := Parse(string(b)).Lines; n >= 200 {
		t.Errorf("README.md has %d lines; keep it under 200 and move the detail to docs/", n)
	}
	for _, want := range []string{"make demo", "make test", "docs/README.md"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("README.md does not mention %s", want)
		}
	}
}

// docPath is a path into docs/ as code, scripts and chart files name it in their comments.
var docPath = regexp.MustCompile(`\bdocs/[A-Za-z0-9_./-]*\.md\b`)

// TestCodeNamesExistingDocs: every docs/….md path named in the code, the scripts, the Makefile
// and the chart exists, so a moved page leaves no comment pointing nowhere.
func TestCodeNamesExistingDocs(t *testing.T) {
	named := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			// This package's own tests name made-up pages on purpose.
			if strings.HasPrefix(d.Name(), ".") && rel != "." || d.Name() == "_output" || d.Name() == "docs" || rel == "test/docs" || d.Name() == "bin" {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".go", ".sh", ".yaml", ".yml", ".txt", ".tpl", ".json":
		default:
			if d.Name() != "Makefile" {
				return nil
			}
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, p := range docPath.FindAllString(line, -1) {
				named++
				if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(p))); err != nil {
					t.Errorf("%s:%d names %s, which does not exist", rel, i+1, p)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if named == 0 {
		t.Error("no docs/….md path found in the code; the walk no longer looks where they are")
	}
}
