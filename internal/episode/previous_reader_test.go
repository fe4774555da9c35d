// SPDX-License-Identifier: Apache-2.0

package episode

// The previous release's reader of the Node record, frozen: how release 0.1.0 (record
// version 6) reads a record, and what it then does with the node. It is kept here, apart from
// the code it came from, so that the rollback tests ask the previous release itself whether it
// carries on the records this release writes, whatever this release's own reader becomes.
// When a release is cut, this file is replaced by that release's reader (record.Read and
// what it validates, record.Version and ReadableFrom, the notice kinds and sources it
// knows), and prevRelease names it.

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/record"
)

// prevRelease is the release whose reader this is.
const prevRelease = "0.1.0"

// prevVersion is the record version prevRelease writes and reads.
const prevVersion = 6

// prevKinds and prevSources are the notice kinds and sources prevRelease knows. A kind it
// does not know it keeps in the record and leaves to a newer release; a source it does not know
// makes the record invalid.
var (
	prevKinds = []string{"spot-interruption", "capacity-reservation-interruption", "capacity-block-expiration", "scheduled-maintenance",
		"instance-impaired", "node-repair", "rebalance-recommendation", "asg-termination", "state-change", "asg-launch"}
	prevSources = []string{"imds", "queue", "ec2-status", "node-condition"}
)

// prevRecord is prevRelease's record, every field it reads.
type prevRecord struct {
	Version     int            `json:"version,omitempty"`
	BootID      string         `json:"bootID,omitempty"`
	Notices     []string       `json:"notices"`
	Phase       string         `json:"phase"`
	Deadline    time.Time      `json:"deadline,omitzero"`
	Released    []string       `json:"released,omitempty"`
	RebootAfter time.Time      `json:"rebootAfter,omitzero"`
	Heartbeat   *prevHeartbeat `json:"heartbeat,omitempty"`
	Finished    []string       `json:"finished,omitempty"`
	Reported    []string       `json:"reported,omitempty"`
	Notified    bool           `json:"notified,omitempty"`
	Intents     []prevIntent   `json:"intents,omitempty"`
	Owner       *prevOwner     `json:"owner,omitempty"`
	Held        []string       `json:"held,omitempty"`
	Handback    *struct {
		Claims []string `json:"claims,omitempty"`
		PodIPs []string `json:"podIPs,omitempty"`
	} `json:"handback,omitempty"`
	Retained *prevRetention `json:"retained,omitempty"`
}

type prevOwner struct {
	Origin    string    `json:"origin"`
	Holder    string    `json:"holder,omitempty"`
	Renewed   time.Time `json:"renewed"`
	Contested time.Time `json:"contested,omitzero"`
}

type prevHeartbeat struct {
	Notice string    `json:"notice"`
	Count  int       `json:"count"`
	Last   time.Time `json:"last"`
}

type prevIntent struct {
	ID          string    `json:"id"`
	Kind        string    `json:"kind"`
	Source      string    `json:"source"`
	InstanceID  string    `json:"instanceID"`
	Action      string    `json:"action,omitempty"`
	Deadline    time.Time `json:"deadline,omitzero"`
	Start       time.Time `json:"start,omitzero"`
	End         time.Time `json:"end,omitzero"`
	Description string    `json:"description,omitempty"`
	CordonOnly  string    `json:"cordonOnly,omitempty"`
	Announced   time.Time `json:"announced,omitzero"`
	Origin      string    `json:"origin,omitempty"`
	Lifecycle   *struct {
		Group string `json:"group"`
		Hook  string `json:"hook"`
		Token string `json:"token,omitempty"`
	} `json:"lifecycle,omitempty"`
}

type prevRetention struct {
	Group      string    `json:"group"`
	Notices    []string  `json:"notices"`
	Since      time.Time `json:"since"`
	Until      time.Time `json:"until"`
	Terminated time.Time `json:"terminated,omitzero"`
	Stopped    time.Time `json:"stopped,omitzero"`
	Why        string    `json:"why,omitempty"`
}

var (
	prevNoticeID    = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
	prevKindPattern = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)
	prevInstanceID  = regexp.MustCompile(`^i-[0-9a-f]{1,17}$`)
	prevPhases      = []string{"", "cordoned", "draining", "drained"}
)

// prevRead is prevRelease's record.Read: a record of a newer version comes back with its
// version alone (left whole to a newer release: the node is held); one that fails validation
// comes back with an error (never acted on: the node is held until the next notice).
func prevRead(n *corev1.Node) (prevRecord, error) {
	raw, ok := n.Annotations[record.Annotation]
	if !ok {
		return prevRecord{}, nil
	}
	if len(raw) > 192<<10 {
		return prevRecord{}, fmt.Errorf("%d bytes", len(raw))
	}
	var v struct {
		Version int `json:"version"`
	}
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		return prevRecord{}, err
	}
	if v.Version > prevVersion {
		return prevRecord{Version: v.Version}, nil
	}
	var r prevRecord
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		return prevRecord{}, err
	}
	if !slices.Contains(prevPhases, r.Phase) {
		return prevRecord{}, fmt.Errorf("unknown phase %q", r.Phase)
	}
	return r, r.validate(prevNodeInstance(n.Spec.ProviderID))
}

