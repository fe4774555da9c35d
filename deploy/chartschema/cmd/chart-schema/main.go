// SPDX-License-Identifier: Apache-2.0

// Command chart-schema writes deploy/chart/lifeboat/values.schema.json (make manifests runs
// it; a test fails when the file is stale).
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"lifeboat.dev/lifeboat/deploy/chartschema"
)

func main() {
	chart := filepath.Join("deploy", "chart", "lifeboat")
	if len(os.Args) > 1 {
		chart = os.Args[1]
	}
	if err := run(chart); err != nil {
		fmt.Fprintln(os.Stderr, "chart-schema:", err)
		os.Exit(1)
	}
}

func run(chart string) error {
	values, err := os.ReadFile(filepath.Join(chart, "values.yaml"))
	if err != nil {
		return err
	}
	keys, err := os.ReadFile(filepath.Join(chart, "nth", "keys.yaml"))
	if err != nil {
		return err
	}
	schema, err := chartschema.Generate(values, keys)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(chart, "values.schema.json"), schema, 0o644)
}
