// SPDX-License-Identifier: Apache-2.0

package status

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"lifeboat.dev/lifeboat/internal/output"
)

// Formats Print writes.
const (
	FormatTable = output.Table
	FormatWide  = output.Wide
	FormatName  = output.Name
	FormatJSON  = output.JSON
	FormatYAML  = output.YAML
)

// Formats are the -o values status offers.
var Formats = []string{output.Table, output.Wide, output.Name, output.JSON, output.YAML, output.JSONPath}

// Print writes the report as a table (one summary line per node, then each node's notices,
// pods, volumes and lifecycle actions; wide adds the owner and the notices' kinds), the nodes'
// names, JSON or YAML.
func Print(w io.Writer, r *Report, format string) error {
	f, err := output.Parse(format, Formats...)
	if err != nil {
		return err
	}
	return PrintFormat(w, r, f)
}

// PrintFormat is Print with a parsed format.
func PrintFormat(w io.Writer, r *Report, f output.Format) error {
	switch {
	case f.Structured():
		return output.Write(w, r, f)
	case f.Name == output.Name:
		for _, n := range r.Nodes {
			if _, err := fmt.Fprintf(w, "node/%s\n", n.Name); err != nil {
				return err
			}
		}
		return nil
	}
	printHeld(w, r)
	printBelowSizing(w, r.BelowSizing)
	printRepairs(w, r.Repairs)
	return printTable(w, r, f.Name == output.Wide)
}

// PrintRows writes only the summary lines of the report's nodes, without a header: what
// status -w prints as nodes change.
func PrintRows(w io.Writer, r *Report, wide bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, n := range r.Nodes {
		summaryRow(tw, r, n, wide)
	}
	return tw.Flush()
}

// Header is the summary table's header line.
func Header(wide bool) string {
	h := "NODE\tINSTANCE\tPHASE\tNOTICES\tDEADLINE\tLEFT\tPODS\tHELD\tVOLUMES\tTARGETS\tLIFECYCLE"
	if wide {
		h += "\tOWNER\tKINDS"
	}
	return h
}

func summaryRow(tw io.Writer, r *Report, n Node, wide bool) {
	held := 0
	for _, p := range n.Pods {
		if p.State == StateHeld {
			held++
		}
	}
	fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%d\t%d\t%d\t%s\t%d", n.Name, dash(n.Instance), n.Phase, len(n.Notices),
		timeOrDash(n.Deadline), dash(n.Left), len(n.Pods), held, len(n.Volumes), targetCount(r, n), len(n.Lifecycle))
	if wide {
		owner, kinds := "-", []string{}
		if n.Owner != nil {
			owner = n.Owner.Origin
		}
		for _, no := range n.Notices {
			if !slices.Contains(kinds, no.Kind) {
				kinds = append(kinds, no.Kind)
			}
		}
		fmt.Fprintf(tw, "\t%s\t%s", owner, dash(strings.Join(kinds, ",")))
	}
	fmt.Fprintln(tw)
}