// prevNodeInstance is prevRelease's ownership.InstanceIDFromProviderID.
func prevNodeInstance(providerID string) string {
	rest, ok := strings.CutPrefix(providerID, "aws://")
	if !ok {
		return ""
	}
	id := rest[strings.LastIndexByte(rest, '/')+1:]
	if !strings.HasPrefix(id, "i-") || len(id) == len("i-") {
		return ""
	}
	return id
}

// validate is prevRelease's validation of a record read from a Node.
func (r prevRecord) validate(nodeInstance string) error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	ids := func(field string, list []string, limit int) {
		check(len(list) <= limit, "%s: %d entries", field, len(list))
		for i, id := range list {
			check(prevNoticeID.MatchString(id), "%s[%d] %q", field, i, id)
		}
	}
	pods := func(field string, list []string) {
		check(len(list) <= 4096, "%s: %d entries", field, len(list))
		for i, v := range list {
			check(len(v) <= 253+1+253 && strings.Count(v, "/") == 1, "%s[%d] %q", field, i, v)
		}
	}
	check(r.Version >= 0, "version %d", r.Version)
	check(len(r.BootID) <= 256, "bootID")
	ids("notices", r.Notices, 256)
	ids("finished", r.Finished, 256)
	ids("released", r.Released, 1024)
	for i, o := range r.Reported {
		check(o == "cordoned" || o == "drained", "reported[%d] %q", i, o)
	}
	check(len(r.Intents) <= 256, "intents: %d entries", len(r.Intents))
	for i, in := range r.Intents {
		if err := in.validate(nodeInstance); err != nil {
			errs = append(errs, fmt.Errorf("intents[%d]: %w", i, err))
		}
	}
	if h := r.Heartbeat; h != nil {
		check(prevNoticeID.MatchString(h.Notice) && h.Count >= 0, "heartbeat")
	}
	if o := r.Owner; o != nil {
		check(len(o.Origin) <= 2048 && len(o.Holder) <= 256, "owner")
	}
	if t := r.Retained; t != nil {
		check(t.Group != "" && len(t.Group) <= 255 && len(t.Notices) > 0 && len(t.Notices) <= 256 && len(t.Why) <= 512, "retained")
		for i, id := range t.Notices {
			in, ok := r.intent(id)
			check(ok && in.Lifecycle != nil && in.Lifecycle.Group == t.Group, "retained.notices[%d] %q", i, id)
		}
	}
	pods("held", r.Held)
	if hb := r.Handback; hb != nil {
		pods("handback.claims", hb.Claims)
		check(len(hb.PodIPs) <= 4096, "handback.podIPs")
		for i, v := range hb.PodIPs {
			check(net.ParseIP(v) != nil, "handback.podIPs[%d] %q", i, v)
		}
	}
	return errors.Join(errs...)
}

func (i prevIntent) validate(nodeInstance string) error {
	known := slices.Contains(prevKinds, i.Kind)
	switch {
	case !prevNoticeID.MatchString(i.ID):
		return fmt.Errorf("id %q", i.ID)
	case !prevKindPattern.MatchString(i.Kind) || i.Kind == "asg-launch":
		return fmt.Errorf("kind %q", i.Kind)
	case i.Source != "" && !slices.Contains(prevSources, i.Source):
		return fmt.Errorf("source %q", i.Source)
	case !prevInstanceID.MatchString(i.InstanceID):
		return fmt.Errorf("instanceID %q", i.InstanceID)
	case nodeInstance != "" && i.InstanceID != nodeInstance:
		return fmt.Errorf("instanceID %s is not the node's %s", i.InstanceID, nodeInstance)
	case len(i.Action) > 256 || len(i.Description) > 512+len("…") || len(i.CordonOnly) > 512 || len(i.Origin) > 2048:
		return errors.New("a field over its bound")
	}
	if lc := i.Lifecycle; lc != nil {
		switch {
		case known && i.Kind != "asg-termination":
			return fmt.Errorf("a %s notice has no lifecycle action", i.Kind)
		case lc.Group == "" || len(lc.Group) > 255 || lc.Hook == "" || len(lc.Hook) > 255 || len(lc.Token) > 255:
			return errors.New("lifecycle")
		}
	}
	return nil
}

func (r prevRecord) intent(id string) (prevIntent, bool) {
	for _, i := range r.Intents {
		if i.ID == id {
			return i, true
		}
	}
	return prevIntent{}, false
}

// prevVerdict is what prevRelease does with a node whose record it read: it holds the node (a
// record of a newer version left to a newer release, or one it cannot act on), or carries the
// episode on, draining and finishing the notices it knows that are open (the others it leaves
// to a newer release, holding the node for them).
func prevVerdict(r prevRecord, err error) (carriesOn bool, open, leftToNewer []string) {
	if err != nil || r.Version > prevVersion {
		return false, nil, nil
	}
	if r.Phase == "" {
		return true, nil, nil
	}
	for _, in := range r.Intents {
		if !slices.Contains(r.Notices, in.ID) || slices.Contains(r.Released, in.ID) || slices.Contains(r.Finished, in.ID) {
			continue
		}
		if slices.Contains(prevKinds, in.Kind) {
			open = append(open, in.ID)
		} else {
			leftToNewer = append(leftToNewer, in.ID)
		}
	}
	return true, open, leftToNewer
}
