// SPDX-License-Identifier: Apache-2.0

// Package ec2status is the controller's third source of notices: a DescribeInstanceStatus pass
// over this cluster's instances every interval. An instance whose status checks have failed
// for longer than a threshold becomes an instance-impaired notice; the scheduled events EC2
// lists for an instance become scheduled-maintenance notices named as instance metadata names
// them (the event id), so the agent on the node and the controller take one event as one
// notice. An event that leaves the list, or that EC2 marks completed or canceled, releases its
// notice. Nothing here writes anything: the controller takes the notices as it takes a queue
// message's.
package ec2status

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/panics"
)

// API is what the poller asks EC2; cloud.EC2 implements it.
type API interface {
	// DescribeInstanceStatus answers one request for at most cloud.MaxStatusInstances
	// running instances; an instance EC2 does not know fails it with
	// *cloud.UnknownInstancesError.
	DescribeInstanceStatus(ctx context.Context, ids []string) ([]cloud.InstanceStatus, error)
}

// Options configure a Poller. API, Instances, Interval and Threshold are required.
type Options struct {
	API API
	// Instances lists this cluster's instances (from its Nodes' providerIDs).
	Instances func() []string
	// Interval is the time between passes (INSTANCE_STATUS_INTERVAL).
	Interval time.Duration
	// Threshold is how long a status check must keep failing before the instance is drained
	// (INSTANCE_IMPAIRED_THRESHOLD): one that recovers sooner is left alone.
	Threshold time.Duration
	Logger    *slog.Logger
	// Pass, when set, is told of each pass: the requests it made, the instances found
	// impaired, and an error when some instances could not be asked about.
	Pass func(requests, impaired int, err error)
	// Now is the clock (tests replace it); default time.Now.
	Now func() time.Time
	// Panics, when set, counts a pass that panicked (site instance_status): that pass is
	// over, and the next runs on time.
	Panics panics.Counter
}

// Poller remembers between passes what it saw: since when each instance has been impaired,
// which notices were taken, and which events were listed. It forgets it all on a restart or a
// change of leader; the records on the Nodes keep what was taken.
type Poller struct {
	opts Options
	// impairedSince is when each instance was first seen failing (or the earlier time EC2
	// states), while it keeps failing.
	impairedSince map[string]time.Time
	// taken holds the notices taken, with the deadline they were taken with (an event EC2
	// reschedules is offered again).
	taken map[string]time.Time
	// listed holds the events seen listed and taken, by notice id, to release those that
	// leave the list.
	listed map[string]notice.Notice
	// released holds the events whose release was taken, so it is not offered again while
	// EC2 still lists them as completed or canceled.
	released map[string]bool
}

