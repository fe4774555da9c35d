// SPDX-License-Identifier: Apache-2.0

package waitqueue

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func served(w *Waiter) bool {
	select {
	case <-w.Ready():
		return true
	default:
		return false
	}
}

// TestServesSoonestDueThenFirstAdded: the order of service is by due time, ties by arrival,
// whatever the order of adding; removed waiters are skipped and never served.
func TestServesSoonestDueThenFirstAdded(t *testing.T) {
	base := time.Unix(1_700_000_000, 0)
	var q Queue
	type entry struct {
		w    *Waiter
		due  int
		seq  int
		gone bool
	}
	var all []*entry
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 200 {
		due := r.IntN(20)
		all = append(all, &entry{w: q.Add(base.Add(time.Duration(due) * time.Second)), due: due, seq: i})
	}
	for i := 0; i < len(all); i += 7 {
		q.Remove(all[i].w)
		all[i].gone = true
		if all[i].w.Queued() {
			t.Fatalf("waiter %d still queued after Remove", i)
		}
	}
	var want []*entry
	for _, e := range all {
		if !e.gone {
			want = append(want, e)
		}
	}
	slices.SortStableFunc(want, func(a, b *entry) int { return a.due - b.due })
	if q.Len() != len(want) {
		t.Fatalf("Len = %d, want %d", q.Len(), len(want))
	}
	for i, e := range want {
		if !q.Serve() {
			t.Fatalf("Serve %d: queue empty, want waiter %d", i, e.seq)
		}
		if !served(e.w) || e.w.Queued() {
			t.Fatalf("Serve %d served someone other than waiter %d (due %d)", i, e.seq, e.due)
		}
	}
	if q.Serve() || q.Len() != 0 {
		t.Fatalf("queue not empty after serving every waiter")
	}
	for _, e := range all {
		if e.gone && served(e.w) {
			t.Fatalf("removed waiter %d was served", e.seq)
		}
	}
}

// TestRemoveAfterServeIsHarmless: a waiter whose turn came as its caller gave up can be
// removed without disturbing the others.
func TestRemoveAfterServeIsHarmless(t *testing.T) {
	var q Queue
	now := time.Now()
	a, b := q.Add(now), q.Add(now.Add(time.Second))
	q.Serve()
	q.Remove(a)
	if !served(a) || q.Len() != 1 || !b.Queued() {
		t.Fatalf("after Serve and Remove of the served: Len %d, b queued %v", q.Len(), b.Queued())
	}
}
