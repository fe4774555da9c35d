// SPDX-License-Identifier: Apache-2.0

package benchreport

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
)

// testdata/drain-pods10.txt is real output of
//
//	go test -run '^$' -bench 'CordonAndDrain/pods=10$' -benchtime 1x ./internal/drain
//
// testdata/go-output-shapes.txt is real `go test -bench . -benchtime 2x` output of a
// throwaway package whose benchmarks fail (b.Fatal), skip, print to stdout and stderr
// during the run (which cuts the result line in two), log with b.Log and have
// sub-benchmarks with custom metrics.
func parseFile(t *testing.T, name string) *Report {
	t.Helper()
	f, err := os.Open("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rep, err := Parse(f)
	if err != nil {
		t.Fatalf("Parse(%s): %v", name, err)
	}
	return rep
}

func TestParseDrainFixture(t *testing.T) {
	rep := parseFile(t, "drain-pods10.txt")
	if rep.GOOS != "linux" || rep.GOARCH != "amd64" || !strings.Contains(rep.CPU, "Xeon") {
		t.Errorf("environment = %q %q %q", rep.GOOS, rep.GOARCH, rep.CPU)
	}
	if len(rep.Results) != 1 {
		t.Fatalf("got %d results, want 1: %+v", len(rep.Results), rep.Results)
	}
	got := rep.Results[0]
	want := Result{
		Package: "lifeboat.dev/lifeboat/internal/drain", Name: "CordonAndDrain/pods=10", Procs: 2, Iterations: 1,
		Metrics: []Metric{{150680616, "ns/op"}, {14, "requests/drain"}},
	}
	if !equalResult(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	if len(rep.Failed)+len(rep.Skipped) != 0 {
		t.Errorf("failed %v, skipped %v; want none", rep.Failed, rep.Skipped)
	}
}

func TestParseOutputShapes(t *testing.T) {
	rep := parseFile(t, "go-output-shapes.txt")
	want := []Result{
		{Package: "bfmt", Name: "Noisy", Procs: 2, Iterations: 2, Metrics: []Metric{{1157626, "ns/op"}, {42.5, "widgets/op"}}},
		{Package: "bfmt", Name: "Sub/n=1", Procs: 2, Iterations: 2, Metrics: []Metric{{578, "ns/op"}, {1, "things"}}},
		{Package: "bfmt", Name: "Sub/n=2", Procs: 2, Iterations: 2, Metrics: []Metric{{478, "ns/op"}, {2, "things"}}},
	}
	if len(rep.Results) != len(want) {
		t.Fatalf("got %d results, want %d: %+v", len(rep.Results), len(want), rep.Results)
	}
	for i := range want {
		if !equalResult(rep.Results[i], want[i]) {
			t.Errorf("result %d: got %+v\nwant %+v", i, rep.Results[i], want[i])
		}
	}
	if len(rep.Failed) != 1 || rep.Failed[0] != "Fail" {
		t.Errorf("failed = %v, want [Fail]", rep.Failed)
	}
}

func TestParseCases(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		results []string // "Name iterations value unit ..."
		failed  []string
		skipped []string
		err     string
	}{
		{name: "empty", in: ""},
		{name: "no benchmarks", in: "PASS\nok  \tx\t0.1s\n"},
		{name: "one line", in: "BenchmarkA-4 \t 10\t 5.0 ns/op\t 3 B/op\n", results: []string{"A 10 5 ns/op 3 B/op"}},
		{name: "no procs suffix", in: "BenchmarkA/case=x \t 1\t 7 ns/op\n", results: []string{"A/case=x 1 7 ns/op"}},
		{name: "name, then values after a log line",
			in:      "BenchmarkA-2   \tstarting sandbox\nsome log\n       3\t  9 ns/op\t  2.5 p99-ms\n",
			results: []string{"A 3 9 ns/op 2.5 p99-ms"}},
		{name: "log line starting with numbers while waiting is ignored",
			in:      "BenchmarkA-2   \t\n12 3 a line\n       1\t  9 ns/op\n",
			results: []string{"A 1 9 ns/op"}},
		{name: "failure after the name", in: "BenchmarkA-2   \t--- FAIL: BenchmarkA-2\n    x_test.go:1: boom\n", failed: []string{"A"}},
		{name: "verbose skip", in: "--- SKIP: BenchmarkA/pods=10 (0.00s)\n", skipped: []string{"A/pods=10"}},
		{name: "unreadable value", in: "BenchmarkA-2 \t 1\t abc ns/op\n", err: `line 1 "BenchmarkA-2 \t 1\t abc ns/op": value "abc" (unit ns/op) is not a number`},
		{name: "value without unit", in: "pkg: x\nBenchmarkB-2 \t 1\t 12\n", err: `line 2`},
		{name: "no values", in: "BenchmarkB-2 \t 1\t\n", err: "no values after the iteration count"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep, err := Parse(strings.NewReader(tt.in))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range rep.Results {
				s := r.Name + " " + strconv.Itoa(r.Iterations)
				for _, m := range r.Metrics {
					s += " " + strconv.FormatFloat(m.Value, 'g', -1, 64) + " " + m.Unit
				}
				got = append(got, s)
			}
			if strings.Join(got, "|") != strings.Join(tt.results, "|") {
				t.Errorf("results = %q, want %q", got, tt.results)
			}
			if strings.Join(rep.Failed, "|") != strings.Join(tt.failed, "|") || strings.Join(rep.Skipped, "|") != strings.Join(tt.skipped, "|") {
				t.Errorf("failed %q skipped %q, want %q %q", rep.Failed, rep.Skipped, tt.failed, tt.skipped)
			}
		})
	}
}

