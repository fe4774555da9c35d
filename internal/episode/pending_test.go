// SPDX-License-Identifier: Apache-2.0

package episode

import (
	"testing"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/record"
	"lifeboat.dev/lifeboat/internal/record/recordtest"
)

// A notice of a kind this binary does not know (a newer release's) is left to that release:
// it is not pending here, while the node's other notices are.
func TestPendingLeavesUnknownKinds(t *testing.T) {
	rec := recordtest.Good()
	future := record.Intent{ID: "later-" + recordtest.Instance, Kind: "a-later-kind", Source: string(notice.SourceQueue), InstanceID: recordtest.Instance,
		Origin: rec.Intents[0].Origin}
	rec.Notices = append(rec.Notices, future.ID)
	rec.Intents = append(rec.Intents, future)
	pending := Pending(rec, &config.Config{}, "")
	if len(pending) != 1 || pending[0].ID != rec.Intents[0].ID {
		t.Errorf("pending %v, want only the known notice %s", pending, rec.Intents[0].ID)
	}
	if p := planFor(future.Notice(), &config.Config{TaintNode: true}); p.Drain || p.TaintKey != "" {
		t.Errorf("plan for an unknown kind %+v: want no drain and no taint", p)
	}
}
