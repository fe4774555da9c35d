// SPDX-License-Identifier: Apache-2.0

package demo

import (
	"os"
	"path/filepath"
	"testing"
)

// A log being written is read line by line: a half-written line waits for its end, and a
// line that is not JSON (a panic trace, say) is passed over.
func TestLogTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "controller.log")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tail := &logTail{path: path}
	steps := []struct {
		write string
		want  []string // msg of each line returned
	}{
		{``, nil},
		{`{"msg":"one"}` + "\n" + `{"msg":"tw`, []string{"one"}},
		{`o","n":2}` + "\n", []string{"two"}},
		{"panic: boom\n" + `{"msg":"three"}` + "\n", []string{"three"}},
		{``, nil},
	}
	for i, s := range steps {
		if _, err := f.WriteString(s.write); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, l := range tail.next() {
			got = append(got, l.str("msg"))
		}
		if len(got) != len(s.want) || (len(got) > 0 && got[0] != s.want[0]) {
			t.Errorf("step %d: lines %q, want %q", i, got, s.want)
		}
	}
	if missing := (&logTail{path: filepath.Join(t.TempDir(), "absent.log")}).next(); missing != nil {
		t.Errorf("a missing file gave lines %v", missing)
	}
}
