// SPDX-License-Identifier: Apache-2.0

package deploy_test

import (
	"os"
	"path/filepath"
	"testing"

	"lifeboat.dev/lifeboat/deploy/chartschema"
)

// TestSchemaUpToDate regenerates schema/values.json (which the templates check values
// against) and values.schema.json (which describes them to helm) from values.yaml and
// nth/keys.yaml, and fails when a committed file differs.
func TestSchemaUpToDate(t *testing.T) {
	values, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	keys, err := os.ReadFile(filepath.Join(chartDir, "nth", "keys.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for file, generate := range map[string]func([]byte, []byte) ([]byte, error){
		filepath.Join("schema", "values.json"): chartschema.Generate,
		"values.schema.json":                   chartschema.Describe,
	} {
		want, err := generate(values, keys)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(chartDir, file))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%s is stale: run make manifests (or go run ./deploy/chartschema/cmd/chart-schema)", file)
		}
	}
}
