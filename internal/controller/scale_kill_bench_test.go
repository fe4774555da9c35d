// SPDX-License-Identifier: Apache-2.0

package controller_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"runtime"
	rtmetrics "runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/cloud/controlleronly"
	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/controller"
	"lifeboat.dev/lifeboat/internal/daemon"
	"lifeboat.dev/lifeboat/internal/kube/pacing"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/test/sandbox/fakeaws"
)

// The AZ reclaim's runs (LIFEBOAT_SCALE_KILL): without a kill, and with the leader killed
// mid-eviction while a warm standby waits.
const (
	azRunPlain  = "no-kill"
	azRunKilled = "leader-killed"
)

// azRuns are the runs LIFEBOAT_SCALE_KILL asks for: both (default), off (no kill) or only.
func azRuns(b *testing.B, kill string) []string {
	switch kill {
	case "", "both":
		return []string{azRunPlain, azRunKilled}
	case "off":
		return []string{azRunPlain}
	case "only":
		return []string{azRunKilled}
	}
	b.Fatalf("LIFEBOAT_SCALE_KILL=%q: want both, off or only", kill)
	return nil
}

// azLeaseSettings are the Lease's timings LIFEBOAT_SCALE_LEASE sets, as
// "duration/renew-deadline/retry-period" (e.g. 15s/10s/2s); none: the defaults.
func azLeaseSettings(b *testing.B) []string {
	v := os.Getenv("LIFEBOAT_SCALE_LEASE")
	if v == "" {
		return nil
	}
	parts := strings.Split(v, "/")
	if len(parts) != 3 {
		b.Fatalf("LIFEBOAT_SCALE_LEASE=%q: want duration/renew-deadline/retry-period, e.g. 15s/10s/2s", v)
	}
	return []string{"LEADER_ELECTION_LEASE_DURATION", parts[0], "LEADER_ELECTION_RENEW_DEADLINE", parts[1], "LEADER_ELECTION_RETRY_PERIOD", parts[2]}
}

// azPlainAccepted is when the run without a kill had each eviction accepted, from the sending
// and sorted, for the killed run's comparison (the runs go one after the other).
var azPlainAccepted atomic.Pointer[[]time.Duration]

// azKeepPlain keeps the run without a kill's acceptances, once every eviction was accepted.
func azKeepPlain(accepted []time.Duration) {
	sorted := slices.Sorted(slices.Values(accepted))
	azPlainAccepted.Store(&sorted)
}

// azKillSwitch cuts a replica off from the API server at once, as SIGKILL does: every request
// from then on fails without reaching the server (the Lease is not released), and the
// caller cancels the replica's work. Requests already at the server are answered there, as
// they would be for a killed process.
type azKillSwitch struct{ killed atomic.Bool }

func (k *azKillSwitch) wrap(rt http.RoundTripper) http.RoundTripper {
	return azRoundTripper(func(r *http.Request) (*http.Response, error) {
		if k.killed.Load() {
			return nil, errors.New("killed")
		}
		return rt.RoundTrip(r)
	})
}

type azRoundTripper func(*http.Request) (*http.Response, error)

