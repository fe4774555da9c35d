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
	// AutoScalingGroups is the groups report; absent when it was not asked for.
	AutoScalingGroups *Groups `json:"autoScalingGroups,omitempty"`
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
	return PrintWithGroups(w, findings, nil, f)
}

// PrintWithGroups is PrintFormat followed by the groups report when groups is not nil: in
// a table, a second table after the workloads'; as names, autoscalinggroup/NAME for each group
// that is a finding; in JSON, YAML and JSONPath, the Report's autoScalingGroups.
func PrintWithGroups(w io.Writer, findings []Finding, groups *Groups, f output.Format) error {
	switch {
	case f.Structured():
		if findings == nil {
			findings = []Finding{}
		}
		return output.Write(w, Report{APIVersion: output.APIVersion, Kind: Kind, Findings: findings, AutoScalingGroups: groups}, f)
	case f.Name == output.Name:
		seen := map[string]bool{}
		for _, fi := range findings {
			if name := fi.Namespace + "/" + fi.Workload; !seen[name] {
				seen[name] = true
				fmt.Fprintln(w, name)
			}
		}
		if groups != nil {
			for _, g := range groups.Groups {
				if g.Finding {
					fmt.Fprintln(w, "autoscalinggroup/"+g.Name)
				}
			}
		}
		return nil
	}
	if err := printTable(w, findings); err != nil || groups == nil {
		return err
	}
	return printGroups(w, groups)
}

// printTable writes the workloads' findings as a table, or the line that says there are none.
func printTable(w io.Writer, findings []Finding) error {
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

// printGroups writes the groups report as a table, each group's policy with what it makes of
// a repair and the fix, and a closing line that says whether they are findings.
func printGroups(w io.Writer, g *Groups) error {
	if g.NotChecked != "" {
		_, err := fmt.Fprintf(w, "\nAuto Scaling groups not checked: %s.\n", g.NotChecked)
		return err
	}
	if len(g.Groups) == 0 {
		_, err := fmt.Fprintf(w, "\nNo node's instance is in an Auto Scaling group (%d nodes in none).\n", g.NodesInNoGroup)
		return err
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AUTO SCALING GROUP\tNODES\tMAINTENANCE POLICY\tREPAIR")
	for _, x := range g.Groups {
		policy := "none"
		if x.MinHealthyPercentage != nil && x.MaxHealthyPercentage != nil {
			policy = fmt.Sprintf("min %d %%, max %d %%", *x.MinHealthyPercentage, *x.MaxHealthyPercentage)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", x.Name, x.Nodes, policy, x.Replacement)
		fmt.Fprintf(tw, "\t\t\t  why: %s\n", x.Detail)
		if x.Fix != "" {
			fmt.Fprintf(tw, "\t\t\t  fix: %s\n", x.Fix)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if g.NodesInNoGroup > 0 {
		fmt.Fprintf(w, "%d nodes are in no Auto Scaling group.\n", g.NodesInNoGroup)
	}
	short := 0
	for _, x := range g.Groups {
		if x.Fix != "" {
			short++
		}
	}
	var err error
	switch {
	case short == 0:
		_, err = fmt.Fprintf(w, "Every group launches a repaired node's replacement before the node goes.\n")
	case g.Findings() > 0:
		_, err = fmt.Fprintf(w, "%d groups are one instance short during a node repair, and node repair is on (ENABLE_NODE_REPAIR): findings.\n", short)
	default:
		_, err = fmt.Fprintf(w, "%d groups are one instance short during a node repair; node repair is off (ENABLE_NODE_REPAIR), so this is advice, not a finding.\n", short)
	}
	return err
}
