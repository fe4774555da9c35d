// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// errRenewDeadline ends a term whose Lease went unrenewed for the renew deadline.
var errRenewDeadline = errors.New("the Lease was not renewed within LEADER_ELECTION_RENEW_DEADLINE")

// ErrLeaseLost is RunWithLeaderElection's end when this replica led and lost the Lease (its
// renewals did not get through): its work has stopped, and it may stand by again.
var ErrLeaseLost = errors.New("lost the Lease: its renewals did not get through within LEADER_ELECTION_RENEW_DEADLINE")

// RunWithLeaderElection keeps this replica a warm standby (its node and pod caches synced by
// watches, nothing written) and runs the controller's work while it holds the Lease. It
// returns when it loses the Lease or ctx ends. The hand-over happens once, at the end: the
// work stops first, then the Lease is released, so a standby takes over at once and nothing
// this replica does follows the release. If the work loop (Run) ends by itself while leading,
// it releases the Lease too and returns Run's error, rather than keep renewing a Lease for a
// leader that does nothing. A term that ended because the renewals did not get through
// returns ErrLeaseLost.
func (c *Controller) RunWithLeaderElection(ctx context.Context) error {
	c.metrics.Leader(false) // a standby says so from the start
	identity := c.cfg.PodName
	if identity == "" {
		host, _ := os.Hostname()
		identity = host + "-" + rand.String(5)
	}
	leases := c.leaseClient
	inner, err := resourcelock.New(resourcelock.LeasesResourceLock, c.cfg.PodNamespace, c.cfg.LeaseName,
		leases.CoreV1(), leases.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: identity})
	if err != nil {
		return err
	}
	w, err := c.warmUp()
	if err != nil {
		return err
	}
	defer w.stop()
	// The elector releases the Lease only when its context ends: ending it is how a work loop
	// that stopped by itself hands over to a standby.
	electing, stopElecting := context.WithCancel(ctx)
	defer stopElecting()
	term := &leaderTerm{c: c, warm: w, identity: identity, stopElecting: stopElecting}
	lock := &handoverLock{Interface: inner, beforeRelease: term.waitWork}
	term.lock = lock
	leaderelection.RunOrDie(electing, leaderelection.LeaderElectionConfig{
		Lock: lock, ReleaseOnCancel: true,
		LeaseDuration: c.cfg.LeaseDuration, RenewDeadline: c.cfg.LeaseRenewDeadline, RetryPeriod: c.cfg.LeaseRetryPeriod,
		Callbacks: leaderelection.LeaderCallbacks{OnStartedLeading: term.lead, OnStoppedLeading: term.lost},
	})
	err = term.wait()
	if ctx.Err() == nil && term.lostLease() {
		return ErrLeaseLost
	}
	return err
}

// handoverLock is the Lease as the elector holds it, with the two guards of a clean
// hand-over. The release (an update naming no holder) first waits for the work loop to end,
// whatever ended the term (SIGTERM, the pod's eviction, a lost Lease): nothing this replica
// does follows it. And it keeps the time of the last create or renewal that got through,
// from which the term's watchdog stops the work at the renew deadline, before the Lease can
// run out for the others (client-go's elector gives up a renew deadline after its first
// failed try, a retry period later, and only then cancels the work).
type handoverLock struct {
	resourcelock.Interface
	beforeRelease func(ctx context.Context)
	renewed       atomic.Int64 // UnixNano when the last successful write was sent
	sight         leaseSight
}

// Get reads the Lease. Once reads have failed, the record read next is shown to the elector
// as new, so that a standby counts the Lease's duration from then (see leaseSight).
func (l *handoverLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	r, raw, err := l.Interface.Get(ctx)
	if err != nil {
		l.sight.lost()
		return r, raw, err
	}
	return r, l.sight.shown(raw), nil
}

// leaseSight keeps a standby from taking over merely because it could not see the Lease for a
// while. client-go's elector counts a Lease's duration from the moment it last saw the record
// change; after an API server outage the record it reads is the one from before, so without
// this the standby would find the Lease run out at its first read and race the leader, which
// could not renew during the outage either and renews at its own first try. Shown as new, the
// record gives the leader the Lease's whole duration again, measured from when both can reach
// the server; a leader that is really gone is replaced that much later. One failed read alone
// (a dropped connection, a 429) is not an outage: it takes blindReads in a row.
type leaseSight struct {
	mu     sync.Mutex
	failed int    // reads failed in a row
	marked []byte // the record as read when it was last shown as new, nil when none is
	shows  int    // how many times a record was shown as new
}

// blindReads is how many reads in a row must fail before the next record is shown as new.
const blindReads = 2

func (s *leaseSight) lost() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failed++
}

