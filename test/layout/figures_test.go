// SPDX-License-Identifier: Apache-2.0

package layout

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// measuredFigure finds what reads as a measurement in a comment: a rate (153/s, about a
// hundred a second, 3.7 requests per second), a decimal with a unit (1.2 KB, took 0.8 s), or
// a number with a unit in a sentence that says it was measured (took, measured, a benchmark,
// a calibration, at the peak). Comments say why; the figures are dated in
// docs/benchmarks.md. A constant's own value (the default 500 ms, 256 KiB) passes.
var measuredFigure = []*regexp.Regexp{
	regexp.MustCompile(`(?i)\b(?:\d+(?:[.,]\d+)*|hundreds?|thousands?)\s*(?:/s\b|(?:[\w-]+\s+){0,2}(?:per|a)\s+second\b)`),
	regexp.MustCompile(`\b\d+\.\d+\s*(?:ns|µs|ms|s|min|B|KB|MB|GB|KiB|MiB|GiB|%|x)(?:\W|$)`),
	regexp.MustCompile(`(?i)\b(?:took|measured|benchmark\w*|calibrat\w*|peak)\b[^.;]*\b\d[\d,.]*\s*(?:ns|µs|ms|s|min|B|KB|MB|GB|KiB|MiB|GiB|%|bytes|goroutines|requests)(?:\W|$)`),
	regexp.MustCompile(`(?i)\b\d[\d,.]*\s*(?:ns|µs|ms|s|min|B|KB|MB|GB|KiB|MiB|GiB|%|bytes|goroutines|requests)\b[^.;]*\b(?:took|measured|in (?:a|the) benchmark|peak)\b`),
}

// figureIn returns the first measured figure in a comment's text, or "".
func figureIn(text string) string {
	text = strings.Join(strings.Fields(text), " ")
	for _, re := range measuredFigure {
		if m := re.FindString(text); m != "" {
			return m
		}
	}
	return ""
}

// TestCommentsQuoteNoMeasuredFigures: the product code's comments (cmd, internal; no tests)
// quote no measured figure. A figure goes stale where no benchmark updates it; the comment
// says why and points to docs/benchmarks.md, where each figure has its date.
func TestCommentsQuoteNoMeasuredFigures(t *testing.T) {
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	read := 0
	for _, top := range []string{"cmd", "internal"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			for _, g := range f.Comments {
				read++
				if m := figureIn(g.Text()); m != "" {
					rel, _ := filepath.Rel(root, path)
					t.Errorf("%s:%d: the comment quotes a measured figure (%q): say why, and date the figure in docs/benchmarks.md",
						filepath.ToSlash(rel), fset.Position(g.Pos()).Line, strings.TrimSpace(m))
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if read < 1000 {
		t.Fatalf("only %d comments read in cmd and internal; the walk no longer looks where the code is", read)
	}
}

// TestFigureIn: what the figure test flags, and the constants' docs it lets pass.
func TestFigureIn(t *testing.T) {
	flagged := []string{
		"held through it, ten slots kept an Availability Zone's thousand cordons to about a hundred a second.",
		"the evictions went at 153/s",
		"With all four on, the default 0.5 s makes 3.7 requests per second.",
		"A corev1.Pod is 1.2 KB before any of its fields is set",
		"the first drain took 1.2 s",
		"a thousand drains made 15,000 goroutines at the peak",
		"the calibration found 64 in flight 16 % faster",
		"2,850 goroutines at the burst's peak",
	}
	passed := []string{
		"InitialBackoff is the wait before the second attempt (500 ms); it doubles per attempt up to MaxBackoff (15 s).",
		"a Node's annotations share 256 KiB",
		"larger headers are answered 431. Zero means net/http's default, 1 MiB.",
		"Rate, when above 0, also caps requests per second across every lane (KUBE_API_QPS),",
		"Each attempt gets about a second; METADATA_TRIES attempts share one deadline.",
		"The start is the concurrency at which the AZ benchmark's calibration found the API server at its best for evictions.",
		"durationValue is a Go duration (\"500ms\", \"2s\") in [min, max]",
		"jittered up to 2.2 times the period",
		"a renewal every 2 s must never wait",
	}
	for _, c := range flagged {
		if figureIn(c) == "" {
			t.Errorf("not flagged: %q", c)
		}
	}
	for _, c := range passed {
		if m := figureIn(c); m != "" {
			t.Errorf("flagged %q in %q", m, c)
		}
	}
}
