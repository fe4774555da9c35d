package interruption

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/events"

	"lifeboat.dev/lifeboat/internal/notice"
)

// Bounds on a record read from a Node. The annotation is input (any credential that may write
// the Node can write it), so its size and every list and field are bounded before anything
// of it is acted on. They sit well above what Lifeboat writes.
const (
	maxRecordBytes  = 192 << 10 // a Node's annotations share 256 KiB
	maxNotices      = 256       // notices of one episode (Notices, Finished, Intents)
	maxReleased     = 1024      // released for good, kept across episodes
	maxPods         = 4096      // Held, Handback claims and IPs
	maxGroupOrHook  = 255       // Auto Scaling's limit on group and hook names
	maxShortField   = 256       // boot ids, holders, actions
	maxOriginLength = 2048      // "queue " and a queue URL
	maxPodName      = 253 + 1 + 253
)

// noticeIDPattern is what notice.ID produces: a taint- and label-safe value.
var noticeIDPattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// knownKinds are the notice kinds a record may hold.
var knownKinds = []notice.Kind{
	notice.SpotInterruption, notice.CapacityReservationInterruption, notice.ScheduledMaintenance,
	notice.Rebalance, notice.ASGTermination, notice.StateChange,
}

// validate checks every field of a record read from a Node. nodeInstance is the instance the
// Node's providerID names ("" when it has none): a record about another instance is a
// forgery (intake never records a notice for an instance other than its node's).
func (r Record) validate(nodeInstance string) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	ids := func(field string, list []string, limit int) {
		if len(list) > limit {
			bad("%s: %d entries, more than %d", field, len(list), limit)
			return
		}
		for i, id := range list {
			if !noticeIDPattern.MatchString(id) {
				bad("%s[%d] %q is not a notice id", field, i, clipValue(id))
			}
		}
	}
	short := func(field, v string, limit int) {
		if len(v) > limit {
			bad("%s: %d characters, more than %d", field, len(v), limit)
		}
	}
	if r.Version < 0 {
		bad("version %d", r.Version)
	}
	short("bootID", r.BootID, maxShortField)
	ids("notices", r.Notices, maxNotices)
	ids("finished", r.Finished, maxNotices)
	ids("released", r.Released, maxReleased)
	for i, o := range r.Reported {
		if o != OutcomeCordoned && o != OutcomeDrained {
			bad("reported[%d] %q is not an outcome", i, clipValue(o))
		}
	}
	if len(r.Intents) > maxNotices {
		bad("intents: %d entries, more than %d", len(r.Intents), maxNotices)
	} else {
		for i, in := range r.Intents {
			if err := in.validate(nodeInstance); err != nil {
				bad("intents[%d]: %w", i, err)
			}
		}
	}
	if h := r.Heartbeat; h != nil {
		if !noticeIDPattern.MatchString(h.Notice) {
			bad("heartbeat.notice %q is not a notice id", clipValue(h.Notice))
		}
		if h.Count < 0 {
			bad("heartbeat.count %d", h.Count)
		}
	}
	if o := r.Owner; o != nil {
		short("owner.origin", o.Origin, maxOriginLength)
		short("owner.holder", o.Holder, maxShortField)
	}
	pods := func(field string, list []string, each func(int, string)) {
		if len(list) > maxPods {
			bad("%s: %d entries, more than %d", field, len(list), maxPods)
			return
		}
		for i, v := range list {
			each(i, v)
		}
	}
	podName := func(field string) func(int, string) {
		return func(i int, v string) {
			if len(v) > maxPodName || strings.Count(v, "/") != 1 {
				bad("%s[%d] %q is not namespace/name", field, i, clipValue(v))
			}
		}
	}
	if r.Retained != nil {
		if err := r.Retained.validate(r); err != nil {
			bad("retained: %w", err)
		}
	}
	pods("held", r.Held, podName("held"))
	if hb := r.Handback; hb != nil {
		pods("handback.claims", hb.Claims, podName("handback.claims"))
		pods("handback.podIPs", hb.PodIPs, func(i int, v string) {
			if net.ParseIP(v) == nil {
				bad("handback.podIPs[%d] %q is not an IP address", i, clipValue(v))
			}
		})
	}
	return errors.Join(errs...)
}

// validate checks one recorded intent.
func (i Intent) validate(nodeInstance string) error {
	switch {
	case !noticeIDPattern.MatchString(i.ID):
		return fmt.Errorf("id %q is not a notice id", clipValue(i.ID))
	case !slices.Contains(knownKinds, notice.Kind(i.Kind)):
		return fmt.Errorf("kind %q is not a notice kind", clipValue(i.Kind))
	case i.Source != "" && i.Source != string(notice.SourceIMDS) && i.Source != string(notice.SourceQueue):
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
		case i.Kind != string(notice.ASGTermination):
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
	const max = 64
	if len(s) > max {
		return s[:max] + "…"
	}
	return s
}

// invalidRecordsKept bounds the records remembered as reported.
const invalidRecordsKept = 4096

// ReportInvalidRecord says, once per node and record content, that the node's record could
// not be read or failed validation (err, from ReadRecord): a log line, a metric and a Warning
// Event. Nothing of such a record is acted on; the next notice for the node starts a fresh one.
func (h *Handler) ReportInvalidRecord(node *corev1.Node, err error) {
	sum := sha256.Sum256([]byte(node.Annotations[AnnotationRecord]))
	key := node.Name + "/" + hex.EncodeToString(sum[:8])
	h.mu.Lock()
	_, seen := h.invalidReported.Get(key)
	if !seen {
		h.invalidReported.Add(key, struct{}{}, 24*time.Hour)
	}
	h.mu.Unlock()
	if seen {
		return
	}
	h.log.Warn("the node's interruption record is unreadable or invalid: it is not acted on, and the next notice for the node starts a fresh one",
		"node", node.Name, "annotation", AnnotationRecord, "err", err)
	h.metrics.InvalidRecord()
	h.events.InvalidRecord(events.NodeOf(node), err.Error())
}
