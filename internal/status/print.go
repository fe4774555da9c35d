package status

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"sigs.k8s.io/yaml"
)

// Formats Print writes.
const (
	FormatTable = "table"
	FormatJSON  = "json"
	FormatYAML  = "yaml"
)

// Print writes the report as a table (one summary line per node, then each node's notices,
// pods, volumes and lifecycle actions), JSON or YAML.
func Print(w io.Writer, r *Report, format string) error {
	switch format {
	case FormatJSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	case FormatYAML:
		b, err := yaml.Marshal(r)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	case FormatTable, "":
		return printTable(w, r)
	}
	return fmt.Errorf("unknown output format %q (table, json or yaml)", format)
}

func printTable(w io.Writer, r *Report) error {
	if len(r.Nodes) == 0 {
		_, err := fmt.Fprintln(w, "No node is in an interruption episode.")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tINSTANCE\tPHASE\tNOTICES\tDEADLINE\tLEFT\tPODS\tHELD\tVOLUMES\tTARGETS\tLIFECYCLE")
	for _, n := range r.Nodes {
		held := 0
		for _, p := range n.Pods {
			if p.State == StateHeld {
				held++
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%d\t%d\t%d\t%s\t%d\n", n.Name, dash(n.Instance), n.Phase, len(n.Notices),
			timeOrDash(n.Deadline), dash(n.Left), len(n.Pods), held, len(n.Volumes), targetCount(r, n), len(n.Lifecycle))
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
			fmt.Fprintf(w, ": drained by %s (%s), claimed or renewed %s ago", o.Origin, dash(o.Holder), r.At.Sub(o.Renewed).Round(time.Second))
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
