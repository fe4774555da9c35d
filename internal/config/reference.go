// SPDX-License-Identifier: Apache-2.0

package config

import (
	"bytes"
	"fmt"
	"strings"
)

//go:generate go run ./docgen -o ../../docs/configuration.md

// ReferenceCommand is what regenerates docs/configuration.md; messages about a stale
// reference name it.
const ReferenceCommand = "make docs"

// Reference renders the configuration reference (docs/configuration.md) from the settings
// table, so the documentation cannot describe settings the code does not have.
func Reference() []byte {
	r := &reference{all: Settings()}
	r.intro()
	r.differences()
	r.lifeboatOnly()
	long := r.groups()
	r.longDefaults(long)
	return bytes.TrimRight(r.b.Bytes(), "\n")
}

// reference is the reference being written, section by section.
type reference struct {
	all []*Setting
	b   bytes.Buffer
}

func (r *reference) p(format string, args ...any) { fmt.Fprintf(&r.b, format, args...) }

// intro says how settings are spelled, read and checked.
func (r *reference) intro() {
	r.p("# Configuration reference\n\n")
	r.p("<!-- Generated from internal/config/settings.go by `%s`; do not edit by hand. -->\n\n", ReferenceCommand)
	r.p("Every setting is an environment variable and a flag. The variables are those of\n")
	r.p("aws-node-termination-handler (NTH), so an NTH deployment keeps its configuration.\n\n")
	r.p("- A flag wins over the variable; an empty variable counts as unset.\n")
	r.p("- A flag is the variable in lower kebab case (`WORKERS` is `--workers`), with one or two dashes.\n")
	if odd := unusualFlags(r.all); len(odd) > 0 {
		r.p("  Exceptions, as in NTH: %s.\n", strings.Join(odd, ", "))
	}
	r.p("- Deprecated names (aliases) are still accepted, as variables and as flags; the current name\n")
	r.p("  wins when both are set, and a warning names the replacement.\n")
	r.p("- Every value is checked at start. Bad values stop Lifeboat with exit status 2 and one line per\n")
	r.p("  problem, naming the input. `lifeboat config` prints the effective values and where each came\n")
	r.p("  from; `lifeboat help` lists the settings.\n")
	r.p("- Secrets (marked below) are never printed or logged once set.\n\n")
}

// differences lists the defaults that differ from NTH's, with the reason for each.
func (r *reference) differences() {
	r.p("## Deliberate differences from NTH's defaults\n\n")
	r.p("| setting | NTH default | Lifeboat default | why |\n| --- | --- | --- | --- |\n")
	for _, s := range r.all {
		if s.Why == "" {
			continue
		}
		r.p("| `%s` | %s | %s | %s |\n", s.Env, valueOrUnset(s.NTHDefault), valueOrUnset(s.Default), cell(s.Why))
	}
}

func (r *reference) lifeboatOnly() {
	r.p("\n## Settings NTH does not have\n\n")
	for _, s := range r.all {
		if s.Lifeboat {
			r.p("- `%s`, in *%s*: %s\n", s.Env, s.Group, cell(s.Usage))
		}
	}
	r.p("\n")
}

// groups writes one table per group of settings, and returns the settings whose default is
// too long for a cell: it is written after the tables.
func (r *reference) groups() (long []*Setting) {
	group := ""
	for _, s := range r.all {
		if s.Group != group {
			group = s.Group
			r.p("## %s\n\n", group)
			r.p("| variable / flag | default | accepted values | meaning |\n| --- | --- | --- | --- |\n")
		}
		if r.row(s) {
			long = append(long, s)
		}
		if next := nextGroup(r.all, s); next != group {
			r.p("\n")
			if group == groupDrain {
				r.p("%s\n\n", podRules)
			}
		}
	}
	return long
}