// shown is raw as the elector is to see it: marked as new after failed reads, and kept so
// until the record itself changes.
func (s *leaseSight) shown(raw []byte) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed >= blindReads {
		s.marked = raw
		s.shows++
	} else if s.marked != nil && !bytes.Equal(s.marked, raw) {
		s.marked = nil
	}
	s.failed = 0
	if s.marked == nil {
		return raw
	}
	// The elector compares the bytes only; the record itself is returned unchanged.
	return fmt.Appendf(slices.Clip(raw), "\n#seen again %d", s.shows)
}

func (l *handoverLock) Create(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	sent := time.Now()
	err := l.Interface.Create(ctx, r)
	if err == nil {
		l.renewed.Store(sent.UnixNano())
	}
	return err
}

func (l *handoverLock) Update(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	if r.HolderIdentity == "" {
		l.beforeRelease(ctx)
	}
	sent := time.Now()
	err := l.Interface.Update(ctx, r)
	if err == nil && r.HolderIdentity != "" {
		l.renewed.Store(sent.UnixNano())
	}
	return err
}

// sinceRenewed is the time since the last write that got through was sent.
func (l *handoverLock) sinceRenewed() time.Duration {
	return time.Since(time.Unix(0, l.renewed.Load()))
}

// leaderTerm is one RunWithLeaderElection: the work loop run while this replica leads. The
// elector starts OnStartedLeading in a goroutine of its own and may return before it ends;
// wait waits for it, so in-flight work has stopped when RunWithLeaderElection returns.
type leaderTerm struct {
	c            *Controller
	warm         *warm
	lock         *handoverLock
	identity     string
	stopElecting context.CancelFunc

	mu      sync.Mutex
	stopped bool          // the elector returned or released: a late start runs nothing
	runDone chan struct{} // closed when the work loop has ended
	runErr  error
	// byItself: the work loop ended by itself, not with the term.
	byItself bool
}

// lead runs the work loop while leading. A loop that ends by itself (neither lost nor
// stopping) ends the election too, releasing the Lease to a standby.
func (t *leaderTerm) lead(ctx context.Context) {
	t.mu.Lock()
	if t.stopped {
		t.mu.Unlock()
		return
	}
	done := make(chan struct{})
	t.runDone = done
	t.mu.Unlock()
	c := t.c
	c.log.Info("leading", "identity", t.identity, "lease", c.cfg.PodNamespace+"/"+c.cfg.LeaseName)
	c.leading.Store(true)
	c.metrics.Leader(true)
	work, stop := context.WithCancelCause(ctx)
	go t.watch(work, stop)
	t.runErr = c.work(work, t.warm)
	switch cause := context.Cause(work); {
	case ctx.Err() != nil: // lost or stopping: the elector says so
	case errors.Is(cause, errRenewDeadline): // as good as lost
		c.log.Error("the Lease went unrenewed; work stopped before it can run out for a standby", "identity", t.identity, "deadline", c.cfg.LeaseRenewDeadline)
	default:
		t.byItself = true
		if t.runErr == nil {
			t.runErr = errors.New("the controller's work loop ended while leading")
		}
		c.log.Error("work loop ended while leading; releasing the Lease", "identity", t.identity, "err", t.runErr)
	}
	stop(nil)
	close(done)
	t.stopElecting()
}

// watch stops the work once no renewal got through for the renew deadline: by then the
// elector may still be trying, but the Lease runs out for the others a little later.
func (t *leaderTerm) watch(work context.Context, stop context.CancelCauseFunc) {
	deadline := t.c.cfg.LeaseRenewDeadline
	tick := time.NewTicker(max(t.c.cfg.LeaseRetryPeriod/4, 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-work.Done():
			return
		case <-tick.C:
			if t.lock.sinceRenewed() > deadline {
				stop(errRenewDeadline)
				return
			}
		}
	}
}

// waitWork is what the release waits for: the work loop's end (or ctx's, the release's own
// deadline). A term that has not started its work by then never will.
func (t *leaderTerm) waitWork(ctx context.Context) {
	t.mu.Lock()
	t.stopped = true
	done := t.runDone
	t.mu.Unlock()
	if done == nil {
		return
	}
	select {
	case <-done:
	case <-ctx.Done():
		t.c.log.Warn("releasing the Lease while the work loop is still stopping", "identity", t.identity)
	}
}

// Leading reports whether this replica holds the Lease and works.
func (c *Controller) Leading() bool { return c.leading.Load() && c.working.Load() }

// lost says that this replica no longer leads.
func (t *leaderTerm) lost() {
	t.c.leading.Store(false)
	t.c.metrics.Leader(false)
	t.c.log.Info("no longer leading", "identity", t.identity)
}

// lostLease reports whether this replica led and its term ended without its work loop ending
// by itself: the Lease went unrenewed. Call after wait.
func (t *leaderTerm) lostLease() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.runDone != nil && !t.byItself
}

// wait waits for a work loop that started, and returns its error.
func (t *leaderTerm) wait() error {
	t.mu.Lock()
	t.stopped = true
	done := t.runDone
	t.mu.Unlock()
	if done == nil {
		return nil
	}
	<-done
	return t.runErr
}
