// SPDX-License-Identifier: Apache-2.0

package drain

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// Freed slots go to the soonest deadline, first come among equals; never more are out than
// the bound.
func TestEvictionSlotsOrderByDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newEvictionSlots(1)
		ctx := context.Background()
		hold, err := s.acquire(ctx, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		base := time.Now()
		deadlines := map[string]time.Time{"late": base.Add(time.Hour), "soon": base.Add(time.Minute), "soon-too": base.Add(time.Minute), "middle": base.Add(10 * time.Minute)}
		var mu sync.Mutex
		var order []string
		var wg sync.WaitGroup
		for _, name := range []string{"late", "soon", "soon-too", "middle"} {
			wg.Go(func() {
				release, err := s.acquire(ctx, deadlines[name])
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				order = append(order, name)
				mu.Unlock()
				release()
				release() // a second call gives nothing back twice
			})
			synctest.Wait() // queued in this order
		}
		hold()
		wg.Wait()
		if want := []string{"soon", "soon-too", "middle", "late"}; !slices.Equal(order, want) {
			t.Errorf("slots went to %v, want %v", order, want)
		}
		if s.free != 1 {
			t.Errorf("%d slots free at the end, want 1", s.free)
		}
	})
}

// 500 acquirers on 8 slots: never more than 8 held at once, and all served.
func TestEvictionSlotsBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const acquirers = 500
		s := newEvictionSlots(8)
		var held, served atomic.Int32
		free := make(chan struct{}) // each send has one holder give its slot back
		var wg sync.WaitGroup
		for i := range acquirers {
			wg.Go(func() {
				release, err := s.acquire(context.Background(), time.Now().Add(time.Duration(i%7)*time.Second))
				if err != nil {
					t.Error(err)
					return
				}
				held.Add(1)
				<-free
				held.Add(-1)
				served.Add(1)
				release()
			})
		}
		// Once everything waits, the 8 slots are held, or as many acquirers as are left.
		for done := range acquirers {
			synctest.Wait()
			if n, want := held.Load(), int32(min(8, acquirers-done)); n != want {
				t.Fatalf("%d slots held with %d of %d served; want %d", n, done, acquirers, want)
			}
			free <- struct{}{}
		}
		wg.Wait()
		if served.Load() != acquirers {
			t.Errorf("%d of %d served", served.Load(), acquirers)
		}
	})
}

// A wait that ends leaves the queue; a slot handed over just as the wait ended is passed on,
// not lost.
func TestEvictionSlotsCancelledWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newEvictionSlots(1)
		if _, err := s.acquire(context.Background(), time.Now()); err != nil { // the only slot, held throughout
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := s.acquire(ctx, time.Now()); err == nil {
			t.Fatal("acquire with every slot held returned before its context ended")
		}
		if s.waiters.Len() != 0 {
			t.Fatalf("%d waiters left after the wait ended", s.waiters.Len())
		}
		// Hand the slot to a waiter, then end its wait before it runs.
		ctx2, cancel2 := context.WithCancel(context.Background())
		done := make(chan error)
		go func() {
			_, err := s.acquire(ctx2, time.Now())
			done <- err
		}()
		synctest.Wait()
		s.mu.Lock()
		cancel2()
		s.releaseLocked() // the held slot handed over, under the lock, as release does it
		s.mu.Unlock()
		if err := <-done; err == nil {
			// It took the slot: give it back as a worker would.
			s.mu.Lock()
			s.releaseLocked()
			s.mu.Unlock()
		}
		if s.free != 1 || s.waiters.Len() != 0 {
			t.Errorf("after the race: %d free, %d waiting; want 1 and 0", s.free, s.waiters.Len())
		}
	})
}