// row writes the setting's row of its group's table; it reports whether the default was too
// long for the cell.
func (r *reference) row(s *Setting) (long bool) {
	name := fmt.Sprintf("`%s`<br>`--%s`", s.Env, s.Flag)
	for _, a := range s.Aliases {
		name += fmt.Sprintf("<br>deprecated: `%s`, `--%s`", a, FlagName(a))
	}
	if s.Lifeboat {
		name += "<br>*Lifeboat only*"
	}
	def := valueOrUnset(s.Default)
	if len(s.Default) > 40 {
		def = "see [below](#default-" + anchor(s.Env) + ")"
		long = true
	}
	if s.Why != "" {
		def += "<br>(NTH: " + valueOrUnset(s.NTHDefault) + ")"
	}
	meaning := cell(s.Usage)
	if s.Why != "" {
		meaning += " **Differs from NTH:** " + cell(s.Why) + "."
	}
	if s.Secret {
		meaning += " *Secret: never printed or logged.*"
	}
	r.p("| %s | %s | %s | %s |\n", name, def, cell(accepted(s.value)), meaning)
	return long
}

func (r *reference) longDefaults(long []*Setting) {
	for _, s := range long {
		r.p("<a id=\"default-%s\"></a>\n\n", anchor(s.Env))
		r.p("### Default of %s\n\n", s.Env)
		r.p("```\n%s\n```\n\n", s.Default)
	}
}

// podRules says which pods a drain moves, beyond what the settings above decide. It is kept
// here, next to the settings, so the reference is whole.
const podRules = `### Which pods a drain moves

A drain evicts every pod on the node except these, which stay (each is counted in
` + "`lifeboat_drain_pods_left_total{reason}`" + ` and logged with its reason):

| pod | rule | reason label |
| --- | --- | --- |
| mirror pods of static pods | the kubelet owns them | ` + "`mirror`" + ` |
| Lifeboat's own pod (POD_NAME in NAMESPACE), an agent's | it must finish the job (a controller's is evicted last instead, once every other pod's eviction was accepted: its standby takes over) | ` + "`own_pod`" + ` |
| Succeeded or Failed pods | nothing to stop | ` + "`finished`" + ` |
| pods already terminating | already leaving; the drain waits for them | ` + "`terminating`" + ` |
| DaemonSet pods, with IGNORE_DAEMON_SETS=true | they would come straight back | ` + "`daemonset`" + ` |
| pods with an emptyDir volume, with DELETE_LOCAL_DATA=false | their data would be lost | ` + "`local_data`" + ` |
| pods that tolerate every interruption taint on the node (TAINT_NODE=true; a toleration with ` + "`operator: Exists`" + ` and no key tolerates them all) | evicted, they would be scheduled straight back | ` + "`tolerates_taint`" + ` |
| pods marked not to disrupt, when no notice of the node is a reclaim (below) | their owners asked; the node is not being taken away | ` + "`do_not_disrupt`" + ` |

**Marked not to disrupt** means the annotation ` + "`karpenter.sh/do-not-disrupt: \"true\"`" + ` or
` + "`cluster-autoscaler.kubernetes.io/safe-to-evict: \"false\"`" + `, as Karpenter and the Cluster
Autoscaler read them. As with Karpenter, ` + "`karpenter.sh/do-not-disrupt`" + ` may also hold a duration
(` + "`\"30m\"`" + `, ` + "`\"1h30m\"`" + `): the pod is protected until that long after it started (its
` + "`status.startTime`" + `; a pod not started yet counts from now), and is an ordinary pod after that;
under a reclaim it leaves when its protection ends, if that comes before its turn at the deadline.
` + "`\"false\"`" + ` marks nothing. Any other value cannot be read: the pod is protected as if it said
` + "`\"true\"`" + `, the log says so, and a ` + "`DoNotDisruptUnreadable`" + ` Warning Event on the pod tells its owners,
once per interruption. ` + "`lifeboat check`" + ` reads the annotation the same way.

- Under a **reclaim** (a Spot or capacity-reservation interruption warning, an Auto Scaling
  termination hook, a scheduled event) the instance goes at the deadline whatever happens.
  These pods leave last, each at the deadline minus its grace period (POD_TERMINATION_GRACE_PERIOD
  when set) minus 2 s, so they run as long as they can and still stop cleanly; a deadline
  brought forward brings their turn forward. The other pods are evicted meanwhile, as usual. A
  termination hook's deadline counts the heartbeats Lifeboat will send, so never more than
  HEARTBEAT_UNTIL after the hook began.
- Under a **rebalance recommendation or an instance state change** (no reclaim: the deadline is
  a budget from NODE_TERMINATION_GRACE_PERIOD) they stay. The drain reports them: a warning in
  the log, a ` + "`PodsHeld`" + ` Warning Event on the node naming them, and the node's record lists them. A
  reclaim that joins the episode later (a Spot warning after the rebalance recommendation)
  drains the node again for them.

The rest are evicted in tiers: ordinary pods, DaemonSet pods (when not ignored),
system-cluster-critical and system-node-critical pods, critical DaemonSet pods. A tier starts
once every pod of the one before is gone or held by a PodDisruptionBudget (a held pod's
eviction is retried until the deadline, and reported as held), and in any case no later than
the deadline minus its own pods' grace period minus 2 s: a misconfigured budget never keeps
CoreDNS on a node until the instance ends, and pods still leaving within their grace period
are waited for until then.`

