// SPDX-License-Identifier: Apache-2.0

package docs

import (
	"go/ast"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// goPackages maps each package name under internal/ to the directories that hold it (two
// packages may share a name, as drain and its driver's cousins might).
func goPackages(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	err := filepath.WalkDir(filepath.Join(root, "internal"), func(path string, d fs.DirEntry, err error) error {
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
			if st, ok := s.Type.(*ast.StructType); ok {
				for _, f := range st.Fields.List {
					for _, n := range f.Names {
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
	case *ast.Ident:
		return e.Name
	}
	return ""
}

// codeName is a backticked name in the docs: pkg.Name, pkg.Type.Member, or Type.Member.
var codeName = regexp.MustCompile("`([A-Za-z_][A-Za-z0-9_]*)\\.([A-Za-z_][A-Za-z0-9_]*)(?:\\.([A-Za-z_][A-Za-z0-9_]*))?(?:\\(\\))?`")

// TestArchitectureNamesExist: every code name docs/architecture.md gives in backticks exists
// (a package of internal/ and what it declares, or a type and its member in some package), and
// its package table lists every package under internal/. So the page cannot drift from the code
// silently.
func TestArchitectureNamesExist(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	page := string(raw)
	pkgs := goPackages(t)
	decls := map[string]map[string]bool{}
	for _, dirs := range pkgs {
		for _, dir := range dirs {
			decls[dir] = declared(t, dir)
		}
	}
	for _, m := range codeName.FindAllStringSubmatch(page, -1) {
		if !nameExists(m[1], m[2], m[3], pkgs, decls) {
			t.Errorf("docs/architecture.md names %s, which the code does not declare", m[0])
		}
	}
	for _, dirs := range pkgs {
		for _, dir := range dirs {
			if !strings.Contains(page, "| `"+dir+"`") {
				t.Errorf("docs/architecture.md's package table has no row for %s", dir)
			}
		}
	}
}

// nameExists resolves a.b[.c]: a package a declaring b (and b.c), or else a type a with a
// member b in any package. Names of files (a.go) and of other projects' packages are not code
// names of Lifeboat and pass.
func nameExists(a, b, c string, pkgs map[string][]string, decls map[string]map[string]bool) bool {
	if b == "go" || b == "md" || b == "yaml" {
		return true
	}
	if dirs, ok := pkgs[a]; ok {
		want := b
		if c != "" {
			want = b + "." + c
		}
		for _, dir := range dirs {
			if decls[dir][want] || c == "" && hasMember(decls[dir], b) {
				return true
			}
		}
		return false
	}
	if a[0] < 'A' || a[0] > 'Z' {
		return true // corev1.Pod, spec.nodeName: not Lifeboat's
	}
	for _, d := range decls {
		if d[a+"."+b] {
			return true
		}
	}
	return false
}

// hasMember reports whether some type of the package has a method or field named name
// (`controller.handleNotice` names the Controller's method).
func hasMember(decls map[string]bool, name string) bool {
	for d := range decls {
		if _, member, ok := strings.Cut(d, "."); ok && member == name {
			return true
		}
	}
	return false
}
