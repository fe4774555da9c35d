package interruption

import (
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"sync"
	"time"

	utilcache "k8s.io/apimachinery/pkg/util/cache"

	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/events"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/record"
)

// invalidRecordsKept bounds the records remembered as reported.
const invalidRecordsKept = 4096

// invalidRecords report the records that cannot be read or fail validation.
type invalidRecords struct {
	mu       sync.Mutex
	reported *utilcache.LRUExpireCache // node and record content, once reported
	log      *slog.Logger
	metrics  *metrics.Metrics
	events   *events.Recorder
}

// report says, once per node and record content, that the node's record could
// not be read or failed validation (err, from record.Read): a log line, a metric and a Warning
// Event. Nothing of such a record is acted on; the next notice for the node starts a fresh one.
func (v *invalidRecords) report(node *corev1.Node, err error) {
	sum := sha256.Sum256([]byte(node.Annotations[record.Annotation]))
	key := node.Name + "/" + hex.EncodeToString(sum[:8])
	v.mu.Lock()
	_, seen := v.reported.Get(key)
	if !seen {
		v.reported.Add(key, struct{}{}, 24*time.Hour)
	}
	v.mu.Unlock()
	if seen {
		return
	}
	v.log.Warn("the node's interruption record is unreadable or invalid: it is not acted on, and the next notice for the node starts a fresh one",
		"node", node.Name, "annotation", record.Annotation, "err", err)
	v.metrics.InvalidRecord()
	v.events.InvalidRecord(events.NodeOf(node), err.Error())
}
