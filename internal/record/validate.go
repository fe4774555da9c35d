// SPDX-License-Identifier: Apache-2.0

package record

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"

	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/text"
)

// Bounds on a record read from a Node. The annotation is input (any credential that may write
// the Node can write it), so its size and every list and field are bounded before anything
// of it is acted on. They sit well above what Lifeboat writes.
const (
	maxRecordBytes  = 192 << 10 // a Node's annotations share 256 KiB
	maxNotices      = 256       // notices of one episode (Notices, Finished, Intents)
	maxReleased     = 1024      // released for good, kept across episodes
	maxPods         = 4096      // Held, Detach claims and IPs
	maxGroupOrHook  = 255       // Auto Scaling's limit on group and hook names
	maxShortField   = 256       // boot ids, holders, actions
	maxOriginLength = 2048      // "queue " and a queue URL
	maxPodName      = 253 + 1 + 253
)

// validNoticeID reports whether id has the shape notice.ID produces, a taint- and label-safe
// value: 1 to 63 of [a-z0-9-], beginning and ending with a letter or digit. (Checked by hand:
// the same rule as a pattern costs the agent a compiled program of some 40 KiB at start.)
func validNoticeID(id string) bool {
	return len(id) >= 1 && len(id) <= 63 && lowerAlnumDash(id) && id[0] != '-' && id[len(id)-1] != '-'
}

// validKind reports whether k has the shape of a notice kind: 1 to 63 of [a-z0-9-], beginning
// with a letter. A kind this binary does not know is a newer release's: its notice is kept in
// the record and left to that release (nothing plans a drain, a taint or a lifecycle call for
// a kind it does not know), while the node's other notices are handled; so adding a kind
// needs no version bump.
func validKind(k string) bool {
	return len(k) >= 1 && len(k) <= 63 && lowerAlnumDash(k) && k[0] >= 'a' && k[0] <= 'z'
}

