// SPDX-License-Identifier: Apache-2.0

package ownership

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/text"
)

// Notes on a Node of a notice that waits on the wiring around Lifeboat, not on the node:
// "<RFC 3339 time> <notice id> <why>". `lifeboat status` shows them first; each is written at
// most once an hour per notice.
const (
	// AnnotationUntagged: the notice was not acted on because the instance lacks the tags
	// that say it is this cluster's.
	AnnotationUntagged = nodes.AnnotationPrefix + "untagged-notice"
	// AnnotationDenied: the notice waits because AWS refused a call Lifeboat needs for it.
	AnnotationDenied = nodes.AnnotationPrefix + "aws-denied-notice"
)

// maxUntaggedNote bounds the annotation's value.
const maxUntaggedNote = 512

// NoteValue is a note's annotation value for a notice held up at, for why.
func NoteValue(at time.Time, noticeID, why string) string {
	return text.Clip(at.UTC().Format(time.RFC3339)+" "+noticeID+" "+why, maxUntaggedNote, "…")
}

// Note is a notice recorded on a Node as held up by the wiring.
type Note struct {
	At     time.Time `json:"at"`
	Notice string    `json:"notice"`
	Why    string    `json:"why"`
}

// NoteOf reads the node's note in annotation. It is input (any credential that may write the
// Node may write it): a value that does not parse is no note, and its text is bounded.
func NoteOf(node *corev1.Node, annotation string) (Note, bool) {
	v, ok := node.Annotations[annotation]
	if !ok {
		return Note{}, false
	}
	parts := strings.SplitN(text.Clip(v, maxUntaggedNote+len("…"), ""), " ", 3)
	if len(parts) < 3 {
		return Note{}, false
	}
	at, err := time.Parse(time.RFC3339, parts[0])
	if err != nil {
		return Note{}, false
	}
	return Note{At: at, Notice: parts[1], Why: parts[2]}, true
}
