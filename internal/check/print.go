// SPDX-License-Identifier: Apache-2.0

package check

import (
	"fmt"
	"io"
	"text/tabwriter"

	"lifeboat.dev/lifeboat/internal/output"
)

// Kind is the kind of a Report in JSON and YAML.
const Kind = "ReadinessReport"

// Report is what check prints as JSON or YAML.
type Report struct {
	APIVersion string    `json:"apiVersion"`
	Kind       string    `json:"kind"`
	Findings   []Finding `json:"findings"`
}

// Formats are the -o values check offers.
var Formats = []string{output.Table, output.Name, output.JSON, output.YAML, output.JSONPath}

// Print writes the findings as a table grouped by namespace and workload, each with why and
// the fix, and a closing line; as each workload's name (namespace/kind/name), or as JSON,
// YAML or JSONPath over a Report.
func Print(w io.Writer, findings []Finding, format string) error {
	f, err := output.Parse(format, Formats...)
	if err != nil {
		return err
	}
	return PrintFormat(w, findings, f)
}

// PrintFormat is Print with a parsed format.
func PrintFormat(w io.Writer, findings []Finding, f output.Format) error {
	switch {
	case f.Structured():
		if findings == nil {
			findings = []Finding{}
		}
		return output.Write(w, Report{APIVersion: output.APIVersion, Kind: Kind, Findings: findings}, f)
	case f.Name == output.Name:
		seen := map[string]bool{}
		for _, fi := range findings {
			if name := fi.Namespace + "/" + fi.Workload; !seen[name] {
				seen[name] = true
				fmt.Fprintln(w, name)
			}
		}
		return nil
	}
	if len(findings) == 0 {
		_, err := fmt.Fprintf(w, "Every workload can leave a node within a Spot warning (%s).\n", SpotWarning)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAMESPACE\tWORKLOAD\tPODS\tREASON")
	workloads := map[string]bool{}
	last := ""
	for _, fi := range findings {
		ns, workload := fi.Namespace, fi.Workload
		if key := fi.Namespace + "/" + fi.Workload; key == last {
			ns, workload = "", "" // grouped under the row above
		} else {
			last = key
		}
		workloads[fi.Namespace+"/"+fi.Workload] = true
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", ns, workload, fi.Pods, fi.Reason)
		fmt.Fprintf(tw, "\t\t\t  why: %s\n", fi.Detail)
		fmt.Fprintf(tw, "\t\t\t  fix: %s\n", fi.Fix)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\n%d workloads cannot leave a node cleanly within a Spot warning (%s); %d findings.\n", len(workloads), SpotWarning, len(findings))
	return err
}