// nextGroup is the group of the setting after s, or "" after the last.
func nextGroup(all []*Setting, s *Setting) string {
	for i, x := range all {
		if x == s && i+1 < len(all) {
			return all[i+1].Group
		}
	}
	return ""
}

// unusualFlags lists the settings whose flag is not the variable's kebab case.
func unusualFlags(all []*Setting) []string {
	var out []string
	for _, s := range all {
		if s.Flag != FlagName(s.Env) {
			out = append(out, fmt.Sprintf("`%s` is `--%s`", s.Env, s.Flag))
		}
	}
	return out
}

// accepted describes, in words, what a setting's parser takes.
func accepted(v value) string {
	switch v := v.(type) {
	case boolValue:
		return "true or false"
	case intValue:
		return "whole number, " + v.describeRange()
	case floatValue:
		if v.zeroAuto {
			return fmt.Sprintf("0 (automatic) or a number greater than %g", v.min)
		}
		return fmt.Sprintf("number greater than %g", v.min)
	case stringValue:
		return "text"
	case enumValue:
		return "one of " + strings.Join(v.allowed, ", ") + " (any case)"
	case urlValue:
		s := "absolute " + strings.Join(v.schemes, " or ") + " URL"
		if v.optional {
			s += ", or empty"
		}
		return s
	case headersValue:
		return "JSON object of strings"
	case keyValuesValue:
		return "key1=value1,key2=value2"
	case templateValue:
		return "Go text/template, checked at start"
	case durationValue:
		if v.zeroOff {
			return fmt.Sprintf("0s (off), or a Go duration, %s to %s", v.min, v.max)
		}
		return fmt.Sprintf("Go duration, %s to %s", v.min, v.max)
	case pathValue:
		return "HTTP path starting with /"
	case repairConditionsValue:
		return "Type=Status:Duration,... (status True, False or Unknown; duration 0s to 168h); empty for the defaults"
	case selectorValue:
		return "Kubernetes label selector, or empty for every node"
	case repairPoliciesValue:
		return "YAML or JSON list of {condition, status, reason, wait, action} (action replace, reboot or none), at most 64; empty for none"
	case ipValue:
		return "IP address, or empty for every interface"
	case objectNameValue:
		return "Kubernetes object name (lowercase letters, digits, '-' and '.'; at most 253 characters)"
	case accountsValue:
		return "comma-separated AWS account ids (12 digits), or empty"
	}
	return fmt.Sprintf("%T", v)
}

func valueOrUnset(v string) string {
	if v == "" {
		return "(unset)"
	}
	return "`" + strings.ReplaceAll(oneLine(v), "|", `\|`) + "`"
}

// cell makes prose safe inside a Markdown table cell: pipes would end the cell and <name>
// would be taken for an HTML tag.
func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;").Replace(oneLine(s))
}

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " ") }

func anchor(env string) string { return strings.ToLower(strings.ReplaceAll(env, "_", "-")) }
