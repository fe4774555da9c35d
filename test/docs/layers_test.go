// SPDX-License-Identifier: Apache-2.0

package docs

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

const modulePath = "lifeboat.dev/lifeboat/"

// layerLine is one layer of docs/architecture.md's "Layers": "1. **name**: `pkg`, `pkg`".
var layerLine = regexp.MustCompile("^([0-9]+)\\. \\*\\*[^*]+\\*\\*: (.+)$")

// TestLayers: every package under internal/ and cmd/ is in one layer of the architecture
// page, and imports only packages of its own layer or below.
func TestLayers(t *testing.T) {
	layer := readLayers(t)
	for _, dirs := range goPackages(t, "internal", "cmd") {
		for _, dir := range dirs {
			own, listed := layer[dir]
			if !listed {
				t.Errorf("%s is in no layer of docs/architecture.md", dir)
				continue
			}
			for _, imp := range productImports(t, dir) {
				if l, ok := layer[imp]; ok && l > own {
					t.Errorf("%s (layer %d) imports %s, a layer above it (%d)", dir, own, imp, l)
				}
			}
		}
	}
}

// readLayers maps each package directory the architecture page places to its layer.
func readLayers(t *testing.T) map[string]int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "docs/architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "### Layers\n")
	if !ok {
		t.Fatal(`docs/architecture.md has no "### Layers" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	out := map[string]int{}
	for _, line := range strings.Split(section, "\n") {
		m := layerLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		n, _ := strconv.Atoi(m[1])
		for _, name := range strings.Split(m[2], ", ") {
			dir := strings.Trim(name, "`")
			if prev, dup := out[dir]; dup {
				t.Errorf("%s is in layers %d and %d", dir, prev, n)
			}
			out[dir] = n
		}
	}
	if len(out) == 0 {
		t.Fatal(`"### Layers" lists no package`)
	}
	return out
}

// productImports are the module's packages that dir's non-test files import.
func productImports(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(root, dir))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	fset := token.NewFileSet()
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(root, dir, e.Name()), nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); strings.HasPrefix(p, modulePath) {
				out = append(out, strings.TrimPrefix(p, modulePath))
			}
		}
	}
	return out
}
