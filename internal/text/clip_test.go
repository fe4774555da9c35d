// SPDX-License-Identifier: Apache-2.0

package text

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestClip(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		s    string
		max  int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"abcdefghijk", 10, "abcdefghij…"},
		{"ab" + strings.Repeat("é", 5), 5, "abé…"}, // byte 5 is inside the second é
		{"€€€", 4, "€…"},
		{"€", 2, "…"},
	} {
		got := Clip(tc.s, tc.max, "…")
		if got != tc.want {
			t.Errorf("Clip(%q, %d) = %q, want %q", tc.s, tc.max, got, tc.want)
		}
		if !utf8.ValidString(got) {
			t.Errorf("Clip(%q, %d) = %q: not valid UTF-8", tc.s, tc.max, got)
		}
	}
}

func FuzzClip(f *testing.F) {
	f.Add("Node condition KernelReady: 内核错误", 20)
	f.Fuzz(func(t *testing.T, s string, max int) {
		if max < 0 || !utf8.ValidString(s) {
			return
		}
		got := Clip(s, max, "")
		if len(got) > max || !utf8.ValidString(got) || !strings.HasPrefix(s, got) {
			t.Fatalf("Clip(%q, %d) = %q", s, max, got)
		}
	})
}
