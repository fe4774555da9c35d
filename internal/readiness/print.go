package readiness

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
)

// Print writes the findings as a table grouped by namespace and workload, each with why and
// the fix, and a closing line; or as JSON (format "json").
func Print(w io.Writer, findings []Finding, format string) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Findings []Finding `json:"findings"`
		}{findings})
	case "table", "":
	default:
		return fmt.Errorf("unknown output format %q (table or json)", format)
	}
	if len(findings) == 0 {
		_, err := fmt.Fprintf(w, "Every workload can leave a node within a Spot warning (%s).\n", SpotWarning)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAMESPACE\tWORKLOAD\tPODS\tREASON")
	workloads := map[string]bool{}
	last := ""
	for _, f := range findings {
		ns, workload := f.Namespace, f.Workload
		if key := f.Namespace + "/" + f.Workload; key == last {
			ns, workload = "", "" // grouped under the row above
		} else {
			last = key
		}
		workloads[f.Namespace+"/"+f.Workload] = true
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", ns, workload, f.Pods, f.Reason)
		fmt.Fprintf(tw, "\t\t\t  why: %s\n", f.Detail)
		fmt.Fprintf(tw, "\t\t\t  fix: %s\n", f.Fix)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\n%d workloads cannot leave a node cleanly within a Spot warning (%s); %d findings.\n", len(workloads), SpotWarning, len(findings))
	return err
}
