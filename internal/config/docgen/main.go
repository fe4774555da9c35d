// SPDX-License-Identifier: Apache-2.0

// Command docgen writes the configuration reference (docs/configuration.md) from Lifeboat's
// settings table. Run it through `make docs` (or `go generate ./internal/config`).
package main

import (
	"flag"
	"fmt"
	"os"

	"lifeboat.dev/lifeboat/internal/config"
)

func main() {
	out := flag.String("o", "", "file to write (default: standard output)")
	flag.Parse()
	doc := append(config.Reference(), '\n')
	if *out == "" {
		os.Stdout.Write(doc)
		return
	}
	if err := os.WriteFile(*out, doc, 0o644); err != nil {
		fmt.Fprintf(os.Stderr, "docgen: %v\n", err)
		os.Exit(1)
	}
}
