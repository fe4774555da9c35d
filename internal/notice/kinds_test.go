// SPDX-License-Identifier: Apache-2.0

package notice_test

import (
	"os"
	"strings"
	"testing"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/episode"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/record"
	"lifeboat.dev/lifeboat/internal/record/recordtest"
)

// TestEveryKindReachesEveryConsumer loops over the kind table and checks what each part of
// Lifeboat makes of every kind: its notice ids, its plan (taint, drain), the record's
// validation, and the docs that name its Event reason. A kind added to the table alone is
// either handled everywhere or fails here.
func TestEveryKindReachesEveryConsumer(t *testing.T) {
	cfg := &config.Config{TaintNode: true, EnableRebalanceDraining: false}
	events := readDoc(t, "../../docs/reference/events.md")
	reference := readDoc(t, "../../"+notice.KindsReferencePath)
	shorts := map[string]notice.Kind{}
	for _, k := range notice.Kinds() {
		rules, ok := notice.RulesOf(k)
		if !ok || !k.Known() {
			t.Fatalf("%s: listed by Kinds but not in the table", k)
		}
		t.Run(string(k), func(t *testing.T) {
			if other, dup := shorts[rules.Short]; dup || rules.Short == "" {
				t.Errorf("short name %q is empty or also %s's", rules.Short, other)
			}
			shorts[rules.Short] = k
			if id := notice.ID(k, "i-0123456789abcdef0", "e1"); !strings.HasPrefix(id, rules.Short+"-i-0123456789abcdef0") {
				t.Errorf("notice id %q does not start with the kind's short name %q", id, rules.Short)
			}
			if rules.EventReason == "" || rules.Title == "" || rules.About == "" {
				t.Errorf("Event reason %q, title %q or description %q missing", rules.EventReason, rules.Title, rules.About)
			}
			if rules.GoesAtDeadline && !rules.Reclaims || rules.Reclaims && !rules.Drains {
				t.Errorf("inconsistent rules: %+v", rules)
			}
			plan := episode.PlanFor(k, cfg)
			if plan.TaintKey != rules.TaintKey {
				t.Errorf("plan taints %q, table says %q", plan.TaintKey, rules.TaintKey)
			}
			if plan.Drain != rules.Drains {
				t.Errorf("plan drains %v, table says %v", plan.Drain, rules.Drains)
			}
			if k.ReclaimedOutright() != (rules.Reclaims && k != notice.ASGTermination) {
				t.Errorf("ReclaimedOutright %v disagrees with the table", k.ReclaimedOutright())
			}
			if !strings.Contains(events, "`"+rules.EventReason+"`") {
				t.Errorf("docs/reference/events.md does not name the Event reason %s", rules.EventReason)
			}
			if !strings.Contains(reference, "| `"+string(k)+"` |") {
				t.Errorf("%s has no row for the kind `%s`", notice.KindsReferencePath, k)
			}
			checkRecordTakes(t, k)
		})
	}
}

// checkRecordTakes checks that a record holding a notice of kind k is read back, except for a
// launch hook, which is never recorded (its work is done at intake).
func checkRecordTakes(t *testing.T, k notice.Kind) {
	t.Helper()
	r := recordtest.Good()
	id := notice.ID(k, recordtest.Instance, "e1")
	r.Notices = []string{id}
	r.Intents[0].ID, r.Intents[0].Kind = id, string(k)
	if k != notice.ASGTermination {
		r.Intents[0].Lifecycle = nil
	}
	_, err := record.Read(recordtest.NodeWith(recordtest.Encode(t, r)))
	switch {
	case k == notice.ASGLaunch && err == nil:
		t.Error("a record holding a launch notice was read")
	case k != notice.ASGLaunch && err != nil:
		t.Errorf("a record holding the kind is refused: %v", err)
	}
}

func readDoc(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
