// SPDX-License-Identifier: Apache-2.0

package docs

import (
	"strings"
	"testing"

	"lifeboat.dev/lifeboat/internal/panics"
)

// TestPanicSitesDocumented: every site whose panics are recovered has its row in the
// troubleshooting table of what each one fails, and is named in the monitoring page's row of
// the metric that counts them.
func TestPanicSitesDocumented(t *testing.T) {
	troubleshooting := readDoc(t, "docs/operations/troubleshooting.md")
	var metricRow string
	for _, line := range strings.Split(readDoc(t, "docs/operations/monitoring.md"), "\n") {
		if strings.HasPrefix(line, "| `lifeboat_reconcile_panics_total` |") {
			metricRow = line
		}
	}
	if metricRow == "" {
		t.Fatal("docs/operations/monitoring.md has no row for lifeboat_reconcile_panics_total")
	}
	for _, s := range panics.Sites {
		if !strings.Contains(troubleshooting, "| `"+s.Name+"` |") {
			t.Errorf("docs/operations/troubleshooting.md has no row for panic site %s", s.Name)
		}
		if !strings.Contains(metricRow, " "+s.Name+",") && !strings.Contains(metricRow, " "+s.Name+")") && !strings.Contains(metricRow, "("+s.Name+",") {
			t.Errorf("the monitoring row of lifeboat_reconcile_panics_total does not name site %s", s.Name)
		}
	}
}
