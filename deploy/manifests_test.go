// SPDX-License-Identifier: Apache-2.0

package deploy_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestManifestsMatchChart re-renders deploy/manifests/ with render-manifests.sh and fails
// when the committed files differ, so the plain manifests never drift from the chart.
func TestManifestsMatchChart(t *testing.T) {
	h := newHelm(t)
	out := t.TempDir()
	cmd := exec.Command("bash", "render-manifests.sh", out)
	cmd.Env = append(h.env, "HELM="+h.bin)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("render-manifests.sh: %v\n%s", err, b)
	}
	fresh, err := filepath.Glob(filepath.Join(out, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	committed, err := filepath.Glob(filepath.Join("manifests", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if names(fresh) != names(committed) {
		t.Fatalf("deploy/manifests holds %s, the chart renders %s: run deploy/render-manifests.sh", names(committed), names(fresh))
	}
	for _, f := range fresh {
		want, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join("manifests", filepath.Base(f)))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("deploy/manifests/%s differs from the chart (first difference at line %d): run deploy/render-manifests.sh",
				filepath.Base(f), firstDifferentLine(string(got), string(want)))
		}
	}
	// The plain manifests must also decode: they are applied with kubectl, not helm.
	for _, f := range committed {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := decodeAll(string(b)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func names(paths []string) string {
	var out []string
	for _, p := range paths {
		out = append(out, filepath.Base(p))
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

func firstDifferentLine(a, b string) int {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(al), len(bl)) {
		if al[i] != bl[i] {
			return i + 1
		}
	}
	return min(len(al), len(bl)) + 1
}
