// SPDX-License-Identifier: Apache-2.0

package record

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/ownership"
)

// Read returns the node's record. A missing one is empty; so is one that cannot be read
// or fails validation (see validate), together with the error saying why: the annotation is
// input any credential that may write the Node can forge, so nothing of such a record is
// acted on, and the next notice for the node starts a fresh one. A record of a newer schema
// is returned with only its version, so that it is left alone.
func Read(n *corev1.Node) (Record, error) {
	raw, ok := n.Annotations[Annotation]
	if !ok {
		return Record{}, nil
	}
	if len(raw) > maxRecordBytes {
		return Record{}, fmt.Errorf("annotation %s: %d bytes, more than the %d a record may have", Annotation, len(raw), maxRecordBytes)
	}
	var v struct {
		Version int `json:"version"`
	}
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		return Record{}, fmt.Errorf("annotation %s: %w", Annotation, err)
	}
	if v.Version > Version {
		return Record{Version: v.Version}, nil
	}
	var r Record
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		return Record{}, fmt.Errorf("annotation %s: %w", Annotation, err)
	}
	if err := validate(r, ownership.InstanceIDFromProviderID(n.Spec.ProviderID)); err != nil {
		return Record{}, fmt.Errorf("annotation %s: %w", Annotation, err)
	}
	for _, i := range r.Intents {
		if i.Lifecycle != nil {
			i.Lifecycle.LegacyToken = "" // never carried further, and never written back
		}
	}
	return r, nil
}

// Write stores r on the node (in memory: a nodes.Writer sends it), never with a lifecycle
// token, and at this binary's version when r has none.
func Write(n *corev1.Node, r Record) {
	if r.Version == 0 {
		r.Version = Version
	}
	for _, i := range r.Intents {
		if i.Lifecycle != nil {
			i.Lifecycle.LegacyToken = ""
		}
	}
	b, _ := json.Marshal(r)
	nodes.SetAnnotation(Annotation, string(b))(n)
}
