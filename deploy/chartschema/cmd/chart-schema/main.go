// SPDX-License-Identifier: Apache-2.0

// Command chart-schema writes deploy/chart/lifeboat/schema/values.json, which the chart's
// templates check values against, and values.schema.json, which describes them to helm (make
// manifests runs it; a test fails when either is stale).
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
	described, err := chartschema.Describe(values, keys)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(chart, "schema"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(chart, "schema", "values.json"), schema, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(chart, "values.schema.json"), described, 0o644)
}
