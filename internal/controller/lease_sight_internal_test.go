// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// leaseStore is one Lease in memory, unreachable while down.
type leaseStore struct {
	mu   sync.Mutex
	rec  resourcelock.LeaderElectionRecord
	down bool
}

func (s *leaseStore) setDown(down bool) { s.mu.Lock(); s.down = down; s.mu.Unlock() }

// renew writes the record as its holder's renewal would, unless the server is down.
func (s *leaseStore) renew(holder string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return false
	}
	s.rec.HolderIdentity, s.rec.RenewTime = holder, metav1.Now()
	return true
}

func (s *leaseStore) holder() string { s.mu.Lock(); defer s.mu.Unlock(); return s.rec.HolderIdentity }

// storeLock is one replica's view of the leaseStore.
type storeLock struct {
	s        *leaseStore
	identity string
}

var errServerDown = errors.New("connection refused")

func (l storeLock) Get(context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	if l.s.down {
		return nil, nil, errServerDown
	}
	r := l.s.rec
	raw, err := json.Marshal(r)
	return &r, raw, err
}

func (l storeLock) Create(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	return l.Update(ctx, r)
}

func (l storeLock) Update(_ context.Context, r resourcelock.LeaderElectionRecord) error {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	if l.s.down {
		return errServerDown
	}
	l.s.rec = r
	return nil
}

func (l storeLock) RecordEvent(string) {}
func (l storeLock) Identity() string   { return l.identity }
func (l storeLock) Describe() string   { return "test/lease" }

// An API server outage longer than the Lease: the standby, which could not see the Lease
// either, counts its duration again from its first read after the outage, and the leader,
// renewing a second after the server is back, keeps it. A leader that died with the outage
// is replaced a Lease's duration after the server is back, not at once.
func TestStandbyCountsTheLeaseAgainAfterAnOutage(t *testing.T) {
	const lease, renewDeadline, retry = 3 * time.Second, 2 * time.Second, 250 * time.Millisecond
	for _, tc := range []struct {
		name       string
		leaderBack bool // the leader renews a second after the outage
	}{
		{"the leader comes back", true},
		{"the leader died with the outage", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				store := &leaseStore{rec: resourcelock.LeaderElectionRecord{HolderIdentity: "leader", LeaseDurationSeconds: 3,
					AcquireTime: metav1.Now(), RenewTime: metav1.Now()}}
				leaderStop := make(chan struct{})
				go func() { // the leader renews every retry period until the outage
					for {
						select {
						case <-leaderStop:
							return
						case <-time.After(retry):
							store.renew("leader")
						}
					}
				}()
				var led time.Time
				var mu sync.Mutex
				go leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
					Lock:          &handoverLock{Interface: storeLock{s: store, identity: "standby"}, beforeRelease: func(context.Context) {}},
					LeaseDuration: lease, RenewDeadline: renewDeadline, RetryPeriod: retry,
					Callbacks: leaderelection.LeaderCallbacks{
						OnStartedLeading: func(context.Context) { mu.Lock(); led = time.Now(); mu.Unlock() },
						OnStoppedLeading: func() {},
					},
				})
				time.Sleep(2 * time.Second) // in the bubble: virtual time
				close(leaderStop)
				store.setDown(true)
				time.Sleep(6 * time.Second)
				store.setDown(false)
				back := time.Now()
				if tc.leaderBack {
					time.Sleep(time.Second)
					if !store.renew("leader") {
						t.Fatal("the leader's renewal after the outage failed")
					}
					for range 40 { // and goes on renewing
						time.Sleep(retry)
						store.renew("leader")
					}
				} else {
					time.Sleep(10 * time.Second)
				}
				mu.Lock()
				defer mu.Unlock()
				switch {
				case tc.leaderBack && !led.IsZero():
					t.Errorf("the standby took the Lease %v after the outage, while the leader renewed a second after it", led.Sub(back))
				case tc.leaderBack && store.holder() != "leader":
					t.Errorf("holder %q, want the leader", store.holder())
				case !tc.leaderBack && led.IsZero():
					t.Error("the standby never replaced the leader that died")
				// Its first read after the outage and its acquiring try each come up to 2.2 retry
				// periods apart (client-go's elector jitters them by a factor of 1.2).
				case !tc.leaderBack && (led.Sub(back) < lease || led.Sub(back) > lease+5*retry):
					t.Errorf("the standby led %v after the outage, want a Lease's duration (%v) after it, within a few retries", led.Sub(back), lease)
				}
				cancel()
				synctest.Wait()
			})
		})
	}
}