// New builds a Poller.
func New(o Options) (*Poller, error) {
	switch {
	case o.API == nil || o.Instances == nil:
		return nil, errors.New("ec2status: an EC2 client and the cluster's instances are needed")
	case o.Interval <= 0:
		return nil, fmt.Errorf("ec2status: interval %s is not positive", o.Interval)
	case o.Threshold < 0:
		return nil, fmt.Errorf("ec2status: threshold %s is negative", o.Threshold)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Poller{opts: o, impairedSince: map[string]time.Time{}, taken: map[string]time.Time{},
		listed: map[string]notice.Notice{}, released: map[string]bool{}}, nil
}

// Take hands a pass's notices to the controller and says, for each, whether it was taken
// (recorded on its node, or found not to be this cluster's). A notice not taken is offered
// again on the next pass.
type Take func(ctx context.Context, notices []notice.Notice) (taken []bool)

// Run makes a pass at once and then every Interval until ctx ends.
func (p *Poller) Run(ctx context.Context, take Take) {
	for {
		p.passSafely(ctx, take)
		select {
		case <-ctx.Done():
			return
		case <-time.After(p.opts.Interval):
		}
	}
}

// passSafely makes one pass and offers its notices; a panic ends that pass only (what the
// poller remembers stays as the pass left it, and the next pass asks again).
func (p *Poller) passSafely(ctx context.Context, take Take) {
	defer panics.Recover(panics.InstanceStatus, p.opts.Logger, p.opts.Panics, nil)
	notices, err := p.Pass(ctx)
	if err != nil && ctx.Err() == nil {
		p.opts.Logger.Warn("DescribeInstanceStatus pass incomplete; the instances not answered are asked about again next pass", "err", err)
	}
	if len(notices) > 0 {
		p.Taken(notices, take(ctx, notices))
	}
}

// Taken tells the poller which notices of a pass were taken.
func (p *Poller) Taken(notices []notice.Notice, taken []bool) {
	for i, n := range notices {
		if i >= len(taken) || !taken[i] {
			continue
		}
		switch {
		case n.Released:
			p.released[n.ID] = true
			delete(p.listed, n.ID)
			delete(p.taken, n.ID)
		default:
			p.taken[n.ID] = n.Deadline
			if n.Kind.Scheduled() {
				p.listed[n.ID] = n
			}
		}
	}
}

// Pass asks EC2 about every instance of the cluster and returns the notices to offer: those
// not taken yet, and the releases of events that are over. An error says some batches were
// not answered; the notices of the others are returned all the same.
func (p *Poller) Pass(ctx context.Context) ([]notice.Notice, error) {
	ids := slices.Compact(slices.Sorted(slices.Values(p.opts.Instances())))
	if len(ids) > 0 && ids[0] == "" {
		ids = ids[1:]
	}
	statuses, answered, requests, err := p.describe(ctx, ids)
	now := p.opts.Now()
	var out []notice.Notice
	impaired := 0
	running := map[string]bool{}
	current := map[string]bool{} // events listed now, by notice id
	for _, s := range statuses {
		running[s.InstanceID] = true
		if s.Impaired() {
			impaired++
			if n, ok := p.impaired(s, now); ok {
				out = append(out, n)
			}
		} else {
			delete(p.impairedSince, s.InstanceID)
			delete(p.taken, impairedID(s.InstanceID))
		}
		out = append(out, p.eventNotices(s, current)...)
	}
	// An event no longer listed for a running instance that was answered is over.
	for id, n := range p.listed {
		if answered[n.InstanceID] && running[n.InstanceID] && !current[id] {
			gone := n
			gone.Released = true
			gone.Description = fmt.Sprintf("Scheduled %s (%s) is no longer listed by EC2: completed or canceled", n.Action, eventOf(n))
			out = append(out, gone)
		}
	}
	p.forget(ids, answered, running, current)
	if p.opts.Pass != nil {
		p.opts.Pass(requests, impaired, err)
	}
	return out, err
}

// eventNotices are the notices of an instance's listed scheduled events not offered yet (or
// whose deadline moved), and the releases of those marked over; current gains their ids.
func (p *Poller) eventNotices(s cloud.InstanceStatus, current map[string]bool) []notice.Notice {
	var out []notice.Notice
	for _, e := range s.Events {
		n, ok := scheduled(s.InstanceID, e)
		if !ok {
			p.opts.Logger.Warn("scheduled event without an id skipped", "instance", s.InstanceID, "code", e.Code)
			continue
		}
		current[n.ID] = true
		if n.Released {
			if !p.released[n.ID] {
				out = append(out, n)
			}
			continue
		}
		if d, ok := p.taken[n.ID]; !ok || !d.Equal(n.Deadline) {
			out = append(out, n)
		}
	}
	return out
}

// forget drops what is remembered of instances answered and no longer running, or no longer
// the cluster's, and of releases whose events are no longer listed.
func (p *Poller) forget(ids []string, answered, running, current map[string]bool) {
	for id := range p.impairedSince {
		if answered[id] && !running[id] || !slices.Contains(ids, id) {
			delete(p.impairedSince, id)
		}
	}
	for id := range p.released {
		if !current[id] {
			delete(p.released, id)
		}
	}
}

// describe asks about ids in batches. A batch refused for naming instances EC2 no longer
// knows is asked again without them, once. answered holds the ids whose batch was answered.
func (p *Poller) describe(ctx context.Context, ids []string) (statuses []cloud.InstanceStatus, answered map[string]bool, requests int, err error) {
	answered = map[string]bool{}
	var errs []error
	for start := 0; start < len(ids); start += cloud.MaxStatusInstances {
		batch := ids[start:min(start+cloud.MaxStatusInstances, len(ids))]
		got, e := p.opts.API.DescribeInstanceStatus(ctx, batch)
		requests++
		var unknown *cloud.UnknownInstancesError
		if errors.As(e, &unknown) {
			for _, id := range unknown.IDs {
				answered[id] = true // gone: nothing to remember of it
			}
			batch = slices.DeleteFunc(slices.Clone(batch), func(id string) bool { return slices.Contains(unknown.IDs, id) })
			got, e = nil, nil
			if len(batch) > 0 {
				got, e = p.opts.API.DescribeInstanceStatus(ctx, batch)
				requests++
			}
		}
		if e != nil {
			errs = append(errs, e)
			continue
		}
		for _, id := range batch {
			answered[id] = true
		}
		statuses = append(statuses, got...)
	}
	return statuses, answered, requests, errors.Join(errs...)
}

// impaired is the notice of a failing instance once it has failed for Threshold, unless it
// was taken already.
func (p *Poller) impaired(s cloud.InstanceStatus, now time.Time) (notice.Notice, bool) {
	since, seen := p.impairedSince[s.InstanceID]
	if !seen {
		since = now
	}
	if !s.ImpairedSince.IsZero() && s.ImpairedSince.Before(since) {
		since = s.ImpairedSince
	}
	p.impairedSince[s.InstanceID] = since
	id := impairedID(s.InstanceID)
	if now.Sub(since) < p.opts.Threshold {
		return notice.Notice{}, false
	}
	if _, taken := p.taken[id]; taken {
		return notice.Notice{}, false
	}
	var failing []string
	for _, c := range []struct{ name, status string }{{"instance", s.Instance}, {"system", s.System}, {"attached EBS", s.EBS}} {
		if c.status == "impaired" {
			failing = append(failing, c.name+" status impaired")
		}
	}
	for _, f := range s.Failed {
		failing = append(failing, f+" failed")
	}
	return notice.Notice{
		ID: id, Kind: notice.InstanceImpaired, Source: notice.SourceEC2Status, InstanceID: s.InstanceID,
		StartTime: since, Action: "impaired",
		Description: fmt.Sprintf("EC2 status checks failing since %s: %s", since.UTC().Format(time.RFC3339), strings.Join(failing, ", ")),
	}, true
}

// impairedID names an instance's impaired notice: the instance alone, as an instance is
// impaired once per episode (a new boot opens a new one).
func impairedID(instanceID string) string { return notice.ID(notice.InstanceImpaired, instanceID, "") }

// scheduled is the notice of one listed event, named as instance metadata names it. EC2
// prefixes the description of an event that is over with [Completed] or [Canceled].
func scheduled(instanceID string, e cloud.ScheduledEvent) (notice.Notice, bool) {
	if e.ID == "" {
		return notice.Notice{}, false
	}
	n := notice.Notice{
		ID: notice.ID(notice.ScheduledMaintenance, instanceID, e.ID), Kind: notice.ScheduledMaintenance, Source: notice.SourceEC2Status,
		InstanceID: instanceID, Action: e.Code, EndTime: e.NotAfter,
		Released: strings.HasPrefix(e.Description, "[Completed]") || strings.HasPrefix(e.Description, "[Canceled]"),
	}
	switch {
	case n.Released:
	case e.NotBefore.IsZero():
		n.CordonOnly = fmt.Sprintf("scheduled event %s states no start (NotBefore)", e.ID)
	default:
		n.Deadline, n.StartTime = e.NotBefore, e.NotBefore
	}
	n.Description = fmt.Sprintf("Scheduled %s (%s): %s", e.Code, e.ID, e.Description)
	return n, true
}

// eventOf is the event id in a scheduled notice's id.
func eventOf(n notice.Notice) string {
	return strings.TrimPrefix(n.ID, notice.ID(notice.ScheduledMaintenance, n.InstanceID, "")+"-")
}
