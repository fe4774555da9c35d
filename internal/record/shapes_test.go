// SPDX-License-Identifier: Apache-2.0

package record

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

// The hand-written shape checks accept exactly what their patterns do.
func TestShapeChecksMatchTheirPatterns(t *testing.T) {
	checks := []struct {
		name    string
		check   func(string) bool
		pattern *regexp.Regexp
	}{
		{"notice id", validNoticeID, regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)},
		{"kind", validKind, regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)},
	}
	fixed := []string{"", "-", "a", "0", "a-", "-a", "a-b", "spot-itn", "0abc", "Abc", "a_b", "a.b", "é",
		strings.Repeat("a", 63), strings.Repeat("a", 64), strings.Repeat("a", 62) + "-", "a" + strings.Repeat("-", 61) + "b"}
	const alphabet = "abz09-A_."
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		b := make([]byte, rng.IntN(70))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		fixed = append(fixed, string(b))
	}
	for _, c := range checks {
		for _, s := range fixed {
			if got, want := c.check(s), c.pattern.MatchString(s); got != want {
				t.Errorf("%s %q: %v, the pattern says %v", c.name, s, got, want)
			}
		}
	}
}
