// SPDX-License-Identifier: Apache-2.0

package ec2status

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/panics/panicstest"
)

// fakeEC2 answers DescribeInstanceStatus from statuses, as EC2 does: instances not running
// are left out, an unknown one fails the request.
type fakeEC2 struct {
	mu       sync.Mutex
	statuses map[string]cloud.InstanceStatus // running instances
	gone     map[string]bool                 // unknown to EC2
	fail     error
	requests [][]string
}

func (f *fakeEC2) DescribeInstanceStatus(_ context.Context, ids []string) ([]cloud.InstanceStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, slices.Clone(ids))
	if len(ids) > cloud.MaxStatusInstances {
		return nil, fmt.Errorf("%d ids", len(ids))
	}
	if f.fail != nil {
		return nil, f.fail
	}
	var unknown []string
	for _, id := range ids {
		if f.gone[id] {
			unknown = append(unknown, id)
		}
	}
	if len(unknown) > 0 {
		return nil, &cloud.UnknownInstancesError{IDs: unknown, Err: errors.New("InvalidInstanceID.NotFound")}
	}
	var out []cloud.InstanceStatus
	for _, id := range ids {
		if s, ok := f.statuses[id]; ok {
			s.InstanceID = id
			out = append(out, s)
		}
	}
	return out, nil
}

type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

