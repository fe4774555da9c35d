// SPDX-License-Identifier: Apache-2.0

package status

import (
	"bytes"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/source/nodecondition"
)

func TestRepairBreakerLine(t *testing.T) {
	sick := &corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
		{Type: "KernelReady", Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(time.Now())}}}}
	well := &corev1.Node{}
	cfg := &config.Config{EnableNodeRepair: true, NodeRepairMaxUnhealthyPercent: 20}
	if b := repairBreaker(cfg, []*corev1.Node{sick}, true); b != nil {
		t.Errorf("named nodes: %+v, want no breaker", b)
	}
	if b := repairBreaker(&config.Config{}, []*corev1.Node{sick}, false); b != nil {
		t.Errorf("repairs off: %+v, want no breaker", b)
	}
	var out bytes.Buffer
	printRepairs(&out, repairBreaker(cfg, []*corev1.Node{sick, well, well}, false))
	if got := out.String(); !strings.Contains(got, "breaker closed") || !strings.Contains(got, "1 of 3 nodes unhealthy") {
		t.Errorf("one of three at 20%% (one allowed, rounded up): line %q", got)
	}
	held := sick.DeepCopy()
	held.Name = "held-1"
	held.Status.Conditions = append(held.Status.Conditions, corev1.NodeCondition{Type: nodecondition.ConditionHeld, Status: corev1.ConditionTrue,
		Reason: "GroupUnhealthyShare", Message: "2 of 2 nodes of Auto Scaling group gpu unhealthy"})
	out.Reset()
	printRepairs(&out, repairBreaker(cfg, []*corev1.Node{sick, held, well}, false))
	if got := out.String(); !strings.Contains(got, "breaker open") || !strings.Contains(got, "2 of 3 nodes unhealthy, more than the 1") ||
		!strings.Contains(got, "Node repair of held-1 held: 2 of 2 nodes of Auto Scaling group gpu unhealthy") {
		t.Errorf("two of three at 20%%, one held by its group's breaker: %q", got)
	}
}
