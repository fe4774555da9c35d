// SPDX-License-Identifier: Apache-2.0

// Command lifeboat-benchreport reads `go test -bench` output on standard input (or -in),
// prints one table of every benchmark metric, and writes the results as JSON and as an SVG
// bar chart. make bench runs it on the benchmarks' output.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"lifeboat.dev/lifeboat/test/benchreport"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("lifeboat-benchreport", flag.ContinueOnError)
	fs.SetOutput(stderr)
	in := fs.String("in", "", "benchmark output to read (default: standard input)")
	jsonPath := fs.String("json", "", "write the results as JSON to this file")
	svgPath := fs.String("svg", "", "write an SVG bar chart to this file")
	title := fs.String("title", "Lifeboat benchmarks", "title of the chart")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "lifeboat-benchreport: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	src := stdin
	if *in != "" {
		f, err := os.Open(*in)
		if err != nil {
			fmt.Fprintf(stderr, "lifeboat-benchreport: %v\n", err)
			return 1
		}
		defer f.Close()
		src = f
	}
	rep, err := benchreport.Parse(src)
	if err != nil {
		fmt.Fprintf(stderr, "lifeboat-benchreport: %v\n", err)
		return 1
	}
	if err := benchreport.WriteTable(stdout, rep); err != nil {
		fmt.Fprintf(stderr, "lifeboat-benchreport: %v\n", err)
		return 1
	}
	for _, out := range []struct {
		path  string
		write func(io.Writer) error
	}{
		{*jsonPath, func(w io.Writer) error { return benchreport.WriteJSON(w, rep) }},
		{*svgPath, func(w io.Writer) error { return benchreport.WriteSVG(w, rep, *title) }},
	} {
		if out.path == "" {
			continue
		}
		if err := writeFile(out.path, out.write); err != nil {
			fmt.Fprintf(stderr, "lifeboat-benchreport: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "wrote %s\n", out.path)
	}
	if len(rep.Results) == 0 {
		fmt.Fprintln(stderr, "lifeboat-benchreport: no benchmark results in the input")
		return 1
	}
	return 0
}

func writeFile(path string, write func(io.Writer) error) error {
	var buf bytes.Buffer
	if err := write(&buf); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}
