// SPDX-License-Identifier: Apache-2.0

package drain

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// Sweeps run one at a time: one asked for while another runs follows it once, however often
// it was asked; a sweep whose cuts failed runs again a second later, until stop.
func TestSweepsRunOneAtATime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		running, most, count := 0, 0, 0
		var ran []time.Time
		release := make(chan struct{})
		failures := 1 // the second sweep fails once
		s := &sweeps{sweep: func() int {
			mu.Lock()
			running++
			most = max(most, running)
			count++
			n := count
			ran = append(ran, time.Now())
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
		synctest.Wait() // the first sweep is under way
		for range 3 {
			s.run() // returns at once: the sweep under way runs one more after it
		}
		start := time.Now()
		close(release)
		synctest.Wait() // the first sweep and the one asked for meanwhile, which failed
		mu.Lock()
		if count != 2 {
			t.Errorf("%d sweeps once the first ended, want 2: the one asked for three times meanwhile runs once", count)
		}
		mu.Unlock()
		// A failed sweep's retry does not outlive stop.
		stopped := 0
		s2 := &sweeps{sweep: func() int { mu.Lock(); defer mu.Unlock(); stopped++; return 1 }}
		s2.run()
		s2.stop()

		// The failed sweep's retry comes a second later; then nothing more, from either,
		// however long the clock runs on.
		time.Sleep(time.Hour)
		synctest.Wait()
		s2.run() // after stop: nothing
		mu.Lock()
		defer mu.Unlock()
		if count != 3 || ran[2].Sub(start) != time.Second {
			t.Errorf("%d sweeps, the last %v after the failed one; want 3, the retry a second after it: a sweep without failures is not tried again", count, ran[len(ran)-1].Sub(start))
		}
		if most != 1 {
			t.Errorf("%d sweeps ran at once, want one at a time", most)
		}
		if stopped != 1 {
			t.Errorf("%d sweeps of the stopped one, want the one before stop", stopped)
		}
	})
}