func TestFormatValue(t *testing.T) {
	tests := []struct {
		v    float64
		want string
	}{
		{0, "0"}, {14, "14"}, {2701, "2701"}, {114.33, "114.3"}, {22.14, "22.14"},
		{0.1507, "0.151"}, {4.4, "4.4"}, {1.2345, "1.23"}, {0.0004, "0.0004"}, {0.001157, "0.00116"}, {1.5e-7, "1.5e-07"}, {-3.25, "-3.25"},
	}
	for _, tt := range tests {
		if got := FormatValue(tt.v); got != tt.want {
			t.Errorf("FormatValue(%v) = %q, want %q", tt.v, got, tt.want)
		}
	}
}

func TestWriteTable(t *testing.T) {
	rep := parseFile(t, "go-output-shapes.txt")
	rep.Skipped = []string{"Idle"}
	var b bytes.Buffer
	if err := WriteTable(&b, rep); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	wantFields := [][]string{
		{"PACKAGE", "BENCHMARK", "RUNS", "VALUE", "UNIT"},
		{"bfmt", "Noisy", "2", "0.00116", "s/op"},
		{"bfmt", "Noisy", "2", "42.50", "widgets/op"},
		{"bfmt", "Sub/n=1", "2", "5.78e-07", "s/op"},
		{"bfmt", "Sub/n=1", "2", "1", "things"},
		{"bfmt", "Sub/n=2", "2", "4.78e-07", "s/op"},
		{"bfmt", "Sub/n=2", "2", "2", "things"},
		{"FAILED:", "Fail"},
		{"skipped:", "Idle"},
	}
	if len(lines) != len(wantFields) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(wantFields), b.String())
	}
	for i, want := range wantFields {
		if got := strings.Fields(lines[i]); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("line %d = %q, want fields %q", i, lines[i], want)
		}
	}
}

func TestWriteJSONRoundTrip(t *testing.T) {
	rep := parseFile(t, "drain-pods10.txt")
	var b bytes.Buffer
	if err := WriteJSON(&b, rep); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatalf("JSON does not read back: %v\n%s", err, b.String())
	}
	if len(back.Results) != 1 || !equalResult(back.Results[0], rep.Results[0]) || back.CPU != rep.CPU {
		t.Errorf("round trip: got %+v, want %+v", back, rep)
	}
}

