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
	if got := out.String(); !strings.Contains(got, "breaker open") || !strings.Contains(got, "1 of 3 nodes unhealthy") {
		t.Errorf("line %q", got)
	}
}
