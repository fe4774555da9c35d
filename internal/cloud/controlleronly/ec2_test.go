// SPDX-License-Identifier: Apache-2.0

package controlleronly_test

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/cloud/controlleronly"
	"lifeboat.dev/lifeboat/test/sandbox/fakeaws"
	"lifeboat.dev/lifeboat/test/sandbox/sandboxtest"
)

func fakeInstance(i int) fakeaws.Instance {
	return fakeaws.Instance{
		ID:             fmt.Sprintf("i-%017x", 0xb000000+i),
		PrivateDNSName: fmt.Sprintf("ip-10-1-%d-%d.ec2.internal", i/256, i%256),
		Tags: map[string]string{
			"aws-node-termination-handler/managed": "",
			"kubernetes.io/cluster/prod":           "owned",
			"Name":                                 fmt.Sprintf("worker-%d", i),
		},
	}
}

// filterValues returns the values of each DescribeInstances request's instance-id filter.
func filterValues(t *testing.T, calls []fakeaws.Call) [][]string {
	t.Helper()
	var out [][]string
	for _, c := range calls {
		if c.Service != "ec2" || c.Action != "DescribeInstances" {
			continue
		}
		if c.Params.Get("Filter.1.Name") != "instance-id" {
			t.Errorf("request without the instance-id filter: %v", c.Params)
		}
		if len(c.Params["InstanceId.1"]) > 0 {
			t.Errorf("request uses InstanceId (fails on unknown ids): %v", c.Params)
		}
		var vals []string
		for k, v := range c.Params {
			if strings.HasPrefix(k, "Filter.1.Value.") {
				vals = append(vals, v...)
			}
		}
		out = append(out, vals)
	}
	return out
}

func TestAWSEC2DescribeInstances(t *testing.T) {
	const known = 250
	tests := []struct {
		name      string
		pageSize  int32
		wantCalls int
	}{
		// 255 ids: one request of 200 and one of 55.
		{name: "one page per filter chunk", wantCalls: 2},
		// The 200-id chunk comes back in 4 pages of 50, the 55-id chunk (50 known) in one.
		{name: "NextToken pagination", pageSize: 50, wantCalls: 5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fake := sandboxtest.FakeAWS(t, "")
			want := map[string]fakeaws.Instance{}
			var ids []string
			for i := range known {
				in := fakeInstance(i)
				if i%10 == 3 {
					in.State = "shutting-down"
				}
				fake.AddInstance(in)
				want[in.ID] = in
				ids = append(ids, in.ID)
			}
			// Instances nobody asks about, and ids EC2 does not know.
			fake.AddInstance(fakeaws.Instance{ID: "i-0notasked", PrivateDNSName: "x"})
			unknown := []string{"i-0unknown1", "i-0unknown2", "i-0unknown3", "i-0unknown4", "i-0unknown5"}
			ids = append(ids, unknown...)
			ids = append(ids, ids[0], "") // duplicates and empties are dropped

			ec2 := controlleronly.NewAWSEC2(sandboxtest.AWSConfig(fake.URL()))
			ec2.PageSize = tc.pageSize
			got, err := ec2.DescribeInstances(context.Background(), ids)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != known {
				t.Errorf("got %d instances, want %d", len(got), known)
			}
			for id, w := range want {
				g, ok := got[id]
				if !ok {
					t.Errorf("%s missing", id)
					continue
				}
				wantState := w.State
				if wantState == "" {
					wantState = "running"
				}
				if g.ID != id || g.PrivateDNSName != w.PrivateDNSName || g.State != wantState || !maps.Equal(g.Tags, w.Tags) {
					t.Errorf("%s = %+v, want dns %s state %s tags %v", id, g, w.PrivateDNSName, wantState, w.Tags)
				}
			}
			for _, id := range unknown {
				if _, ok := got[id]; ok {
					t.Errorf("unknown id %s in the answer", id)
				}
			}
			if n := fake.CallCount("ec2", "DescribeInstances"); n != tc.wantCalls {
				t.Errorf("DescribeInstances calls = %d, want %d", n, tc.wantCalls)
			}
			asked := map[string]int{}
			for _, vals := range filterValues(t, fake.Calls()) {
				if len(vals) > cloud.MaxFilterValues {
					t.Errorf("a request filtered on %d ids, more than %d", len(vals), cloud.MaxFilterValues)
				}
				for _, v := range vals {
					asked[v]++
				}
			}
			if len(asked) != known+len(unknown) {
				t.Errorf("asked about %d distinct ids, want %d", len(asked), known+len(unknown))
			}
		})
	}
}

func TestAWSEC2AutoScalingTag(t *testing.T) {
	fake := sandboxtest.FakeAWS(t, "")
	fake.AddInstance(fakeaws.Instance{ID: "i-1", PrivateDNSName: "n1", AutoScalingGroup: "workers"})
	got, err := controlleronly.NewAWSEC2(sandboxtest.AWSConfig(fake.URL())).DescribeInstances(context.Background(), []string{"i-1"})
	if err != nil {
		t.Fatal(err)
	}
	if g := got["i-1"]; g.Tags["aws:autoscaling:groupName"] != "workers" || g.PrivateDNSName != "n1" || g.State != "running" {
		t.Errorf("i-1 = %+v", g)
	}
}

func TestAWSEC2NothingToAsk(t *testing.T) {
	fake := sandboxtest.FakeAWS(t, "")
	got, err := controlleronly.NewAWSEC2(sandboxtest.AWSConfig(fake.URL())).DescribeInstances(context.Background(), nil)
	if err != nil || len(got) != 0 {
		t.Fatalf("%v, %v", got, err)
	}
	if n := fake.CallCount("ec2", ""); n != 0 {
		t.Errorf("%d EC2 calls for no ids", n)
	}
}

func TestAWSEC2Error(t *testing.T) {
	fake := sandboxtest.FakeAWS(t, "")
	fake.AddInstance(fakeInstance(1))
	fake.SetFault(fakeaws.Fault{Service: "ec2", Action: "DescribeInstances", Code: "UnauthorizedOperation", Status: 403})
	_, err := controlleronly.NewAWSEC2(sandboxtest.AWSConfig(fake.URL())).DescribeInstances(context.Background(), []string{fakeInstance(1).ID})
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"DescribeInstances", fakeInstance(1).ID, "UnauthorizedOperation"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if !cloud.IsPermanent(err) {
		t.Errorf("IsPermanent(%v) = false", err)
	}
}