// svgBar is a bar as drawn: its panel's unit, its width and its tooltip.
type svgBar struct {
	unit, title string
	width       float64
}

// readSVG checks the document is well-formed XML and returns its bars and texts.
func readSVG(t *testing.T, doc []byte) (bars []svgBar, texts []string) {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(doc))
	var unit string
	var inBar, inText bool
	var cur svgBar
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v\n%s", err, doc)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			attr := map[string]string{}
			for _, a := range el.Attr {
				attr[a.Name.Local] = a.Value
			}
			switch {
			case el.Name.Local == "g" && attr["class"] == "panel":
				unit = attr["data-unit"]
			case el.Name.Local == "rect" && attr["class"] == "bar":
				w, err := strconv.ParseFloat(attr["width"], 64)
				if err != nil {
					t.Fatalf("bar width %q: %v", attr["width"], err)
				}
				cur, inBar = svgBar{unit: unit, width: w}, true
			case el.Name.Local == "text":
				inText = true
			}
		case xml.EndElement:
			switch el.Name.Local {
			case "rect":
				if inBar {
					bars = append(bars, cur)
					inBar = false
				}
			case "text":
				inText = false
			}
		case xml.CharData:
			if inBar {
				cur.title += string(el)
			} else if inText {
				texts = append(texts, string(el))
			}
		}
	}
	return bars, texts
}

func TestWriteSVG(t *testing.T) {
	rep := parseFile(t, "go-output-shapes.txt")
	rep.Results = append(rep.Results, Result{Name: "Odd<&>name", Iterations: 1, Metrics: []Metric{{1, "things"}}})
	var b bytes.Buffer
	if err := WriteSVG(&b, rep, "Bench & co"); err != nil {
		t.Fatal(err)
	}
	bars, texts := readSVG(t, b.Bytes())
	// One panel per displayed unit, one bar per result reporting it.
	byUnit := map[string][]svgBar{}
	for _, br := range bars {
		byUnit[br.unit] = append(byUnit[br.unit], br)
	}
	if len(byUnit["s/op"]) != 3 || len(byUnit["widgets/op"]) != 1 || len(byUnit["things"]) != 3 || len(byUnit) != 3 {
		t.Fatalf("bars per unit = %v", byUnit)
	}
	// Bars are scaled to the largest of their panel: things are 1, 2 and 1.
	things := byUnit["things"]
	if things[1].width != barMaxWidth || things[0].width != barMaxWidth/2 || things[2].width != barMaxWidth/2 {
		t.Errorf("things widths = %v, %v, %v; want %d, half, half", things[0].width, things[1].width, things[2].width, barMaxWidth)
	}
	if got := byUnit["things"][1].title; got != "bfmt Sub/n=2: 2 things" {
		t.Errorf("tooltip = %q", got)
	}
	joined := strings.Join(texts, "\n")
	for _, want := range []string{"Bench & co", "Odd<&>name", "bfmt Noisy", "42.50", "s/op"} {
		if !strings.Contains(joined, want) {
			t.Errorf("SVG texts lack %q:\n%s", want, joined)
		}
	}
}

func TestWriteSVGEmpty(t *testing.T) {
	var b bytes.Buffer
	if err := WriteSVG(&b, &Report{}, "none"); err != nil {
		t.Fatal(err)
	}
	bars, texts := readSVG(t, b.Bytes())
	if len(bars) != 0 || !strings.Contains(strings.Join(texts, " "), "no benchmark results") {
		t.Errorf("bars %v, texts %q", bars, texts)
	}
}

func equalResult(a, b Result) bool {
	if a.Package != b.Package || a.Name != b.Name || a.Procs != b.Procs || a.Iterations != b.Iterations || len(a.Metrics) != len(b.Metrics) {
		return false
	}
	for i := range a.Metrics {
		if a.Metrics[i] != b.Metrics[i] {
			return false
		}
	}
	return true
}
