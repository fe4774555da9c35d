// SPDX-License-Identifier: Apache-2.0

package episode

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	utilcache "k8s.io/apimachinery/pkg/util/cache"

	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/events"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/ownership"
	"lifeboat.dev/lifeboat/internal/record"
)

// invalidRecordsKept bounds the records remembered as reported.
const invalidRecordsKept = 4096

// reportedOnce remembers what was reported, so that a notice that comes back (an IMDS
// re-poll, a redelivered message) is not reported again for a day.
type reportedOnce struct {
	mu   sync.Mutex
	seen *utilcache.LRUExpireCache
}

func newReportedOnce() *reportedOnce {
	return &reportedOnce{seen: utilcache.NewLRUExpireCache(invalidRecordsKept)}
}

// first reports whether key is reported for the first time (in a day).
func (o *reportedOnce) first(key string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, seen := o.seen.Get(key); seen {
		return false
	}
	o.seen.Add(key, struct{}{}, 24*time.Hour)
	return true
}

// invalidRecords report the records that cannot be read or fail validation.
type invalidRecords struct {
	reported *reportedOnce // node and record content
	log      *slog.Logger
	metrics  *metrics.Metrics
	events   *events.Recorder
}

// report says, once per node and record content, that the node's record could
// not be read or failed validation (err, from record.Read): a log line, a metric and a Warning
// Event. Nothing of such a record is acted on; the next notice for the node starts a fresh one.
func (v *invalidRecords) report(node *corev1.Node, err error) {
	sum := sha256.Sum256([]byte(node.Annotations[record.Annotation]))
	if !v.reported.first(node.Name + "/" + hex.EncodeToString(sum[:8])) {
		return
	}
	v.log.Warn("the node's interruption record is unreadable or invalid: it is not acted on, and the next notice for the node starts a fresh one",
		"node", node.Name, "annotation", record.Annotation, "err", err)
	v.metrics.InvalidRecord()
	v.events.InvalidRecord(events.NodeOf(node), err.Error())
}

// refusedClaims report nodes whose providerID names another instance than the notice's,
// which its source (the node's own instance metadata, or EC2 for the queue) says is the
// node's. Nothing is done on such a node for the notice.
type refusedClaims struct {
	reported *reportedOnce // node, providerID and instance
	log      *slog.Logger
	metrics  *metrics.Metrics
	events   *events.Recorder
}

func (c *refusedClaims) report(node *corev1.Node, instanceID string, from notice.Source, what string) {
	if !c.reported.first(node.Name + "/" + node.Spec.ProviderID + "/" + instanceID) {
		return
	}
	check, source := metrics.ClaimCheckEC2, "EC2"
	if from == notice.SourceIMDS {
		check, source = metrics.ClaimCheckInstanceMetadata, "the node's instance metadata"
	}
	why := fmt.Sprintf("node %s names instance %s in its providerID %q, but %s says the node is instance %s; %s",
		node.Name, InstanceIDOf(node), node.Spec.ProviderID, source, instanceID, what)
	c.log.Warn("node's claim to an instance refused: its providerID names another instance than the one "+source+" says it is",
		"node", node.Name, "providerID", node.Spec.ProviderID, "instance", instanceID, "check", check, "consequence", what)
	c.metrics.ClaimRefused(check, string(ownership.PathOfSource(from)))
	c.events.ClaimRefused(events.NodeOf(node), why)
}

// newerRecords say what this binary leaves to a newer Lifeboat, once per node and record
// version or notice: a log line, a metric and an Event. During an upgrade (or after a rollback)
// an older replica may read what a newer one wrote; it must neither act on it nor stay silent.
type newerRecords struct {
	reported *reportedOnce
	log      *slog.Logger
	metrics  *metrics.Metrics
	events   *events.Recorder
	// ends undo Lifeboat's own changes once what a newer Lifeboat wrote is taken back.
	ends *ends
}

// record reports a record of a schema version this binary does not know: nothing of it is acted on.
func (n *newerRecords) record(node *corev1.Node, rec record.Record) {
	if !n.reported.first(fmt.Sprintf("%s/v%d", node.Name, rec.Version)) {
		return
	}
	n.log.Info("the node's record has a newer schema version: left whole to a newer Lifeboat",
		"node", node.Name, "version", rec.Version, "known", record.Version)
	n.metrics.LeftToNewer(metrics.LeftRecord)
	n.events.LeftToNewer(events.NodeOf(node), fmt.Sprintf("the node's record (schema version %d, this one knows %d)", rec.Version, record.Version))
}

// notices reports the open notices of the record whose kind this binary does not know; it
// works on the node's other notices.
func (n *newerRecords) notices(node *corev1.Node, rec record.Record) {
	if !rec.Open() {
		return
	}
	for _, i := range rec.Intents {
		if notice.Kind(i.Kind).Known() || slices.Contains(rec.Released, i.ID) || slices.Contains(rec.Finished, i.ID) {
			continue
		}
		if !n.reported.first(node.Name + "/" + i.ID) {
			continue
		}
		n.log.Info("a recorded notice of a kind this Lifeboat does not know: left to a newer Lifeboat",
			"node", node.Name, "notice", i.ID, "kind", i.Kind)
		n.metrics.LeftToNewer(metrics.LeftNotice)
		n.events.LeftToNewer(events.NodeOf(node), fmt.Sprintf("notice %s of kind %q", i.ID, i.Kind))
	}
}
