// SPDX-License-Identifier: Apache-2.0

package demo

import (
	"bytes"
	"maps"
	"testing"
	"time"

	"lifeboat.dev/lifeboat/internal/status"
)

// The check reads the mid-drain status's table: it must find a pod held by a budget, with
// the budget, as status.Print writes it, and no other pod.
func TestHeldPods(t *testing.T) {
	r := &status.Report{At: time.Now(), Nodes: []status.Node{{Name: "ip-10-0-0-1.ec2.internal", Phase: "draining", Pods: []status.Pod{
		{Name: "kube-system/log-shipper-a", State: status.StateStays, Why: "DaemonSet pod (IGNORE_DAEMON_SETS=true)"},
		{Name: "shop/checkout-1", State: status.StateHeld, Why: "PodDisruptionBudget checkout allows no disruption now (needs 3 healthy pods and has 3)"},
		{Name: "shop/web-1", State: status.StateToEvict},
	}}}}
	var out bytes.Buffer
	if err := status.Print(&out, r, status.FormatTable); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"shop/checkout-1": "checkout"}
	if got := heldPods(out.String()); !maps.Equal(got, want) {
		t.Errorf("heldPods = %v, want %v, from:\n%s", got, want, out.String())
	}
}
