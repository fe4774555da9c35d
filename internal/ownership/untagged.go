// SPDX-License-Identifier: Apache-2.0

package ownership

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/text"
)

// AnnotationUntagged records, on this cluster's Node, the last notice for it that was not
// acted on because its instance lacks the tags that say it is ours: "<RFC 3339 time> <notice
// id> <why>". `lifeboat status` shows it; it is written at most once an hour per notice.
const AnnotationUntagged = nodes.AnnotationPrefix + "untagged-notice"

// maxUntaggedNote bounds the annotation's value.
const maxUntaggedNote = 512

// UntaggedNote is the annotation's value for a notice not acted on at, for why.
func UntaggedNote(at time.Time, noticeID, why string) string {
	return text.Clip(at.UTC().Format(time.RFC3339)+" "+noticeID+" "+why, maxUntaggedNote, "…")
}

// Untagged is a notice recorded on a Node as not acted on for its instance's tags.
type Untagged struct {
	At     time.Time `json:"at"`
	Notice string    `json:"notice"`
	Why    string    `json:"why"`
}

// UntaggedOf reads the node's annotation. It is input (any credential that may write the Node
// may write it): a value that does not parse is no record, and its text is bounded.
func UntaggedOf(node *corev1.Node) (Untagged, bool) {
	v, ok := node.Annotations[AnnotationUntagged]
	if !ok {
		return Untagged{}, false
	}
	parts := strings.SplitN(text.Clip(v, maxUntaggedNote+len("…"), ""), " ", 3)
	if len(parts) < 3 {
		return Untagged{}, false
	}
	at, err := time.Parse(time.RFC3339, parts[0])
	if err != nil {
		return Untagged{}, false
	}
	return Untagged{At: at, Notice: parts[1], Why: parts[2]}, true
}
