// SPDX-License-Identifier: Apache-2.0

package layout

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// spdxHeader opens every Go file of the project: the license (LICENSE) by its SPDX identifier.
const spdxHeader = "// SPDX-License-Identifier: Apache-2.0\n"

// withoutHeader are directories whose Go files do not carry the header yet, each work to
// do: the test fails when one does (strike it off) or is gone.
var withoutHeader = []string{}

// TestGoFilesNameTheLicense: every Go file of the repository (product, tests, tools and their
// modules) starts with the SPDX line, followed by a blank line so that it is never taken for
// the package's documentation.
func TestGoFilesNameTheLicense(t *testing.T) {
	root := filepath.Join("..", "..")
	if _, err := os.Stat(filepath.Join(root, "LICENSE")); err != nil {
		t.Fatalf("no LICENSE at the repository's root: %v", err)
	}
	missing := map[string]int{}
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "_output" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		files++
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if !bytes.HasPrefix(b, []byte(spdxHeader+"\n")) {
			rel, _ := filepath.Rel(root, filepath.Dir(path))
			missing[filepath.ToSlash(rel)]++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("only %d Go files found: the walk reads the wrong tree", files)
	}
	excepted := map[string]bool{}
	for _, dir := range withoutHeader {
		excepted[dir] = true
		if _, err := os.Stat(filepath.Join(root, dir)); err != nil {
			t.Errorf("%s is listed in withoutHeader and is gone: strike it off", dir)
			continue
		}
		left := 0
		for m, n := range missing {
			if m == dir || strings.HasPrefix(m, dir+"/") {
				left += n
			}
		}
		if left == 0 {
			t.Errorf("%s carries the header now: strike it off withoutHeader", dir)
		}
	}
	for dir, n := range missing {
		top := dir
		for _, e := range withoutHeader {
			if strings.HasPrefix(dir, e+"/") {
				top = e
			}
		}
		if !excepted[top] {
			t.Errorf("%s: %d Go files do not start with %q and a blank line", dir, n, strings.TrimSpace(spdxHeader))
		}
	}
}
