// SPDX-License-Identifier: Apache-2.0

package deploy_test

import (
	"os"
	"path/filepath"
	"testing"

	"lifeboat.dev/lifeboat/deploy/chartschema"
)

// TestSchemaUpToDate regenerates values.schema.json from values.yaml and nth/keys.yaml and
// fails when the committed file differs.
func TestSchemaUpToDate(t *testing.T) {
	values, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	keys, err := os.ReadFile(filepath.Join(chartDir, "nth", "keys.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := chartschema.Generate(values, keys)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(chartDir, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("values.schema.json is stale: run make manifests (or go run ./deploy/chartschema/cmd/chart-schema)")
	}
}
