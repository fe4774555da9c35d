// SPDX-License-Identifier: Apache-2.0

package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// goFiles parses the non-test Go files of the package in dir (relative to the repository, or
// absolute).
func goFiles(t *testing.T, dir string) []*ast.File {
	t.Helper()
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(root, dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	fset := token.NewFileSet()
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}

// stringConsts returns the string constants of files whose names start with prefix.
func stringConsts(files []*ast.File, prefix string) map[string]string {
	out := map[string]string{}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			for i, name := range vs.Names {
				if !strings.HasPrefix(name.Name, prefix) || i >= len(vs.Values) {
					continue
				}
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					if v, err := strconv.Unquote(lit.Value); err == nil {
						out[name.Name] = v
					}
				}
			}
			return true
		})
	}
	return out
}

func readDoc(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestEventReasonsDocumented: every Event reason internal/events defines is in the Events
// reference, so a new reason cannot ship undocumented.
func TestEventReasonsDocumented(t *testing.T) {
	reasons := stringConsts(goFiles(t, "internal/events"), "Reason")
	if len(reasons) < 10 {
		t.Fatalf("found %d Reason constants in internal/events; the test no longer finds them", len(reasons))
	}
	doc := readDoc(t, "docs/reference/events.md")
	for name, reason := range reasons {
		if !strings.Contains(doc, "`"+reason+"`") {
			t.Errorf("docs/reference/events.md does not name the reason `%s` (events.%s)", reason, name)
		}
	}
}

// TestNodeRecordDocumented: the Node record reference states the record version this code
// writes and names every JSON field of the record and of the types it is made of, wherever the
// record's package lives: the package that declares a struct Record with an "intents" field.
func TestNodeRecordDocumented(t *testing.T) {
	dir := recordPackage(t)
	files := goFiles(t, dir)
	structs, version := map[string]*ast.StructType{}, ""
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.TypeSpec:
				if st, ok := n.Type.(*ast.StructType); ok {
					structs[n.Name.Name] = st
				}
			case *ast.ValueSpec:
				for i, name := range n.Names {
					lit, ok := valueAt(n, i).(*ast.BasicLit)
					if ok && lit.Kind == token.INT && (name.Name == "Version" || name.Name == "RecordVersion") {
						version = lit.Value
					}
				}
			}
			return true
		})
	}
	if version == "" {
		t.Fatalf("no Version constant in %s beside the record", dir)
	}
	doc := readDoc(t, "docs/reference/node-record.md")
	if want := "The current version is " + version + "."; !strings.Contains(doc, want) {
		t.Errorf("docs/reference/node-record.md lacks %q: the record's version in %s is %s", want, dir, version)
	}
	// Every JSON field of Record and of the package's structs it holds, directly or not.
	seen := map[string]bool{}
	var visit func(typ string)
	visit = func(typ string) {
		st := structs[typ]
		if st == nil || seen[typ] {
			return
		}
		seen[typ] = true
		for _, field := range st.Fields.List {
			visit(typeName(field.Type))
			if field.Tag == nil {
				continue
			}
			tag, err := strconv.Unquote(field.Tag.Value)
			if err != nil {
				t.Fatal(err)
			}
			name, _, _ := strings.Cut(reflect.StructTag(tag).Get("json"), ",")
			if name != "" && name != "-" && !strings.Contains(doc, "`"+name+"`") {
				t.Errorf("docs/reference/node-record.md does not name the field `%s` (%s.%s)", name, dir, typ)
			}
		}
	}
	visit("Record")
	if len(seen) < 3 {
		t.Errorf("found only %d of the record's types in %s", len(seen), dir)
	}
}

// recordPackage finds the directory, under internal/, of the struct Record that has a field
// tagged json:"intents".
func recordPackage(t *testing.T) string {
	t.Helper()
	found := ""
	err := filepath.WalkDir(filepath.Join(root, "internal"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok || ts.Name.Name != "Record" {
				return true
			}
			if st, ok := ts.Type.(*ast.StructType); ok {
				for _, field := range st.Fields.List {
					if field.Tag != nil && strings.Contains(field.Tag.Value, `json:"intents`) {
						found = filepath.Dir(path)
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found == "" {
		t.Fatal(`no struct Record with a json:"intents" field under internal/; the test no longer finds the record`)
	}
	rel, err := filepath.Rel(root, found)
	if err != nil {
		t.Fatal(err)
	}
	return filepath.ToSlash(rel)
}

// typeName is the named type an expression refers to, through pointers, slices and maps
// (their values); "" for anything else.
func typeName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.StarExpr:
		return typeName(e.X)
	case *ast.ArrayType:
		return typeName(e.Elt)
	case *ast.MapType:
		return typeName(e.Value)
	}
	return ""
}

func valueAt(vs *ast.ValueSpec, i int) ast.Expr {
	if i < len(vs.Values) {
		return vs.Values[i]
	}
	return nil
}
