// SPDX-License-Identifier: Apache-2.0

package drain

import (
	"log/slog"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// An unreadable do-not-disrupt annotation is told once per pod and value through the drains of
// an episode; a new value is told again, and so is the same one a day later.
func TestUnreadableMarkToldOncePerPod(t *testing.T) {
	r := &Reporter{}
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	steps := []struct {
		key  string
		at   time.Time
		want bool
	}{
		{"uid-a\x00bad yes", now, true},
		{"uid-a\x00bad yes", now.Add(time.Minute), false}, // the reclaim's drain of the same episode
		{"uid-b\x00bad yes", now.Add(time.Minute), true},
		{"uid-a\x00bad forever", now.Add(2 * time.Minute), true},
		{"uid-a\x00bad yes", now.Add(markToldFor + time.Hour), true},
	}
	for i, s := range steps {
		if got := r.markDue(s.key, s.at); got != s.want {
			t.Errorf("step %d (%q): due %v, want %v", i, s.key, got, s.want)
		}
	}
}

// The pods a budget holds are listed per node while they are held, and each change is told.
func TestHolding(t *testing.T) {
	r := NewReporter(nil, noBlockedPods{}, slog.New(slog.DiscardHandler))
	var told []string
	r.OnHeldChange(func(node string) { told = append(told, node) })
	pod := func(name, node string) *Pod {
		p := &Pod{Spec: PodSpec{NodeName: node}}
		p.Namespace, p.Name, p.UID = "shop", name, types.UID(name)
		return p
	}
	by := Blocker{Budget: "ledger", Detail: "needs 1 healthy pods and has 1 currently"}
	r.Blocked(pod("b", "n1"), by)
	r.Blocked(pod("a", "n1"), by)
	r.Blocked(pod("c", "n2"), by)
	if got := r.Holding("n1"); !slices.Equal(got, []string{"shop/a (PodDisruptionBudget ledger (needs 1 healthy pods and has 1 currently))",
		"shop/b (PodDisruptionBudget ledger (needs 1 healthy pods and has 1 currently))"}) {
		t.Errorf("holding n1: %q", got)
	}
	r.Unblocked(pod("a", "n1"), by, true)
	r.Unblocked(pod("b", "n1"), by, false)
	if got := r.Holding("n1"); len(got) != 0 {
		t.Errorf("holding n1 after both left: %q", got)
	}
	if !slices.Equal(told, []string{"n1", "n1", "n2", "n1", "n1"}) {
		t.Errorf("told %q", told)
	}
}

type noBlockedPods struct{}

func (noBlockedPods) BlockedPod(string, float64) {}