func (f azRoundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// azStandby is the second replica of the killed run, and what it cost while it waited.
type azStandby struct {
	ctl     *controller.Controller
	metrics *metrics.Metrics
	budget  *pacing.Budget // its clients' request budget
	fake    *fakeaws.Server
	done    chan error
	synced  time.Duration // from its start until its caches were synced (Ready)
	syncAt  time.Time
	heap    int64 // live heap after a GC, synced, minus before it started
	// its requests by client, verb and resource: until Ready, and until the kill
	atSync, atKill map[string]float64
	budgetAtKill   map[string]float64 // its budget's changes by reason, at the kill
	waited         time.Duration      // from Ready until the kill
	logs           *azLogCounter
	takeover       *azTakeover // its first seconds as the leader
}

// azTakeover samples the new leader's first seconds: its requests answered in each, by
// client, verb and resource, and its request budget at the end of each.
type azTakeover struct {
	next  time.Time
	last  map[string]float64
	lines []string
}

// azTakeoverSeconds is how many of the new leader's first seconds azTakeover samples.
const azTakeoverSeconds = 6

// sampleTakeover samples the new leader once a second, for its first azTakeoverSeconds.
func (s *azStandby) sampleTakeover() {
	if s == nil || s.takeover == nil {
		return
	}
	t := s.takeover
	if len(t.lines) >= azTakeoverSeconds || time.Now().Before(t.next) {
		return
	}
	now := s.requests()
	if t.last != nil {
		inFlight, waiting := 0, 0
		for _, l := range pacing.Lanes {
			inFlight += s.budget.InFlight(l)
			waiting += s.budget.Waiting(l)
		}
		t.lines = append(t.lines, fmt.Sprintf("[%s; budget %.0f/%d/%d]", azFormat(azDiff(now, t.last)), s.budget.Limit(), inFlight, waiting))
	}
	t.last, t.next = now, time.Now().Add(time.Second)
}

// azStartStandby starts a second replica with the leader's settings but its own identity and
// clients, and waits until it is Ready: its node and pod caches synced. It measures the live
// heap it added (after a GC on either side) and snapshots its requests so far.
func azStartStandby(ctx context.Context, b *testing.B, sc azScale, base *rest.Config, cfg *config.Config, queueURL string, fake *fakeaws.Server) *azStandby {
	b.Helper()
	awsURL := fake.URL()
	standbyCfg := benchConfig(b, queueURL, awsURL, "POD_NAME", "lifeboat-standby",
		"LEADER_ELECTION_LEASE_DURATION", cfg.LeaseDuration.String(), "LEADER_ELECTION_RENEW_DEADLINE", cfg.LeaseRenewDeadline.String(),
		"LEADER_ELECTION_RETRY_PERIOD", cfg.LeaseRetryPeriod.String())
	s := &azStandby{metrics: metrics.New(), fake: fake, done: make(chan error, 1), logs: &azLogCounter{counts: map[string]int{}, samples: map[string]string{}}}
	clients, err := daemon.KubeClientsPaced(base, sc.pacing(standbyCfg, s.metrics), s.metrics)
	if err != nil {
		b.Fatal(err)
	}
	awsCfg := benchAWSConfig(awsURL)
	before := azLiveHeap()
	start := time.Now()
	s.budget = clients.Budget
	s.ctl = controller.New(controller.Options{Config: standbyCfg, Client: clients.Main, LeaseClient: clients.Lease, Queue: awssqs.NewFromConfig(awsCfg),
		EC2: controlleronly.NewAWSEC2(awsCfg), AutoScaling: cloud.NewAWSAutoScaling(awsCfg), Logger: slog.New(s.logs), Metrics: s.metrics,
		Handler: azHandler(b, clients, standbyCfg, s.metrics)}) // as the binary builds it, as the leader's
	go func() { s.done <- s.ctl.RunWithLeaderElection(ctx) }()
	_ = wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(context.Context) (bool, error) { return s.ctl.Healthy() == nil, nil })
	s.syncAt = time.Now()
	s.synced = s.syncAt.Sub(start)
	s.heap = int64(azLiveHeap()) - int64(before)
	s.atSync = s.requests()
	return s
}

// killed notes the standby's requests at the leader's kill.
func (s *azStandby) killed() {
	s.atKill, s.waited = s.requests(), time.Since(s.syncAt)
	s.budgetAtKill = azSnapshot(s.metrics, s.fake).budgetChanges
}

// requests are the standby's Kubernetes requests so far, by client, verb and resource.
func (s *azStandby) requests() map[string]float64 {
	out := map[string]float64{}
	for k, v := range azSnapshot(s.metrics, s.fake).kube {
		out[k.client+" "+k.verb+" "+k.resource] += v
	}
	return out
}

// azLiveHeap is the live heap after a full GC.
func azLiveHeap() uint64 {
	runtime.GC()
	live := []rtmetrics.Sample{{Name: "/gc/heap/live:bytes"}}
	rtmetrics.Read(live)
	if live[0].Value.Kind() != rtmetrics.KindUint64 {
		return 0
	}
	return live[0].Value.Uint64()
}

// azStall is the longest pause from the kill on before the next accepted eviction (the kill
// itself counts as the first moment), and when the first eviction after the kill came.
func azStall(accepted []time.Duration, kill time.Duration) (stall, first time.Duration) {
	after := slices.Sorted(slices.Values(accepted))
	prev := kill
	for _, a := range after {
		if a < kill {
			continue
		}
		if first == 0 {
			first = a - kill
		}
		stall = max(stall, a-prev)
		prev = a
	}
	return stall, first
}

// azStallGoal is the longest a dead leader may hold the evictions up.
const azStallGoal = 5 * time.Second

