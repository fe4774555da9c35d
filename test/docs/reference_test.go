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

// goFiles parses the non-test Go files of the package in dir (relative to the repository).
func goFiles(t *testing.T, dir string) []*ast.File {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(root, dir))
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	fset := token.NewFileSet()
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(root, dir, e.Name()), nil, 0)
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

// recordTypes are the types the Node record's JSON is made of.
var recordTypes = []string{"Record", "Intent", "IntentLifecycle", "Heartbeat", "Owner", "HandbackRecord", "Retention"}

// TestNodeRecordDocumented: the Node record reference states the record version this code
// writes and names every JSON field of the record, wherever the record's package lives.
func TestNodeRecordDocumented(t *testing.T) {
	dir, version := "", ""
	err := filepath.WalkDir(filepath.Join(root, "internal"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if vs, ok := n.(*ast.ValueSpec); ok {
				for i, name := range vs.Names {
					if lit, ok := valueAt(vs, i).(*ast.BasicLit); ok && name.Name == "RecordVersion" && lit.Kind == token.INT {
						dir, version = filepath.Dir(path), lit.Value
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
	if dir == "" {
		t.Fatal("no RecordVersion constant under internal/; the test no longer finds the record")
	}
	doc := readDoc(t, "docs/reference/node-record.md")
	if want := "The current version is " + version + "."; !strings.Contains(doc, want) {
		t.Errorf("docs/reference/node-record.md lacks %q: RecordVersion is %s", want, version)
	}
	// The record's types, from the package that declares RecordVersion.
	rel, err := filepath.Rel(root, dir)
	if err != nil {
		t.Fatal(err)
	}
	structs := map[string]*ast.StructType{}
	for _, f := range goFiles(t, rel) {
		ast.Inspect(f, func(n ast.Node) bool {
			if ts, ok := n.(*ast.TypeSpec); ok {
				if st, ok := ts.Type.(*ast.StructType); ok {
					structs[ts.Name.Name] = st
				}
			}
			return true
		})
	}
	for _, typ := range recordTypes {
		st := structs[typ]
		if st == nil {
			t.Errorf("no struct %s in %s beside RecordVersion", typ, rel)
			continue
		}
		for _, field := range st.Fields.List {
			if field.Tag == nil {
				continue
			}
			tag, err := strconv.Unquote(field.Tag.Value)
			if err != nil {
				t.Fatal(err)
			}
			name, _, _ := strings.Cut(reflect.StructTag(tag).Get("json"), ",")
			if name == "" || name == "-" {
				continue
			}
			if !strings.Contains(doc, "`"+name+"`") {
				t.Errorf("docs/reference/node-record.md does not name the field `%s` (%s.%s)", name, rel, typ)
			}
		}
	}
}

func valueAt(vs *ast.ValueSpec, i int) ast.Expr {
	if i < len(vs.Values) {
		return vs.Values[i]
	}
	return nil
}
