// SPDX-License-Identifier: Apache-2.0

package docs

import (
	"go/ast"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// goPackages maps each package name under the given top directories to the directories that
// hold it (two packages may share a name, as drain and its driver's cousins might).
func goPackages(t *testing.T, tops ...string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, top := range tops {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return err
			}
			if d.Name() == "testdata" {
				return fs.SkipDir
			}
			entries, _ := os.ReadDir(path)
			if slices.ContainsFunc(entries, func(e fs.DirEntry) bool {
				return strings.HasSuffix(e.Name(), ".go") && !strings.HasSuffix(e.Name(), "_test.go")
			}) {
				rel, _ := filepath.Rel(root, path)
				out[d.Name()] = append(out[d.Name()], filepath.ToSlash(rel))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// declared lists what a package declares: its top-level names, and for each type its methods
// and struct fields (as "Type.Name").
func declared(t *testing.T, dir string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, f := range goFiles(t, dir) {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					out[d.Name.Name] = true
					continue
				}
				out[receiverType(d.Recv.List[0].Type)+"."+d.Name.Name] = true
			case *ast.GenDecl:
				declaredSpecs(d, out)
			}
		}
	}
	return out
}

func declaredSpecs(d *ast.GenDecl, out map[string]bool) {
	for _, s := range d.Specs {
		switch s := s.(type) {
		case *ast.TypeSpec:
			out[s.Name.Name] = true
			switch ty := s.Type.(type) {
			case *ast.StructType:
				for _, f := range ty.Fields.List {
					for _, n := range f.Names {
						out[s.Name.Name+"."+n.Name] = true
					}
				}
			case *ast.InterfaceType:
				for _, m := range ty.Methods.List {
					for _, n := range m.Names {
						out[s.Name.Name+"."+n.Name] = true
					}
				}
			}
		case *ast.ValueSpec:
			for _, n := range s.Names {
				out[n.Name] = true
			}
		}
	}
}

func receiverType(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return receiverType(e.X)
	case *ast.IndexExpr:
		return receiverType(e.X)
	case *ast.IndexListExpr:
		return receiverType(e.X)
	case *ast.Ident:
		return e.Name
	}
	return ""
}

// TestArchitectureNamesExist: every code name docs/architecture.md and the design notes give,
// in backticks or in their fenced diagrams, exists: a package of Lifeboat (or one of the few
// other packages the pages may name, listed in externalPackages) and what it declares, a type
// and its member, or a Go file. A name whose package is unknown is refused, not passed. And
// the architecture page's package table lists every package under internal/. So the pages
// cannot drift from the code silently.
func TestArchitectureNamesExist(t *testing.T) {
	w := newCodeWorld(t)
	for _, f := range strictPages(t) {
		page := readDoc(t, f)
		refs := codeRefs(page)
		if f == "docs/architecture.md" && len(refs) < 50 {
			t.Fatalf("only %d code names found in %s; the reading of the page is broken", len(refs), f)
		}
		for _, r := range refs {
			if why := w.resolve(t, r, true); why != "" {
				t.Errorf("%s:%d names %s: %s", f, r.line, r.text, why)
			}
		}
	}
	page := readDoc(t, "docs/architecture.md")
	for _, dirs := range goPackages(t, "internal") {
		for _, dir := range dirs {
			if !strings.Contains(page, "| `"+dir+"`") {
				t.Errorf("docs/architecture.md's package table has no row for %s", dir)
			}
		}
	}
}

// strictPages are the pages about the code itself: the architecture and the design notes.
func strictPages(t *testing.T) []string {
	t.Helper()
	notes, err := filepath.Glob(filepath.Join(root, "docs", "design", "*.md"))
	if err != nil || len(notes) == 0 {
		t.Fatalf("no design notes in docs/design (%v)", err)
	}
	pages := []string{"docs/architecture.md"}
	for _, n := range notes {
		pages = append(pages, "docs/design/"+filepath.Base(n))
	}
	return pages
}

// TestDocsCodeNamesExist: the other pages name Lifeboat's code too (`notice.ID`,
// `drain.Deadline.InstanceGoesAt`). Where a page names an exported name of a package of
// Lifeboat, it exists. Other dotted names pass there: chart values (`agent.enabled`, which
// shares its first word with a package), field paths, other projects' code. The benchmark
// pages are records of their dates and name the code as it was.
func TestDocsCodeNamesExist(t *testing.T) {
	files, err := MarkdownFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	w := newCodeWorld(t)
	checked := 0
	for _, f := range files {
		if slices.Contains(strictPages(t), f) || f == "docs/benchmarks.md" || strings.HasPrefix(f, "docs/benchmarks/") {
			continue
		}
		for _, r := range codeRefs(readDoc(t, f)) {
			if !w.isLifeboatName(r) {
				continue
			}
			checked++
			if why := w.resolve(t, r, false); why != "" {
				t.Errorf("%s:%d names %s: %s", f, r.line, r.text, why)
			}
		}
	}
	if checked < 10 {
		t.Errorf("only %d code names of Lifeboat found in the pages; the reading of the pages is broken", checked)
	}
}

var (
	walkStep  = regexp.MustCompile(`^\d+\. `)
	walkCount = regexp.MustCompile(`that is (\d+) calls between packages`)
)

// TestArchitectureWalkCount: "Following one notice" says how many calls between packages its
// numbered walk makes (each arrow one call site); the sentence counts the arrows the walk
// shows.
func TestArchitectureWalkCount(t *testing.T) {
	page := readDoc(t, "docs/architecture.md")
	_, section, ok := strings.Cut(page, "\n### Following one notice\n")
	if !ok {
		t.Fatal("docs/architecture.md has no section \"Following one notice\"")
	}
	if end := strings.Index(section, "\n#"); end >= 0 {
		section = section[:end]
	}
	arrows, steps, inList := 0, 0, false
	for _, line := range strings.Split(section, "\n") {
		switch {
		case walkStep.MatchString(line):
			steps++
			inList = true
		case strings.TrimSpace(line) == "" || !strings.HasPrefix(line, " "):
			inList = false
		}
		if inList {
			arrows += strings.Count(line, "→")
		}
	}
	m := walkCount.FindStringSubmatch(section)
	if steps == 0 || m == nil {
		t.Fatalf("the walk has %d numbered steps and the sentence %q is %s; the page changed its shape",
			steps, walkCount, map[bool]string{true: "there", false: "missing"}[m != nil])
	}
	if said, _ := strconv.Atoi(m[1]); said != arrows {
		t.Errorf("\"Following one notice\" says %d calls between packages; its %d steps show %d arrows", said, steps, arrows)
	}
}
