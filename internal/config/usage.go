// SPDX-License-Identifier: Apache-2.0

package config

import (
	"errors"
	"fmt"
	"io"
)

// WriteSettings lists the daemon's settings under intro, grouped as in the docs: each one's
// flag, environment variable, default and use.
func WriteSettings(w io.Writer, intro string) {
	fmt.Fprint(w, intro)
	group := ""
	for _, s := range Settings() {
		if s.Group != group {
			group = s.Group
			fmt.Fprintf(w, "\n  %s\n", group)
		}
		def := ""
		if s.Default != "" && len(s.Default) < 40 {
			def = " (default " + s.Default + ")"
		}
		fmt.Fprintf(w, "    --%s, %s%s\n        %s\n", s.Flag, s.Env, def, s.Usage)
	}
}

// WriteError says what is wrong with the settings, one problem a line when err is an *Error.
func WriteError(w io.Writer, prog string, err error) {
	var cerr *Error
	if errors.As(err, &cerr) {
		fmt.Fprintf(w, "%s: invalid configuration:\n", prog)
		for _, p := range cerr.Problems {
			fmt.Fprintf(w, "  %s\n", p)
		}
	} else {
		fmt.Fprintf(w, "%s: %v\n", prog, err)
	}
}
