// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

var update = flag.Bool("update", false, "write the metrics reference instead of comparing it ("+ReferenceCommand+")")

// TestReferenceUpToDate fails when the metrics reference no longer matches the registry;
// with -update it writes the reference.
func TestReferenceUpToDate(t *testing.T) {
	want, err := Reference(exercised().Registry)
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, '\n')
	path := filepath.Join("..", "..", filepath.FromSlash(ReferencePath))
	if *update {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v (generate it with `%s`)", ReferencePath, err, ReferenceCommand)
	}
	if !bytes.Equal(got, want) {
		gotLines, wantLines := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		line := 0
		for line < min(len(gotLines), len(wantLines)) && gotLines[line] == wantLines[line] {
			line++
		}
		t.Fatalf("%s is out of date with the registry in internal/metrics (first difference at line %d); regenerate it with `%s`",
			ReferencePath, line+1, ReferenceCommand)
	}
}

// TestReferenceListsEveryMetric: every lifeboat_ metric the registry describes has a row with
// its type, and the runtime collectors' metrics have none.
func TestReferenceListsEveryMetric(t *testing.T) {
	doc, err := Reference(exercised().Registry)
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, line := range strings.Split(string(doc), "\n") {
		if name, rest, ok := strings.Cut(strings.TrimPrefix(line, "| `"), "` | "); ok && strings.HasPrefix(line, "| `") {
			rows[name] = rest
		}
	}
	for _, name := range Described(New().Registry) {
		row, listed := rows[name]
		switch {
		case strings.HasPrefix(name, "lifeboat_") && !listed:
			t.Errorf("the reference has no row for %s", name)
		case !strings.HasPrefix(name, "lifeboat_") && listed:
			t.Errorf("the reference lists %s, which is not Lifeboat's own", name)
		case listed && !(strings.HasPrefix(row, "counter |") || strings.HasPrefix(row, "gauge |") || strings.HasPrefix(row, "histogram |")):
			t.Errorf("%s: row %q does not start with a known type", name, row)
		}
	}
	for _, want := range []string{
		"| `lifeboat_notices_total` | counter | `kind`, `source` |",
		"| `lifeboat_drain_duration_seconds` | histogram | `result` |", // le is the buckets', not a label
		"| `lifeboat_leader` | gauge | none |",
	} {
		if !strings.Contains(string(doc), want) {
			t.Errorf("the reference lacks %q", want)
		}
	}
}

// TestReferenceCells: help text with a pipe or angle brackets stays in its cell.
func TestReferenceCells(t *testing.T) {
	r := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lifeboat_test_total", Help: "a|b for <name>\nand more"}, []string{"z", "a"})
	c.WithLabelValues("1", "2").Inc()
	r.MustRegister(c)
	doc, err := Reference(r)
	if err != nil {
		t.Fatal(err)
	}
	want := "| `lifeboat_test_total` | counter | `a`, `z` | a\\|b for &lt;name&gt; and more |"
	if !strings.Contains(string(doc), want) {
		t.Errorf("reference lacks %q:\n%s", want, doc)
	}
}
