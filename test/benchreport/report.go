// SPDX-License-Identifier: Apache-2.0

package benchreport

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
)

// Display is how a metric is shown: ns/op becomes seconds per operation, which is what every
// Lifeboat benchmark measures at; custom metrics are shown as reported.
func Display(m Metric) Metric {
	if m.Unit == "ns/op" {
		return Metric{Value: m.Value / 1e9, Unit: "s/op"}
	}
	return m
}

// FormatValue prints a value with about three significant digits (an exponent only below
// 0.0001).
func FormatValue(v float64) string {
	switch a := math.Abs(v); {
	case a == 0:
		return "0"
	case a >= 1000 || a == math.Trunc(a):
		return fmt.Sprintf("%.0f", v)
	case a >= 100:
		return fmt.Sprintf("%.1f", v)
	case a >= 10:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

// ShortPackage drops the module path from a package import path.
func ShortPackage(pkg string) string {
	if i := strings.Index(pkg, "/internal/"); i >= 0 {
		return pkg[i+1:]
	}
	if i := strings.Index(pkg, "/cmd/"); i >= 0 {
		return pkg[i+1:]
	}
	return pkg
}

// WriteTable prints one table: a row per benchmark metric, then the failed and skipped
// benchmarks.
func WriteTable(w io.Writer, rep *Report) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PACKAGE\tBENCHMARK\tRUNS\tVALUE\tUNIT")
	for _, r := range rep.Results {
		for _, m := range r.Metrics {
			d := Display(m)
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", ShortPackage(r.Package), r.Name, r.Iterations, FormatValue(d.Value), d.Unit)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, name := range rep.Failed {
		fmt.Fprintf(w, "FAILED: %s\n", name)
	}
	for _, name := range rep.Skipped {
		fmt.Fprintf(w, "skipped: %s\n", name)
	}
	return nil
}

// WriteJSON writes the report as indented JSON, values as reported (ns/op unconverted).
func WriteJSON(w io.Writer, rep *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}
