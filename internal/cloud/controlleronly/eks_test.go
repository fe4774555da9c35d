// SPDX-License-Identifier: Apache-2.0

package controlleronly_test

import (
	"context"
	"errors"
	"testing"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/cloud/controlleronly"
	"lifeboat.dev/lifeboat/test/sandbox/fakeaws"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// DescribeNodegroup through the SDK: the repair configuration read, a node group without one
// off, an unknown node group ErrNoSuchNodegroup, a refusal AWS's denial, each one call with
// the cluster's name.
func TestNodegroupAutoRepaired(t *testing.T) {
	fake := sandboxtest.FakeAWS(t, "")
	fake.PutNodegroup(fakeaws.Nodegroup{Cluster: "prod", Name: "ng-on", AutoRepair: true})
	fake.PutNodegroup(fakeaws.Nodegroup{Cluster: "prod", Name: "ng-off"})
	fake.PutNodegroup(fakeaws.Nodegroup{Cluster: "prod", Name: "ng-old", NoRepairConfig: true})
	fake.PutNodegroup(fakeaws.Nodegroup{Cluster: "other", Name: "ng-elsewhere", AutoRepair: true})
	eks := controlleronly.NewAWSEKS(sandboxtest.AWSConfig(fake.URL()))
	ctx := context.Background()
	for name, want := range map[string]bool{"ng-on": true, "ng-off": false, "ng-old": false} {
		if got, err := eks.NodegroupAutoRepaired(ctx, "prod", name); got != want || err != nil {
			t.Errorf("%s: %v, %v; want %v", name, got, err, want)
		}
		if n := fake.NodegroupLookups("prod", name); n != 1 {
			t.Errorf("%s: %d calls", name, n)
		}
	}
	if _, err := eks.NodegroupAutoRepaired(ctx, "prod", "ng-elsewhere"); !errors.Is(err, cloud.ErrNoSuchNodegroup) {
		t.Errorf("another cluster's node group: %v, want ErrNoSuchNodegroup", err)
	}
	fake.Deny("eks", "DescribeNodegroup")
	_, err := eks.NodegroupAutoRepaired(ctx, "prod", "ng-on")
	if code, ok := cloud.Denied(err); !ok || code != "AccessDeniedException" {
		t.Errorf("refused: %v (code %q)", err, code)
	}
	if got := cloud.IAMAction("DescribeNodegroup"); got != "eks:DescribeNodegroup" {
		t.Errorf("IAMAction(DescribeNodegroup) = %q", got)
	}
}
