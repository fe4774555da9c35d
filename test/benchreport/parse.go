// SPDX-License-Identifier: Apache-2.0

// Package benchreport reads the plain output of `go test -bench` and reports it as one
// table, as JSON and as an SVG bar chart (make bench).
//
// The standard format is simple enough to read here rather than add a dependency: a
// result line is the benchmark name (with a -GOMAXPROCS suffix), the iteration count, then
// value-unit pairs ("150680616 ns/op", "14.00 requests/drain"). "pkg:" and "cpu:" header
// lines say where the results that follow come from.
package benchreport

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// Metric is one value a benchmark reported.
type Metric struct {
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
}

// Result is one benchmark result line.
type Result struct {
	Package    string   `json:"package"` // import path, from the last "pkg:" line
	Name       string   `json:"name"`    // without the "Benchmark" prefix and the -procs suffix
	Procs      int      `json:"procs"`   // GOMAXPROCS (1 when the name has no suffix)
	Iterations int      `json:"iterations"`
	Metrics    []Metric `json:"metrics"`
}

// Report is everything read from one run.
type Report struct {
	GOOS    string   `json:"goos,omitempty"`
	GOARCH  string   `json:"goarch,omitempty"`
	CPU     string   `json:"cpu,omitempty"`
	Results []Result `json:"results"`
	// Failed and Skipped name benchmarks that produced no result ("--- FAIL" / "--- SKIP").
	Failed  []string `json:"failed,omitempty"`
	Skipped []string `json:"skipped,omitempty"`
}

var procsSuffix = regexp.MustCompile(`-(\d+)$`)

// Parse reads go test -bench output. Lines that are not benchmark output (logs, PASS, ok)
// are ignored. Result lines are tab-separated: the name, the iteration count, then one
// "value unit" per tab. A benchmark whose name line was cut off by output written during
// the run ("BenchmarkX-2  \t<log line>") is completed by the next line that holds only the
// iteration count and values. A result line with an unreadable value is an error naming
// the line.
func Parse(r io.Reader) (*Report, error) {
	rep := &Report{}
	pkg, pending := "", ""
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for lineNo := 1; sc.Scan(); lineNo++ {
		line := sc.Text()
		if header, value, ok := strings.Cut(line, ": "); ok {
			switch header {
			case "pkg":
				pkg = strings.TrimSpace(value)
				continue
			case "goos":
				rep.GOOS = strings.TrimSpace(value)
				continue
			case "goarch":
				rep.GOARCH = strings.TrimSpace(value)
				continue
			case "cpu":
				rep.CPU = strings.TrimSpace(value)
				continue
			}
		}
		// A failure may follow the name on its line (the name is printed before the run).
		if _, after, ok := strings.Cut(line, "--- FAIL: Benchmark"); ok {
			rep.Failed = append(rep.Failed, benchName(after))
			pending = ""
			continue
		}
		if _, after, ok := strings.Cut(line, "--- SKIP: Benchmark"); ok {
			rep.Skipped = append(rep.Skipped, benchName(after))
			pending = ""
			continue
		}
		chunks := strings.Split(line, "\t")
		for i := range chunks {
			chunks[i] = strings.TrimSpace(chunks[i])
		}
		first := chunks[0]
		if strings.HasPrefix(first, "Benchmark") && len(first) > len("Benchmark") && !strings.ContainsAny(first, " ") {
			if len(chunks) < 3 || !isCount(chunks[1]) {
				pending = first // the values follow on a later line
				continue
			}
			res, err := parseValues(first, chunks[1:], pkg)
			if err != nil {
				return nil, fmt.Errorf("line %d %q: %w", lineNo, clip(line), err)
			}
			rep.Results = append(rep.Results, res)
			pending = ""
			continue
		}
		if pending != "" && len(chunks) >= 2 && isCount(first) {
			if res, err := parseValues(pending, chunks, pkg); err == nil {
				rep.Results = append(rep.Results, res)
				pending = ""
			} // else: a log line that happens to look similar
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading benchmark output: %w", err)
	}
	return rep, nil
}

// parseValues reads the iteration count and the "value unit" chunks of the named benchmark.
func parseValues(name string, chunks []string, pkg string) (Result, error) {
	res := Result{Package: pkg, Name: benchName(strings.TrimPrefix(name, "Benchmark")), Procs: 1}
	if m := procsSuffix.FindStringSubmatch(name); m != nil {
		res.Procs, _ = strconv.Atoi(m[1])
	}
	n, err := strconv.Atoi(chunks[0])
	if err != nil || n < 0 {
		return Result{}, fmt.Errorf("iteration count %q is not a whole number", chunks[0])
	}
	res.Iterations = n
	for _, c := range chunks[1:] {
		if c == "" {
			continue
		}
		f := strings.Fields(c)
		if len(f) != 2 {
			return Result{}, fmt.Errorf("%q is not a value and a unit", c)
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return Result{}, fmt.Errorf("value %q (unit %s) is not a number", f[0], f[1])
		}
		res.Metrics = append(res.Metrics, Metric{Value: v, Unit: f[1]})
	}
	if len(res.Metrics) == 0 {
		return Result{}, fmt.Errorf("no values after the iteration count")
	}
	return res, nil
}

// benchName strips the -GOMAXPROCS suffix from a name given without "Benchmark", and cuts
// anything after the name (such as a duration). A sub-benchmark whose own name ends in
// -<digits> is indistinguishable from the suffix when GOMAXPROCS is 1; Lifeboat's
// benchmarks name their cases key=value to avoid that.
func benchName(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexAny(s, " \t("); i >= 0 {
		s = s[:i] // "--- FAIL: BenchmarkX-2 (1.0s)"
	}
	return procsSuffix.ReplaceAllString(s, "")
}

func isCount(s string) bool {
	_, err := strconv.Atoi(s)
	return err == nil
}

func clip(s string) string {
	if len(s) > 120 {
		return s[:120] + "…"
	}
	return s
}
