// SPDX-License-Identifier: Apache-2.0

package demo

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The summary names each hand-back wait with its time, and says whether the lifecycle action
// was completed after both.
func TestSummaryDetach(t *testing.T) {
	r := handled()
	var out bytes.Buffer
	if err := writeSummary(&out, filepath.Join(t.TempDir(), "summary.txt"), r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"i-0b in target group web: deregistered by Auto Scaling +0.0s, draining until +10.0s",
		"volume  pv-db-0 of shop/db-0 (VolumeAttachment csi-db-0): pod gone +3.0s, detached +5.0s",
		"the controller waited 6.0s for load-balancer targets to drain; under a second for volumes to detach",
		"lifecycle action completed +11.0s, after both",
		"kubectl describe node  (node B), its Events, oldest first",
		"  Normal  LifecycleActionCompleted  +5s  lifeboat         LifecycleActionCompleted message",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}

	r.Cases[1].Detach.Waits[0] = DetachWait{Wait: "volumes", Outcome: WaitReleased, Took: 3100 * time.Millisecond}
	r.Cases[1].Detach.DrainingAtCompletion = []string{"i-0b in target group web (draining)"}
	out.Reset()
	if err := writeSummary(&out, filepath.Join(t.TempDir(), "summary.txt"), r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"6.0s for load-balancer targets to drain; 3.1s for volumes to detach", "while it still held i-0b in target group web (draining)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
}
