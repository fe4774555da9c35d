// SPDX-License-Identifier: Apache-2.0

// Package layout holds the project's layout to its limits: no product function longer than
// maxFunctionLines (tables aside) and no type with more than maxMethods methods, so that the
// code stays one a new engineer can walk. Today's exceptions are listed by name; each is
// work to do, and the test fails when one is fixed and not struck off, or a new one appears.
package layout

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const (
	maxFunctionLines = 60
	maxMethods       = 12
)

// longFunctions are today's product functions over maxFunctionLines, by package path and
// name: none. A function that must be long is a table, and is listed in tables.
var longFunctions = []string{}

// tables are functions that are one table, whatever their length.
var tables = []string{
	"internal/config.settings",
	// One literal of the collectors' definitions, then their registrations: no logic.
	"internal/metrics.New",
}

// manyMethods are today's types over maxMethods methods.
var manyMethods = []string{
	"internal/drain.Drainer",
	"internal/events.Recorder",
	"internal/kube/pacing.Budget",
	"internal/metrics.Metrics",
	"internal/source/sqs.Consumer",
	"internal/webhook.execution",
}

func TestLayoutLimits(t *testing.T) {
	root := filepath.Join("..", "..")
	long, methods := measure(t, root)
	var gotLong []string
	for name, n := range long {
		if n > maxFunctionLines && !slices.Contains(tables, name) {
			gotLong = append(gotLong, name)
		}
	}
	var gotMany []string
	for name, n := range methods {
		if n > maxMethods {
			gotMany = append(gotMany, name)
		}
	}
	compare(t, "function over "+strconv.Itoa(maxFunctionLines)+" lines", gotLong, longFunctions, long)
	compare(t, "type with over "+strconv.Itoa(maxMethods)+" methods", gotMany, manyMethods, methods)
}

// compare reports what is over the limit and not listed (new), and what is listed and no
// longer over it (fixed: strike it off).
func compare(t *testing.T, what string, got, listed []string, sizes map[string]int) {
	t.Helper()
	sort.Strings(got)
	for _, g := range got {
		if !slices.Contains(listed, g) {
			t.Errorf("new %s: %s (%d); split it", what, g, sizes[g])
		}
	}
	for _, l := range listed {
		if !slices.Contains(got, l) {
			t.Errorf("%s is no longer a %s (%d): strike it off the list", l, what, sizes[l])
		}
	}
	t.Logf("%d listed exceptions: %s over its limit", len(listed), what)
}

// measure reads the product code (cmd, internal; no tests) and returns each function's length
// in lines and each type's number of methods, by package path and name.
func measure(t *testing.T, root string) (lines, methods map[string]int) {
	t.Helper()
	lines, methods = map[string]int{}, map[string]int{}
	fset := token.NewFileSet()
	for _, top := range []string{"cmd", "internal"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, filepath.Dir(path))
			pkg := filepath.ToSlash(rel)
			for _, d := range f.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok || fd.Body == nil {
					continue
				}
				n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
				name := pkg + "." + fd.Name.Name
				lines[name] = max(lines[name], n)
				if fd.Recv != nil {
					if recv := receiver(fd.Recv.List[0].Type); recv != "" {
						methods[pkg+"."+recv]++
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return lines, methods
}

func receiver(e ast.Expr) string {
	switch v := e.(type) {
	case *ast.StarExpr:
		return receiver(v.X)
	case *ast.IndexExpr: // a generic type
		return receiver(v.X)
	case *ast.Ident:
		return v.Name
	}
	return ""
}
