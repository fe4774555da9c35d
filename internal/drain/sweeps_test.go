// SPDX-License-Identifier: Apache-2.0

package drain

import (
	"sync"
	"testing"
	"time"
)

// Sweeps run one at a time: one asked for while another runs follows it once, however often
// it was asked; a sweep whose cuts failed runs again a second later, until stop.
func TestSweepsRunOneAtATime(t *testing.T) {
	var mu sync.Mutex
	running, most, count := 0, 0, 0
	release := make(chan struct{})
	failures := 1 // the second sweep fails once
	s := &sweeps{sweep: func() int {
		mu.Lock()
		running++
		most = max(most, running)
		count++
		n := count
		mu.Unlock()
		if n == 1 {
			<-release // the first sweep waits while more are asked for
		}
		mu.Lock()
		defer mu.Unlock()
		running--
		if n == 2 && failures > 0 {
			failures--
			return 1
		}
		return 0
	}}
	go s.run()
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return count == 1 })
	for range 3 {
		s.run() // returns at once: the sweep under way runs one more after it
	}
	close(release)
	// The first sweep, the one asked for meanwhile, and its retry a second later.
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return count == 3 })
	mu.Lock()
	if most != 1 {
		t.Errorf("%d sweeps ran at once, want one at a time", most)
	}
	mu.Unlock()
	time.Sleep(1500 * time.Millisecond)
	mu.Lock()
	if count != 3 {
		t.Errorf("%d sweeps, want 3: a sweep without failures is not tried again", count)
	}
	mu.Unlock()

	// A failed sweep's retry does not outlive stop, and nothing runs after it.
	stopped := 0
	s2 := &sweeps{sweep: func() int { mu.Lock(); defer mu.Unlock(); stopped++; return 1 }}
	s2.run()
	s2.stop()
	time.Sleep(1500 * time.Millisecond)
	s2.run()
	mu.Lock()
	defer mu.Unlock()
	if stopped != 1 {
		t.Errorf("%d sweeps, want the one before stop", stopped)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