// azKilledReport says what the killed run measured: the kill, the take-over, the stall and
// the last eviction beside the run without a kill, and what the standby cost.
func azKilledReport(b *testing.B, say func(string, ...any), s *azStandby, cfg *config.Config, p azTimes, killAfter, ledAfter time.Duration, acceptedAtKill int, leaderLeaseWrites, minutes float64) {
	stall, first := azStall(p.acceptedAfter, killAfter)
	say("leader killed (its API connection cut, its work cancelled, the Lease not released) %s after the sending, %d evictions accepted by then; "+
		"Lease %s, renew deadline %s, retry period %s", killAfter.Round(10*time.Millisecond), acceptedAtKill, cfg.LeaseDuration, cfg.LeaseRenewDeadline, cfg.LeaseRetryPeriod)
	led := "never"
	if ledAfter > 0 {
		led = ledAfter.Round(10*time.Millisecond).String() + " after the kill"
	}
	say("  the standby led %s; first eviction after the kill %s after it; stall (longest pause from the kill on before the next accepted eviction) %s; the goal, %s: %v (lease + 2 s = %s: %v)",
		led, first.Round(10*time.Millisecond), stall.Round(10*time.Millisecond), azStallGoal, stall <= azStallGoal, cfg.LeaseDuration+2*time.Second, stall <= cfg.LeaseDuration+2*time.Second)
	if plain := azPlainAccepted.Load(); plain != nil && len(*plain) > 0 {
		last := (*plain)[len(*plain)-1]
		say("  last eviction accepted %s after the sending; without a kill %s; the goal, at most that plus the stall (%s): %v",
			p.accepted.Round(10*time.Millisecond), last.Round(10*time.Millisecond), (last + stall).Round(10*time.Millisecond), p.accepted <= last+stall)
		azFromTheKill(b, say, *plain, p, killAfter, ledAfter, acceptedAtKill, stall)
	} else {
		say("  last eviction accepted %s after the sending (no run without a kill to compare with)", p.accepted.Round(10*time.Millisecond))
	}
	waited := azDiff(s.atKill, s.atSync)
	say("standby: Ready (node and pod caches synced) %s after its start; live heap +%.1f MiB after a GC (those caches); its requests until Ready: %s; "+
		"while it waited, %s: %s (%.0f Lease reads a minute, no write)", s.synced.Round(10*time.Millisecond), float64(s.heap)/(1<<20), azFormat(s.atSync),
		s.waited.Round(100*time.Millisecond), azFormat(waited), waited["lease get leases"]/s.waited.Minutes())
	say("standby, after the kill: requests %s; warnings and errors: %s", azFormat(azDiff(s.requests(), s.atKill)), s.logs)
	if s.takeover != nil {
		say("  its first seconds as the leader (requests answered in each; budget bound/in flight/waiting at its end): %s", strings.Join(s.takeover.lines, " "))
	}
	changes := azDiff(azSnapshot(s.metrics, s.fake).budgetChanges, s.budgetAtKill)
	say("  its request budget: %.0f raised on demand, %.0f halved on a 429 or 503, %.0f lowered on a queue at the server; bound at the end %.0f",
		changes[pacing.ReasonDemand], changes[pacing.ReasonThrottled], changes[pacing.ReasonQueueing], s.budget.Limit())
	b.ReportMetric(stall.Seconds(), "stall-s")
	b.ReportMetric(ledAfter.Seconds(), "takeover-s")
	b.ReportMetric(float64(s.heap)/(1<<20), "standby-heap-MiB")
	say("the leader's Lease writes: %.1f a minute during the burst", leaderLeaseWrites/minutes)
}

// azFromTheKill compares the two runs from the kill on: the killed run's time from the kill
// to its last eviction against the run without a kill's from the moment it had as many
// evictions accepted to its last. Both worlds run the same code until the kill, yet one
// sandbox may be seconds slower than the other before it (a slower start of the API server, a
// slower cordon phase); from the kill on, the difference is what the kill cost.
func azFromTheKill(b *testing.B, say func(string, ...any), plain []time.Duration, p azTimes, killAfter, ledAfter time.Duration, acceptedAtKill int, stall time.Duration) {
	if acceptedAtKill < 1 || acceptedAtKill > len(plain) {
		return
	}
	plainFrom := plain[acceptedAtKill-1] // when the run without a kill had as many accepted
	plainRest, killedRest := plain[len(plain)-1]-plainFrom, p.accepted-killAfter
	cost := killedRest - plainRest
	say("  from the kill on: the killed run's last eviction %s after the kill; the run without a kill's %s after it had as many (%d) accepted, at %s; "+
		"the kill cost %s, the goal, at most the stall (%s): %v", killedRest.Round(10*time.Millisecond), plainRest.Round(10*time.Millisecond), acceptedAtKill,
		plainFrom.Round(10*time.Millisecond), cost.Round(10*time.Millisecond), stall.Round(10*time.Millisecond), cost <= stall)
	// The new leader's first seconds beside the run without a kill's from the same point.
	say("  evictions accepted per second, the new leader's first %d s: %s; the run without a kill's from the same point: %s", azRampSeconds,
		azPerSecond(p.acceptedAfter, killAfter+ledAfter), azPerSecond(plain, plainFrom))
	b.ReportMetric(cost.Seconds(), "kill-cost-s")
}

// azRampSeconds is how many seconds of acceptances azPerSecond lists.
const azRampSeconds = 12

// azPerSecond counts the acceptances in each of azRampSeconds seconds from from on.
func azPerSecond(after []time.Duration, from time.Duration) string {
	counts := make([]string, azRampSeconds)
	for i := range counts {
		n := 0
		for _, a := range after {
			if a >= from+time.Duration(i)*time.Second && a < from+time.Duration(i+1)*time.Second {
				n++
			}
		}
		counts[i] = strconv.Itoa(n)
	}
	return strings.Join(counts, " ")
}
