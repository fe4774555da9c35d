// SPDX-License-Identifier: Apache-2.0

package record

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The repair memory is input: what does not read or validate is empty, with an error that
// names the annotation; an edit that leaves nothing removes the annotation.
func TestRepairMemory(t *testing.T) {
	with := func(raw string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{AnnotationRepair: raw}}}
	}
	for _, tc := range []struct{ raw, err string }{
		{raw: `{"started":"2026-12-01T10:00:00Z"}`},
		{raw: `{"clocks":[{"type":"KernelReady","status":"False","since":"2026-12-01T10:00:00Z","restated":"2026-12-01T10:05:00Z"}]}`},
		{raw: `not json`, err: "invalid character"},
		{raw: `{"clocks":[{"type":"KernelReady","status":"Maybe","since":"2026-12-01T10:00:00Z","restated":"2026-12-01T10:05:00Z"}]}`, err: "not True, False or Unknown"},
		{raw: `{"clocks":[{"type":"KernelReady","status":"False","since":"2026-12-01T10:05:00Z","restated":"2026-12-01T10:00:00Z"}]}`, err: "is not before"},
		{raw: `{"clocks":[{"type":"","status":"False","since":"2026-12-01T10:00:00Z","restated":"2026-12-01T10:05:00Z"}]}`, err: "type is empty"},
		{raw: `{"started":"` + strings.Repeat("x", maxRepairBytes) + `"}`, err: "more than"},
		{raw: `{"taken":"repair-i-0123456789abcdef0-KernelReady@2026-12-01T10:00:00Z"}`},
		{raw: `{"taken":"` + strings.Repeat("x", maxRepairTaken+1) + `"}`, err: "taken"},
	} {
		r, err := ReadRepair(with(tc.raw))
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%.60s: %v", tc.raw, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), AnnotationRepair)):
			t.Errorf("%.60s: error %v, want one naming the annotation and saying %q", tc.raw, err, tc.err)
		case tc.err != "" && !r.Empty():
			t.Errorf("%.60s: %+v kept from an invalid annotation", tc.raw, r)
		}
	}
	n := with(`{"started":"2026-12-01T10:00:00Z"}`)
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	RepairEdit(func(r *Repair) {
		r.SetClock(ConditionClock{Type: "KernelReady", Status: "False", Since: at, Restated: at.Add(time.Minute)})
	})(n)
	RepairEdit(func(r *Repair) {
		r.SetClock(ConditionClock{Type: "KernelReady", Status: "False", Since: at, Restated: at.Add(2 * time.Minute)})
	})(n)
	r, err := ReadRepair(n)
	if c, ok := r.Clock("KernelReady"); err != nil || len(r.Clocks) != 1 || !ok || !c.Restated.Equal(at.Add(2*time.Minute)) {
		t.Errorf("clocks %+v (%v), want the latest one alone", r.Clocks, err)
	}
	RepairEdit(func(r *Repair) { r.DropClock("KernelReady"); r.Started = time.Time{} })(n)
	if _, ok := n.Annotations[AnnotationRepair]; ok {
		t.Error("an empty repair memory was written")
	}
}
