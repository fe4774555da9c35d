// SPDX-License-Identifier: Apache-2.0

package sandbox

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A drain's start recorded a moment before the cordon that let it start is listed after it;
// a second apart, or from another component, the order the Events were seen stands.
func TestInStoryOrder(t *testing.T) {
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	event := func(reason, component string, seen time.Time) corev1.Event {
		return corev1.Event{Reason: reason, Source: corev1.EventSource{Component: component}, LastTimestamp: metav1.NewTime(seen)}
	}
	reasons := func(evs []corev1.Event) []string {
		var out []string
		for _, e := range evs {
			out = append(out, e.Reason)
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		events []corev1.Event
		want   []string
	}{
		{"same second, swapped back", []corev1.Event{event("ASGLifecycle", "lifeboat", at), event("DrainStarted", "lifeboat", at),
			event("Cordon", "lifeboat", at), event("CordonAndDrain", "lifeboat", at.Add(time.Second))},
			[]string{"ASGLifecycle", "Cordon", "DrainStarted", "CordonAndDrain"}},
		{"already in order", []corev1.Event{event("Cordon", "lifeboat", at), event("DrainStarted", "lifeboat", at)},
			[]string{"Cordon", "DrainStarted"}},
		{"two seconds apart: kept", []corev1.Event{event("DrainStarted", "lifeboat", at), event("Cordon", "lifeboat", at.Add(2*time.Second))},
			[]string{"DrainStarted", "Cordon"}},
		{"another component: kept", []corev1.Event{event("DrainStarted", "lifeboat", at), event("Cordon", "kubelet", at)},
			[]string{"DrainStarted", "Cordon"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inStoryOrder(tc.events)
			if got := reasons(tc.events); !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
