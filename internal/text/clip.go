// SPDX-License-Identifier: Apache-2.0

// Package text holds the one way Lifeboat shortens text it did not write (a condition's
// message, an AWS description, a value read from a record) before it is recorded or shown.
package text

import "unicode/utf8"

// Clip cuts s to at most max bytes on a character boundary and, when it cut, adds mark. A cut
// inside a multi-byte character would leave invalid UTF-8, which a JSON round trip turns into
// replacement characters: the text read back would no longer be what was written.
func Clip(s string, max int, mark string) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}
