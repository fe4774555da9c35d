// SPDX-License-Identifier: Apache-2.0

package notice

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "write the kinds reference")

// TestKindsReferenceUpToDate fails when the kinds reference no longer matches the table; with
// -update it writes it.
func TestKindsReferenceUpToDate(t *testing.T) {
	path := filepath.Join("..", "..", filepath.FromSlash(KindsReferencePath))
	want := KindsReference()
	if *update {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v (generate it with `make docs`)", KindsReferencePath, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is out of date with the kind table in internal/notice; regenerate it with `make docs`", KindsReferencePath)
	}
}
