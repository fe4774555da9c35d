// SPDX-License-Identifier: Apache-2.0

package record

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/ownership"
)

// Read returns the node's record. A missing one is empty; so is one that cannot be read
// or fails validation (see validate), together with the error saying why: the annotation is
// input any credential that may write the Node can forge, so nothing of such a record is
// acted on, and the next notice for the node starts a fresh one. A record of a newer schema
// that says this binary may carry it on (its readableFrom) is read as one of this version; any
// other record of a newer schema is returned with only the fields every version keeps (see
// readNewer), so that it is left alone until LeftByNewer says otherwise.
func Read(n *corev1.Node) (Record, error) {
	raw, ok := n.Annotations[Annotation]
	if !ok {
		return Record{}, nil
	}
	if len(raw) > maxRecordBytes {
		return Record{}, fmt.Errorf("annotation %s: %d bytes, more than the %d a record may have", Annotation, len(raw), maxRecordBytes)
	}
	var v struct {
		Version      int `json:"version"`
		ReadableFrom int `json:"readableFrom"`
	}
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		return Record{}, fmt.Errorf("annotation %s: %w", Annotation, err)
	}
	if v.Version > Version && (v.ReadableFrom <= 0 || v.ReadableFrom > Version) {
		return readNewer(raw, v.Version)
	}
	var r Record
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		return Record{}, fmt.Errorf("annotation %s: %w", Annotation, err)
	}
	if r.Version > Version {
		r.Version = Version // carried on as this version's: Write drops what it does not know
	}
	r.ReadableFrom = 0
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

// readNewer reads, of a record of a newer schema this binary cannot carry on, the fields every
// version keeps with their meaning: version, bootID, phase (any phase this binary does not
// know counts as an episode open), deadline, notices and released. The rest is not read.
func readNewer(raw string, version int) (Record, error) {
	var e struct {
		BootID   string    `json:"bootID"`
		Phase    string    `json:"phase"`
		Deadline time.Time `json:"deadline"`
		Notices  []string  `json:"notices"`
		Released []string  `json:"released"`
	}
	if err := json.Unmarshal([]byte(raw), &e); err != nil {
		return Record{}, fmt.Errorf("annotation %s (schema version %d): %w", Annotation, version, err)
	}
	r := Record{Version: version, BootID: e.BootID, Deadline: e.Deadline, Notices: e.Notices, Released: e.Released}
	if err := r.Phase.UnmarshalText([]byte(e.Phase)); err != nil {
		r.Phase = PhaseDraining
	}
	var p problems
	p.short("bootID", r.BootID, maxShortField)
	p.ids("notices", r.Notices, maxNotices)
	p.ids("released", r.Released, maxReleased)
	if err := errors.Join(p...); err != nil {
		return Record{}, fmt.Errorf("annotation %s (schema version %d): %w", Annotation, version, err)
	}
	return r, nil
}

// Write stores r on the node (in memory: a nodes.Writer sends it), never with a lifecycle
// token, and at this binary's version when r has none; a record of this version says from
// which older version it may be carried on (ReadableFrom), when one may.
func Write(n *corev1.Node, r Record) {
	if r.Version == 0 {
		r.Version = Version
	}
	r.ReadableFrom = 0
	if r.Version == Version && ReadableFrom < Version {
		r.ReadableFrom = ReadableFrom // absent, a record is readable from its own version only
	}
	for _, i := range r.Intents {
		if i.Lifecycle != nil {
			i.Lifecycle.LegacyToken = ""
		}
	}
	b, _ := json.Marshal(r)
	nodes.SetAnnotation(Annotation, string(b))(n)
}
