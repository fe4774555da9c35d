package interruption

import (
	"crypto/sha256"
	"encoding/hex"
	"time"

	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/events"
	"lifeboat.dev/lifeboat/internal/record"
)

// invalidRecordsKept bounds the records remembered as reported.
const invalidRecordsKept = 4096

// ReportInvalidRecord says, once per node and record content, that the node's record could
// not be read or failed validation (err, from record.Read): a log line, a metric and a Warning
// Event. Nothing of such a record is acted on; the next notice for the node starts a fresh one.
func (h *Handler) ReportInvalidRecord(node *corev1.Node, err error) {
	sum := sha256.Sum256([]byte(node.Annotations[record.Annotation]))
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
		"node", node.Name, "annotation", record.Annotation, "err", err)
	h.metrics.InvalidRecord()
	h.events.InvalidRecord(events.NodeOf(node), err.Error())
}
