// SPDX-License-Identifier: Apache-2.0

package deploy_test

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lifeboat.dev/lifeboat/deploy"
)

var updateDocs = flag.Bool("update", false, "write the generated parts of the docs instead of comparing them (make docs)")

const (
	permissionsStart = "<!-- generated from deploy.AWSPermissions by make docs: do not edit -->"
	permissionsEnd   = "<!-- end of generated permissions -->"
)

// awsPermissionsTable is the migration guide's list of IAM actions, from deploy.AWSPermissions.
func awsPermissionsTable() string {
	var b strings.Builder
	b.WriteString(permissionsStart + "\n\n| action | resource | needed | for | granted by deploy/aws |\n| --- | --- | --- | --- | --- |\n")
	for _, p := range deploy.AWSPermissions {
		resource := map[string]string{"queue": "the cluster's queue", "key": "the queue's KMS key", "group": "Auto Scaling groups tagged for the cluster",
			"instance": "EC2 instances tagged for the cluster", "nodegroup": "the EKS cluster's managed node groups", "*": "`*`"}[p.Scope]
		needed := "always"
		if p.Optional != "" {
			needed = "with `" + p.Optional + "`"
		}
		grant := "always"
		if p.Grant != "" {
			grant = "with `" + p.Grant + "` (`" + cfnParamName(p.Grant) + "`)"
		}
		b.WriteString("| `" + p.Action + "` | " + resource + " | " + needed + " | " + p.Why + " | " + grant + " |\n")
	}
	b.WriteString("\n" + permissionsEnd)
	return b.String()
}

// TestMigrationGuidePermissions: the migration guide lists every IAM action the binary calls
// (deploy.AWSPermissions, held to the code by TestAWSPermissionsAreTheBinarysCalls), as
// generated; with -update it writes the list.
func TestMigrationGuidePermissions(t *testing.T) {
	path := filepath.Join("..", "docs", "operations", "migrating-from-nth.md")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i, j := strings.Index(doc, permissionsStart), strings.Index(doc, permissionsEnd)
	if i < 0 || j < i {
		t.Fatalf("%s has no generated permissions block (%q ... %q)", path, permissionsStart, permissionsEnd)
	}
	want := doc[:i] + awsPermissionsTable() + doc[j+len(permissionsEnd):]
	if want == doc {
		return
	}
	if *updateDocs {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s: the IAM permissions are stale: run make docs", path)
}
