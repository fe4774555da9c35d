// SPDX-License-Identifier: Apache-2.0

package notice

import (
	"bytes"
	"fmt"
	"strings"
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
	p("| kind | what AWS announces | from | id starts | drains by default | the instance goes at the deadline | once drained | taint key | Event reason | NTH's `.Kind` in webhooks |\n")
	p("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, k := range Kinds() {
		r := kinds[k]
		p("| `%s` | %s | %s | `%s-` | %s | %s | %s | %s | `%s` | %s |\n", k, r.About, sources(r.Sources), r.Short, drains(r), goes(r), ends(r),
			code(r.TaintKey), r.EventReason, code(r.NTHKind))
	}
	p("\nA scheduled kind's drain begins `NODE_TERMINATION_GRACE_PERIOD` before its start; a later copy from\n")
	p("the queue or from DescribeInstanceStatus may move the start within the same episode, and a boot of the\n")
	p("instance ends the notice.\n")
	return b.Bytes()
}

func sources(ss []Source) string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = "`" + string(s) + "`"
	}
	return strings.Join(out, ", ")
}

func drains(r Rules) string {
	switch {
	case r.Hook == HookLaunch:
		return "no: answered at intake, never recorded"
	case r.DrainOptIn:
		return "from the queue; from instance metadata with `ENABLE_REBALANCE_DRAINING`"
	case r.Scheduled:
		return "yes, from `NODE_TERMINATION_GRACE_PERIOD` before its start"
	}
	return yes(r.Drains)
}

func ends(r Rules) string {
	switch {
	case r.Hook == HookLaunch:
		return "its launch hook is completed once the node is Ready"
	case r.Ends == EndsHookCompleted:
		return "its termination hook is completed (kept alive while the drain runs)"
	case r.Ends == EndsMarkedUnhealthy:
		return "the instance is marked Unhealthy with `SET_IMPAIRED_INSTANCE_UNHEALTHY`"
	case r.Ends == EndsRepaired:
		return "the instance is given `NODE_REPAIR_ACTION`"
	}
	return "nothing: the node stays cordoned until the instance goes"
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
