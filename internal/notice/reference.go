// SPDX-License-Identifier: Apache-2.0

package notice

import (
	"bytes"
	"fmt"
)

//go:generate go test -count=1 -run ^TestKindsReferenceUpToDate$ . -args -update

// KindsReferencePath is where the kinds reference lives, from the repository's root.
const KindsReferencePath = "docs/reference/notice-kinds.md"

// KindsReference renders the kind table for users: what Lifeboat does with a notice of each
// kind, so the docs cannot say other than the code.
func KindsReference() []byte {
	var b bytes.Buffer
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("# Notice kinds\n\n")
	p("<!-- Generated from the kind table in internal/notice by `make docs`; do not edit by hand. -->\n\n")
	p("What Lifeboat does with a notice of each kind. Where each comes from and how its id and\n")
	p("deadline are made: [notices](../concepts/notices.md). A kind's drain can be turned off by\n")
	p("settings (`CORDON_ONLY`); a rebalance recommendation drains from the queue, and from instance\n")
	p("metadata with `ENABLE_REBALANCE_DRAINING`;\n")
	p("its taint is put only with `TAINT_NODE=true`.\n\n")
	p("| kind | what AWS announces | id starts | drains by default | the instance goes at the deadline | taint key | Event reason | NTH's `.Kind` in webhooks |\n")
	p("| --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, k := range Kinds() {
		r := kinds[k]
		p("| `%s` | %s | `%s-` | %s | %s | %s | `%s` | %s |\n", k, r.About, r.Short, yes(r.Drains), goes(r), code(r.TaintKey), r.EventReason, code(r.NTHKind))
	}
	return b.Bytes()
}

func yes(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func goes(r Rules) string {
	switch {
	case r.GoesAtDeadline:
		return "yes, and nothing extends it"
	case r.Reclaims:
		return "yes"
	}
	return "no: the deadline is Lifeboat's drain budget"
}

func code(s string) string {
	if s == "" {
		return "none"
	}
	return "`" + s + "`"
}
