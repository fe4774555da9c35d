// SPDX-License-Identifier: Apache-2.0

package config

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestReferenceUpToDate fails when docs/configuration.md no longer matches the settings.
func TestReferenceUpToDate(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "configuration.md")
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v (generate it with `%s`)", path, err, ReferenceCommand)
	}
	want := append(Reference(), '\n')
	if !bytes.Equal(got, want) {
		gotLines, wantLines := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		line := 0
		for line < min(len(gotLines), len(wantLines)) && gotLines[line] == wantLines[line] {
			line++
		}
		t.Fatalf("docs/configuration.md is out of date with internal/config/settings.go (first difference at line %d); regenerate it with `%s`",
			line+1, ReferenceCommand)
	}
}

func TestReferenceCoversEverySetting(t *testing.T) {
	doc := string(Reference())
	for _, s := range Settings() {
		for _, want := range []string{"`" + s.Env + "`", "`--" + s.Flag + "`"} {
			if !strings.Contains(doc, want) {
				t.Errorf("reference does not mention %s", want)
			}
		}
		for _, a := range s.Aliases {
			if !strings.Contains(doc, "deprecated: `"+a+"`") {
				t.Errorf("reference does not list alias %s of %s", a, s.Env)
			}
		}
	}
	for _, want := range []string{
		"`NAMESPACE` is `--pod-namespace`",            // flags that are not the kebab-case variable
		"`INSTANCE_METADATA_URL` is `--metadata-url`", //
		"| `KUBE_API_QPS` | `5` | `0` |",              // the differences table
		"| `NAMESPACE` | (unset) | `kube-system` |",   // a difference whose NTH default is unset
		"- `CLUSTER_NAME`, in *General*:",             // Lifeboat's own settings
		"kubernetes.io/cluster/&lt;name&gt;",          // no raw HTML in table cells
		"see [below](#default-webhook-template)",      // a default too long for the table
		"<a id=\"default-webhook-template\"></a>",     //
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("reference lacks %q", want)
		}
	}
	if strings.Contains(doc, "- `DRY_RUN`, in") {
		t.Error("DRY_RUN is NTH's, but is listed among Lifeboat's own settings")
	}
}

// TestReferenceTableRows checks that every table row has as many cells as its table's header
// (four in the settings tables), so no text in a cell (a pipe in a default or usage) breaks
// the table.
func TestReferenceTableRows(t *testing.T) {
	want := 0 // cells of the current table's header; 0 outside a table
	for i, line := range strings.Split(string(Reference()), "\n") {
		if !strings.HasPrefix(line, "| ") {
			want = 0
			continue
		}
		cells := strings.Count(strings.ReplaceAll(line, `\|`, ""), "|") - 1
		switch {
		case want == 0:
			want = cells
			if strings.HasPrefix(line, "| variable / flag |") && cells != 4 {
				t.Errorf("line %d: a settings table with %d columns, want 4", i+1, cells)
			}
		case cells != want:
			t.Errorf("line %d has %d cells, want %d: %s", i+1, cells, want, line)
		}
	}
}

func TestAccepted(t *testing.T) {
	var (
		b bool
		n int
		f float64
		s string
		d time.Duration
		m map[string]string
		l []string
	)
	tests := []struct {
		v    value
		want string
	}{
		{boolValue{&b}, "true or false"},
		{intValue{p: &n, min: 1, max: 10}, "whole number, 1 to 10"},
		{intValue{p: &n, min: 0, max: maxInt, minusOne: true}, "whole number, -1 (off) or 0 or more"},
		{floatValue{p: &f}, "number greater than 0"},
		{floatValue{p: &f, zeroAuto: true}, "0 (automatic) or a number greater than 0"},
		{stringValue{&s}, "text"},
		{enumValue{&s, []string{"a", "b"}}, "one of a, b (any case)"},
		{urlValue{p: &s, schemes: []string{"http", "https"}}, "absolute http or https URL"},
		{urlValue{p: &s, schemes: []string{"https"}, optional: true}, "absolute https URL, or empty"},
		{headersValue{&m, &s}, "JSON object of strings"},
		{keyValuesValue{&m}, "key1=value1,key2=value2"},
		{templateValue{&s}, "Go text/template, checked at start"},
		{durationValue{p: &d, min: time.Second, max: time.Minute}, "Go duration, 1s to 1m0s"},
		{pathValue{&s}, "HTTP path starting with /"},
		{accountsValue{&l}, "comma-separated AWS account ids (12 digits), or empty"},
	}
	for _, tt := range tests {
		if got := accepted(tt.v); got != tt.want {
			t.Errorf("accepted(%T) = %q, want %q", tt.v, got, tt.want)
		}
	}
	// Every value type in use is described in words, not by its Go type name.
	for _, st := range Settings() {
		if got := accepted(st.value); strings.Contains(got, "config.") {
			t.Errorf("%s: accepted values undescribed (%s); add its type to accepted", st.Env, got)
		}
	}
}

func TestCell(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain", "plain"},
		{"a|b", `a\|b`},
		{"tag <name>", "tag &lt;name&gt;"},
		{"two\nlines", "two lines"},
	}
	for _, tt := range tests {
		if got := cell(tt.in); got != tt.want {
			t.Errorf("cell(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
