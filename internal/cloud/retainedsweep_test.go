// SPDX-License-Identifier: Apache-2.0

package cloud_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/test/sandbox/fakeaws"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

// The retained instances of the groups that retain them, from DescribeAutoScalingGroups: 100
// group names a request, every page followed; groups without the policy list none.
func TestRetainedInstances(t *testing.T) {
	fake := sandboxtest.FakeAWS(t, "")
	var groups []string
	for g := range 120 {
		name := fmt.Sprintf("g%03d", g)
		groups = append(groups, name)
		fake.AddInstance(fakeaws.Instance{ID: fmt.Sprintf("i-%08x", g), AutoScalingGroup: name})
		fake.AddLifecycleHook(fakeaws.LifecycleHook{Name: "drain", AutoScalingGroup: name})
		fake.SetRetainOnAbandon(name, g%2 == 0)
		if g%3 == 0 {
			fake.BeginLifecycleAction("drain", name, fmt.Sprintf("i-%08x", g), fmt.Sprint("tok", g))
			fake.TimeOutLifecycleAction(fmt.Sprint("tok", g))
		}
	}
	got, requests, err := cloud.NewAWSAutoScaling(sandboxtest.AWSConfig(fake.URL())).RetainedInstances(context.Background(), groups)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range got {
		ids = append(ids, r.ID)
	}
	var want []string
	for g := 0; g < 120; g += 6 { // retaining (even) and timed out (multiple of 3)
		want = append(want, fmt.Sprintf("i-%08x", g))
	}
	slices.Sort(ids)
	if !slices.Equal(ids, want) {
		t.Errorf("retained %v, want %v", ids, want)
	}
	if n := fake.CallCount("autoscaling", "DescribeAutoScalingGroups"); n != requests || requests < 2 {
		t.Errorf("%d requests counted, %d made", requests, n)
	}
}
