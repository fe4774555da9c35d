// SPDX-License-Identifier: Apache-2.0

package preflight

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Print writes the rows as an aligned table, each warning's and failure's fix on the line
// below it, then the overall result.
func Print(w io.Writer, rows []Row) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STATUS\tCHECK\tDETAIL")
	counts := map[Status]int{}
	for _, r := range rows {
		counts[r.Status]++
		status := string(r.Status)
		if r.Status != StatusOK {
			status = strings.ToUpper(status)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", status, r.Check, oneLine(r.Detail))
		if r.Status != StatusOK && r.Fix != "" {
			// The last cell of a line does not widen its column, so the fix sits under DETAIL.
			fmt.Fprintf(tw, "\t\tfix: %s\n", oneLine(r.Fix))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	result := "passed"
	if counts[StatusFail] > 0 {
		result = "FAILED"
	}
	_, err := fmt.Fprintf(w, "\npreflight %s: %d ok, %d warning(s), %d failed\n", result, counts[StatusOK], counts[StatusWarn], counts[StatusFail])
	return err
}

// oneLine keeps an error's newlines and tabs from breaking the table.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