func lowerAlnumDash(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// knownSources are the notice sources a record may name.
var knownSources = []notice.Source{notice.SourceIMDS, notice.SourceQueue, notice.SourceEC2Status, notice.SourceNodeCondition}

// validate checks every field of a record read from a Node. nodeInstance is the instance the
// Node's providerID names ("" when it has none): a record about another instance is a
// forgery (intake never records a notice for an instance other than its node's).
func validate(r Record, nodeInstance string) error {
	var p problems
	if r.Version < 0 {
		p.add("version %d", r.Version)
	}
	p.short("bootID", r.BootID, maxShortField)
	p.ids("notices", r.Notices, maxNotices)
	p.ids("finished", r.Finished, maxNotices)
	p.ids("released", r.Released, maxReleased)
	for i, o := range r.Reported {
		if o != OutcomeCordoned && o != OutcomeDrained {
			p.add("reported[%d] %q is not an outcome", i, clipValue(o))
		}
	}
	if len(r.Intents) > maxNotices {
		p.add("intents: %d entries, more than %d", len(r.Intents), maxNotices)
	} else {
		for i, in := range r.Intents {
			if err := in.validate(nodeInstance); err != nil {
				p.add("intents[%d]: %w", i, err)
			}
		}
	}
	if h := r.Heartbeat; h != nil {
		if !validNoticeID(h.Notice) {
			p.add("heartbeat.notice %q is not a notice id", clipValue(h.Notice))
		}
		if h.Count < 0 {
			p.add("heartbeat.count %d", h.Count)
		}
	}
	if o := r.Owner; o != nil {
		p.short("owner.origin", o.Origin, maxOriginLength)
		p.short("owner.holder", o.Holder, maxShortField)
	}
	if r.Retained != nil {
		if err := r.Retained.validate(r); err != nil {
			p.add("retained: %w", err)
		}
	}
	p.podNames("held", r.Held)
	if hb := r.Detach; hb != nil {
		p.podNames("handback.claims", hb.Claims)
		p.each("handback.podIPs", hb.PodIPs, maxPods, func(i int, v string) {
			if net.ParseIP(v) == nil {
				p.add("handback.podIPs[%d] %q is not an IP address", i, clipValue(v))
			}
		})
	}
	return errors.Join(p...)
}

// problems collects what is wrong with a record, each naming its field.
type problems []error

func (p *problems) add(format string, args ...any) { *p = append(*p, fmt.Errorf(format, args...)) }

// each checks a list's length, then each of its entries.
func (p *problems) each(field string, list []string, limit int, check func(int, string)) {
	if len(list) > limit {
		p.add("%s: %d entries, more than %d", field, len(list), limit)
		return
	}
	for i, v := range list {
		check(i, v)
	}
}

func (p *problems) ids(field string, list []string, limit int) {
	p.each(field, list, limit, func(i int, id string) {
		if !validNoticeID(id) {
			p.add("%s[%d] %q is not a notice id", field, i, clipValue(id))
		}
	})
}

func (p *problems) podNames(field string, list []string) {
	p.each(field, list, maxPods, func(i int, v string) {
		if len(v) > maxPodName || strings.Count(v, "/") != 1 {
			p.add("%s[%d] %q is not namespace/name", field, i, clipValue(v))
		}
	})
}

func (p *problems) short(field, v string, limit int) {
	if len(v) > limit {
		p.add("%s: %d characters, more than %d", field, len(v), limit)
	}
}

// validate checks one recorded intent.
func (i Intent) validate(nodeInstance string) error {
	switch {
	case !validNoticeID(i.ID):
		return fmt.Errorf("id %q is not a notice id", clipValue(i.ID))
	case !validKind(i.Kind) || notice.Kind(i.Kind).Hook() == notice.HookLaunch:
		return fmt.Errorf("kind %q is not a notice kind", clipValue(i.Kind))
	case i.Source != "" && !slices.Contains(knownSources, notice.Source(i.Source)):
		return fmt.Errorf("source %q is not a notice source", clipValue(i.Source))
	case !notice.ValidInstanceID(i.InstanceID):
		return fmt.Errorf("instanceID %q is not an EC2 instance id", clipValue(i.InstanceID))
	case nodeInstance != "" && i.InstanceID != nodeInstance:
		return fmt.Errorf("instanceID %s is not the node's instance %s", i.InstanceID, nodeInstance)
	case len(i.Action) > maxShortField:
		return fmt.Errorf("action: %d characters, more than %d", len(i.Action), maxShortField)
	case len(i.Description) > maxDescription+len("…"):
		return fmt.Errorf("description: %d characters, more than %d", len(i.Description), maxDescription)
	case len(i.CordonOnly) > maxDescription:
		return fmt.Errorf("cordonOnly: %d characters, more than %d", len(i.CordonOnly), maxDescription)
	case len(i.Origin) > maxOriginLength:
		return fmt.Errorf("origin: %d characters, more than %d", len(i.Origin), maxOriginLength)
	}
	if lc := i.Lifecycle; lc != nil {
		switch {
		case notice.Kind(i.Kind).Known() && notice.Kind(i.Kind).Hook() != notice.HookTermination:
			return fmt.Errorf("a %s notice has no lifecycle action", i.Kind)
		case lc.Group == "" || len(lc.Group) > maxGroupOrHook:
			return fmt.Errorf("lifecycle.group: %d characters, want 1 to %d", len(lc.Group), maxGroupOrHook)
		case lc.Hook == "" || len(lc.Hook) > maxGroupOrHook:
			return fmt.Errorf("lifecycle.hook: %d characters, want 1 to %d", len(lc.Hook), maxGroupOrHook)
		case len(lc.LegacyToken) > maxGroupOrHook:
			return fmt.Errorf("lifecycle.token: %d characters, more than %d", len(lc.LegacyToken), maxGroupOrHook)
		}
	}
	return nil
}

// clipValue keeps a value read from a record short in messages.
func clipValue(s string) string {
	return text.Clip(s, 64, "…")
}