func newPoller(t *testing.T, api API, instances []string, c *clock) *Poller {
	t.Helper()
	p, err := New(Options{API: api, Instances: func() []string { return instances }, Interval: 30 * time.Second, Threshold: 2 * time.Minute, Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func ids(ns []notice.Notice) []string {
	var out []string
	for _, n := range ns {
		id := n.ID
		if n.Released {
			id += " released"
		}
		out = append(out, id)
	}
	return out
}

// pass makes a pass and takes every notice it offers.
func pass(t *testing.T, p *Poller) []string {
	t.Helper()
	ns, err := p.Pass(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	taken := make([]bool, len(ns))
	for i := range taken {
		taken[i] = true
	}
	p.Taken(ns, taken)
	return ids(ns)
}

const a, b = "i-0123456789abcdef0", "i-0fedcba9876543210"

var (
	impairedA = notice.ID(notice.InstanceImpaired, a, "")
	start     = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
)

func TestImpairedPastThreshold(t *testing.T) {
	c := &clock{start}
	api := &fakeEC2{statuses: map[string]cloud.InstanceStatus{a: {System: "impaired"}, b: {Instance: "ok"}}}
	p := newPoller(t, api, []string{a, b}, c)
	if got := pass(t, p); got != nil {
		t.Fatalf("first sight of a failing check: %v, want nothing before the threshold", got)
	}
	c.now = start.Add(90 * time.Second)
	if got := pass(t, p); got != nil {
		t.Fatalf("after 90 s: %v", got)
	}
	c.now = start.Add(2 * time.Minute)
	ns, err := p.Pass(context.Background())
	if err != nil || len(ns) != 1 || ns[0].ID != impairedA || ns[0].Kind != notice.InstanceImpaired || ns[0].Source != notice.SourceEC2Status ||
		!ns[0].Deadline.IsZero() || !ns[0].StartTime.Equal(start) {
		t.Fatalf("after 2 min: %+v %v", ns, err)
	}
	// Not taken (the node write failed): offered again; taken: never again while it fails.
	p.Taken(ns, []bool{false})
	c.now = start.Add(150 * time.Second)
	if got := pass(t, p); !slices.Equal(got, []string{impairedA}) {
		t.Fatalf("not taken: %v, want it again", got)
	}
	c.now = start.Add(3 * time.Minute)
	if got := pass(t, p); got != nil {
		t.Fatalf("taken: %v, want nothing more", got)
	}
}

func TestImpairedRecoversInTime(t *testing.T) {
	c := &clock{start}
	api := &fakeEC2{statuses: map[string]cloud.InstanceStatus{a: {Failed: []string{"ebs reachability"}, EBS: "impaired"}}}
	p := newPoller(t, api, []string{a}, c)
	pass(t, p)
	c.now = start.Add(time.Minute)
	api.statuses[a] = cloud.InstanceStatus{Instance: "ok", System: "ok", EBS: "ok"}
	if got := pass(t, p); got != nil {
		t.Fatalf("recovered: %v", got)
	}
	// Failing again later: the threshold counts from then.
	c.now = start.Add(5 * time.Minute)
	api.statuses[a] = cloud.InstanceStatus{Instance: "impaired"}
	if got := pass(t, p); got != nil {
		t.Fatalf("failing again: %v, want the threshold to count anew", got)
	}
	c.now = start.Add(7 * time.Minute)
	if got := pass(t, p); !slices.Equal(got, []string{impairedA}) {
		t.Fatalf("failing again for 2 min: %v", got)
	}
}

// The time EC2 states a check began failing counts, so a new leader does not wait the
// threshold again.
func TestImpairedSinceFromEC2(t *testing.T) {
	c := &clock{start}
	api := &fakeEC2{statuses: map[string]cloud.InstanceStatus{a: {System: "impaired", ImpairedSince: start.Add(-5 * time.Minute)}}}
	p := newPoller(t, api, []string{a}, c)
	if got := pass(t, p); !slices.Equal(got, []string{impairedA}) {
		t.Fatalf("failing for 5 min by EC2's account: %v", got)
	}
}

func TestBatchesAndUnknownInstances(t *testing.T) {
	c := &clock{start}
	api := &fakeEC2{statuses: map[string]cloud.InstanceStatus{}, gone: map[string]bool{}}
	var instances []string
	for i := range 250 {
		id := fmt.Sprintf("i-%017x", i)
		instances = append(instances, id, id) // duplicates are asked about once
		api.statuses[id] = cloud.InstanceStatus{Instance: "ok"}
	}
	api.gone[fmt.Sprintf("i-%017x", 120)] = true
	var requests, impaired []int
	p, err := New(Options{API: api, Instances: func() []string { return append(instances, "") }, Interval: time.Second, Threshold: time.Minute, Now: c.Now,
		Pass: func(r, i int, err error) { requests, impaired = append(requests, r), append(impaired, i) }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	// 100 + 100 + 50, the second asked again without the instance EC2 no longer knows.
	var sizes []int
	for _, r := range api.requests {
		sizes = append(sizes, len(r))
	}
	if !slices.Equal(sizes, []int{100, 100, 99, 50}) || !slices.Equal(requests, []int{4}) || !slices.Equal(impaired, []int{0}) {
		t.Errorf("request sizes %v, pass reported %v requests and %v impaired", sizes, requests, impaired)
	}
	api.fail = errors.New("throttled")
	if _, err := p.Pass(context.Background()); err == nil {
		t.Error("a pass whose requests failed reported no error")
	}
}

func TestScheduledEvents(t *testing.T) {
	c := &clock{start}
	reboot := cloud.ScheduledEvent{ID: "instance-event-0d59937288b749b32", Code: "system-reboot", Description: "scheduled reboot",
		NotBefore: start.Add(48 * time.Hour), NotAfter: start.Add(50 * time.Hour)}
	api := &fakeEC2{statuses: map[string]cloud.InstanceStatus{a: {Events: []cloud.ScheduledEvent{reboot}}, b: {}}}
	p := newPoller(t, api, []string{a, b}, c)
	// Named as instance metadata names the same event, so an agent and the controller
	// coalesce.
	sched := notice.ID(notice.ScheduledMaintenance, a, "instance-event-0d59937288b749b32")
	ns, err := p.Pass(context.Background())
	if err != nil || len(ns) != 1 || ns[0].ID != sched || ns[0].Kind != notice.ScheduledMaintenance || ns[0].Action != "system-reboot" ||
		!ns[0].Deadline.Equal(reboot.NotBefore) || !ns[0].EndTime.Equal(reboot.NotAfter) || ns[0].Released || !ns[0].Restated() {
		t.Fatalf("%+v %v", ns, err)
	}
	p.Taken(ns, []bool{true})
	if got := pass(t, p); got != nil {
		t.Fatalf("listed again: %v, want nothing new", got)
	}
	// Rescheduled: offered again with its new start.
	reboot.NotBefore = start.Add(72 * time.Hour)
	api.statuses[a] = cloud.InstanceStatus{Events: []cloud.ScheduledEvent{reboot}}
	if got := pass(t, p); !slices.Equal(got, []string{sched}) {
		t.Fatalf("rescheduled: %v", got)
	}
	// The instance stops being answered (a failed request), or stops running: the event is
	// not taken for over.
	api.fail = errors.New("throttled")
	if ns, _ := p.Pass(context.Background()); ns != nil {
		t.Fatalf("failed request: %v", ids(ns))
	}
	api.fail = nil
	delete(api.statuses, a)
	if got := pass(t, p); got != nil {
		t.Fatalf("instance not running: %v", got)
	}
	// Listed no more for a running instance: released, once.
	api.statuses[a] = cloud.InstanceStatus{}
	if got := pass(t, p); !slices.Equal(got, []string{sched + " released"}) {
		t.Fatalf("event gone: %v", got)
	}
	if got := pass(t, p); got != nil {
		t.Fatalf("after the release: %v", got)
	}
	// EC2 marks an event over in its description: released once, while it stays listed.
	done := cloud.ScheduledEvent{ID: "instance-event-1", Code: "instance-stop", Description: "[Canceled] scheduled stop", NotBefore: start}
	api.statuses[b] = cloud.InstanceStatus{Events: []cloud.ScheduledEvent{done}}
	want := notice.ID(notice.ScheduledMaintenance, b, "instance-event-1") + " released"
	if got := pass(t, p); !slices.Equal(got, []string{want}) {
		t.Fatalf("canceled: %v", got)
	}
	if got := pass(t, p); got != nil {
		t.Fatalf("canceled, listed again: %v", got)
	}
	// An event without a start cordons only, saying why.
	api.statuses[b] = cloud.InstanceStatus{Events: []cloud.ScheduledEvent{{ID: "instance-event-2", Code: "instance-retirement"}}}
	ns, _ = p.Pass(context.Background())
	if len(ns) != 1 || ns[0].CordonOnly == "" || !ns[0].Deadline.IsZero() {
		t.Fatalf("no start: %+v", ns)
	}
}

func TestNewRefusesBadOptions(t *testing.T) {
	api := &fakeEC2{}
	list := func() []string { return nil }
	for _, o := range []Options{{Instances: list, Interval: time.Second}, {API: api, Interval: time.Second}, {API: api, Instances: list},
		{API: api, Instances: list, Interval: time.Second, Threshold: -time.Second}} {
		if _, err := New(o); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}

// Run makes its first pass at once and offers what it finds.
func TestRunOffers(t *testing.T) {
	api := &fakeEC2{statuses: map[string]cloud.InstanceStatus{a: {System: "impaired", ImpairedSince: time.Now().Add(-time.Hour)}}}
	p, err := New(Options{API: api, Instances: func() []string { return []string{a} }, Interval: time.Hour, Threshold: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan []string, 1)
	go p.Run(ctx, func(_ context.Context, ns []notice.Notice) []bool {
		got <- ids(ns)
		cancel()
		return make([]bool, len(ns))
	})
	select {
	case g := <-got:
		if !slices.Equal(g, []string{impairedA}) {
			t.Errorf("offered %v", g)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("nothing offered")
	}
}

// panickyEC2 panics on its first answers, then answers as api does.
type panickyEC2 struct {
	api    API
	panics atomic.Int32 // answers left to panic on
}

func (p *panickyEC2) DescribeInstanceStatus(ctx context.Context, ids []string) ([]cloud.InstanceStatus, error) {
	if p.panics.Add(-1) >= 0 {
		var statuses map[string]*cloud.InstanceStatus
		_ = statuses[ids[0]].Impaired() // a bug met on EC2's answer
	}
	return p.api.DescribeInstanceStatus(ctx, ids)
}

// A pass that panics, in reading EC2's answer or in taking its notices, is that pass's end:
// the panic is counted under site instance_status and logged with the stack, and the next
// pass runs on time and offers what it finds.
func TestPanickingPassIsThatPasss(t *testing.T) {
	tests := []struct {
		name       string
		apiPanics  int32
		takePanics int32
	}{
		{name: "in EC2's answer", apiPanics: 2},
		{name: "in taking the notices", takePanics: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := &panickyEC2{api: &fakeEC2{statuses: map[string]cloud.InstanceStatus{a: {System: "impaired", ImpairedSince: time.Now().Add(-time.Hour)}}}}
			api.panics.Store(tt.apiPanics)
			count := &panicstest.Counter{}
			var logs bytes.Buffer
			var mu sync.Mutex
			p, err := New(Options{API: api, Instances: func() []string { return []string{a} }, Interval: 10 * time.Millisecond, Threshold: time.Minute,
				Panics: count, Logger: slog.New(slog.NewTextHandler(&lockedWriter{mu: &mu, w: &logs}, nil))})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var takePanics atomic.Int32
			takePanics.Store(tt.takePanics)
			got := make(chan []string, 1)
			go p.Run(ctx, func(_ context.Context, ns []notice.Notice) []bool {
				if takePanics.Add(-1) >= 0 {
					panic("a bug in taking " + ns[0].ID)
				}
				select {
				case got <- ids(ns):
				default:
				}
				return make([]bool, len(ns))
			})
			select {
			case g := <-got:
				if !slices.Equal(g, []string{impairedA}) {
					t.Errorf("offered %v", g)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("no pass after the panicking ones")
			}
			cancel()
			if n := count.Get("instance_status"); n != 2 {
				t.Errorf("%d panics counted under instance_status, want 2", n)
			}
			mu.Lock()
			out := logs.String()
			mu.Unlock()
			for _, want := range []string{"level=ERROR", "site=instance_status", "poller_test.go"} {
				if !strings.Contains(out, want) {
					t.Errorf("log lacks %q:\n%s", want, out)
				}
			}
		})
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
