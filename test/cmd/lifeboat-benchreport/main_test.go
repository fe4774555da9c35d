// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	fixture, err := os.ReadFile("../../../test/benchreport/testdata/drain-pods10.txt")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	jsonPath, svgPath := filepath.Join(dir, "bench", "results.json"), filepath.Join(dir, "bench", "results.svg")
	tests := []struct {
		name     string
		args     []string
		stdin    string
		code     int
		stdout   string
		stderr   string
		wantFile bool
	}{
		{name: "report", args: []string{"-json", jsonPath, "-svg", svgPath}, stdin: string(fixture), code: 0,
			stdout: "internal/drain  CordonAndDrain/pods=10  1     14     requests/drain", wantFile: true},
		{name: "from a file", args: []string{"-in", "../../../test/benchreport/testdata/drain-pods10.txt"}, code: 0, stdout: "0.151"},
		{name: "no results", stdin: "PASS\n", code: 1, stderr: "no benchmark results in the input"},
		{name: "unreadable result", stdin: "BenchmarkA-2\t1\tx ns/op\n", code: 1, stderr: `value "x" (unit ns/op) is not a number`},
		{name: "missing input file", args: []string{"-in", filepath.Join(dir, "nope.txt")}, code: 1, stderr: "nope.txt"},
		{name: "bad flag", args: []string{"-colour"}, code: 2, stderr: "flag provided but not defined: -colour"},
		{name: "stray argument", args: []string{"out.txt"}, code: 2, stderr: `unexpected argument "out.txt"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tt.args, strings.NewReader(tt.stdin), &stdout, &stderr)
			if code != tt.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, tt.code, stderr.String())
			}
			if !strings.Contains(stdout.String(), tt.stdout) {
				t.Errorf("stdout %q lacks %q", stdout.String(), tt.stdout)
			}
			if !strings.Contains(stderr.String(), tt.stderr) {
				t.Errorf("stderr %q lacks %q", stderr.String(), tt.stderr)
			}
			if !tt.wantFile {
				return
			}
			var rep struct {
				Results []struct{ Name string }
			}
			b, err := os.ReadFile(jsonPath)
			if err != nil || json.Unmarshal(b, &rep) != nil || len(rep.Results) != 1 || rep.Results[0].Name != "CordonAndDrain/pods=10" {
				t.Errorf("results.json: %v %s", err, b)
			}
			if svg, err := os.ReadFile(svgPath); err != nil || !bytes.HasPrefix(svg, []byte("<svg ")) {
				t.Errorf("results.svg: %v %.40q", err, svg)
			}
		})
	}
}