func printTable(w io.Writer, r *Report, wide bool) error {
	if len(r.Nodes) == 0 {
		_, err := fmt.Fprintln(w, "No node is in an interruption episode.")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, Header(wide))
	for _, n := range r.Nodes {
		summaryRow(tw, r, n, wide)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if !r.TargetsRead {
		fmt.Fprintln(w, "(load-balancer targets not read: add --load-balancers, with AWS credentials and AWS_REGION)")
	}
	for _, n := range r.Nodes {
		fmt.Fprintf(w, "\n%s", n.Name)
		if o := n.Owner; o != nil {
			fmt.Fprintf(w, ": drained by %s (claimed by %s), claimed or renewed %s ago", o.Origin, dash(o.Holder), r.At.Sub(o.Renewed).Round(time.Second))
			if o.Contested != nil {
				fmt.Fprintf(w, ", another Lifeboat waiting since %s ago", r.At.Sub(*o.Contested).Round(time.Second))
			}
		}
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, no := range n.Notices {
			fmt.Fprintf(tw, "  notice\t%s\t%s\t%s\tdeadline %s\n", no.ID, no.Kind, no.State, timeOrDash(no.Deadline))
		}
		for _, p := range n.Pods {
			fmt.Fprintf(tw, "  pod\t%s\t%s\t%s\n", p.Name, p.State, p.Why)
		}
		for _, v := range n.Volumes {
			fmt.Fprintf(tw, "  volume\t%s\tattached\n", v)
		}
		for _, t := range n.Targets {
			fmt.Fprintf(tw, "  target\t%s\n", t)
		}
		if n.TargetsUnknown != "" {
			fmt.Fprintf(tw, "  target\tunknown: %s\n", n.TargetsUnknown)
		}
		for _, l := range n.Lifecycle {
			beat := "no heartbeat yet"
			if l.LastBeat != nil {
				beat = fmt.Sprintf("%d heartbeats, last %s", l.Heartbeats, l.LastBeat.UTC().Format(time.RFC3339))
				if l.Heartbeats == 1 {
					beat = "1 heartbeat, last " + l.LastBeat.UTC().Format(time.RFC3339)
				}
			}
			fmt.Fprintf(tw, "  lifecycle\t%s/%s\tpending\t%s (notice %s); if the drain cannot finish in time: %s\n", l.Group, l.Hook, beat, l.Notice, dash(l.OnIncompleteDrain))
		}
		if rt := n.Retained; rt != nil {
			fmt.Fprintf(tw, "  retained\tgroup %s\t%s\tsince %s, until %s%s\n", rt.Group, rt.State, rt.Since.UTC().Format(time.RFC3339), rt.Until.UTC().Format(time.RFC3339), whyOf(rt.Why))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// targetCount is the TARGETS column: "-" when ELBv2 was not asked, "?" when it failed.
func targetCount(r *Report, n Node) string {
	switch {
	case !r.TargetsRead:
		return "-"
	case n.TargetsUnknown != "":
		return "?"
	}
	return fmt.Sprint(len(n.Targets))
}

func dash(s string) string {
	if strings.TrimSpace(s) == "" {
		return "-"
	}
	return s
}

func timeOrDash(t *time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func whyOf(why string) string {
	if why == "" {
		return ""
	}
	return ": " + why
}

// printHeld puts first what must be fixed first: the nodes whose notices the wiring held up
// (AWS refused a call for want of permission; the instance lacks the tag that says it is this
// cluster's).
func printHeld(w io.Writer, r *Report) {
	for _, s := range []struct {
		nodes []HeldNode
		what  string
	}{
		{r.Denied, "AWS PERMISSION DENIED: %d node(s) had a notice held up in the last day: AWS refused a call Lifeboat needs"},
		{r.Untagged, "NOT PROTECTED: %d node(s) had a notice not acted on in the last day: their instance lacks the tag that says it is this cluster's"},
	} {
		if len(s.nodes) == 0 {
			continue
		}
		fmt.Fprintf(w, s.what+"\n", len(s.nodes))
		for _, u := range s.nodes {
			fmt.Fprintf(w, "  %s: notice %s, %s ago: %s\n", u.Node, u.Notice, r.At.Sub(u.At).Round(time.Second), u.Why)
		}
		fmt.Fprintln(w)
	}
}

// printBelowSizing says which controllers run with less than they are sized for.
func printBelowSizing(w io.Writer, below []BelowSizing) {
	if len(below) == 0 {
		return
	}
	fmt.Fprintf(w, "BELOW SIZING: %d controller Deployment(s) run with less than the controller is sized for\n", len(below))
	for _, b := range below {
		fmt.Fprintf(w, "  %s: %s\n", b.Deployment, dash(b.Why))
	}
	fmt.Fprintln(w)
}
