// SPDX-License-Identifier: Apache-2.0

package notice_test

import (
	"math/rand/v2"
	"os"
	"regexp"
	"strings"
	"testing"

	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/episode"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/record"
	"lifeboat.dev/lifeboat/internal/record/recordtest"
)

// TestKindTable loops over the kind table and checks each row holds together: its notice ids,
// its plan (taint, drain), the record's validation, and the docs that name its Event reason.
// What each kind does end to end is TestEveryKindReachesEveryConsumer's (internal/controller).
func TestKindTable(t *testing.T) {
	cfg := &config.Config{TaintNode: true, EnableRebalanceDraining: false}
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
			checkRowHoldsTogether(t, k, rules)
			plan := episode.PlanFor(k, cfg)
			if plan.TaintKey != rules.TaintKey {
				t.Errorf("plan taints %q, table says %q", plan.TaintKey, rules.TaintKey)
			}
			if plan.Drain != rules.Drains {
				t.Errorf("plan drains %v, table says %v", plan.Drain, rules.Drains)
			}
			if got, ok := notice.KindOfID(notice.ID(k, "i-0123456789abcdef0", "e1")); !ok || got != k {
				t.Errorf("KindOfID of the kind's own id is %q, %v", got, ok)
			}
			if !strings.Contains(reference, "| `"+string(k)+"` |") {
				t.Errorf("%s has no row for the kind `%s`", notice.KindsReferencePath, k)
			}
			checkRecordTakes(t, k)
		})
	}
}

// checkRowHoldsTogether refuses rows whose fields contradict each other.
func checkRowHoldsTogether(t *testing.T, k notice.Kind, r notice.Rules) {
	t.Helper()
	switch {
	case r.GoesAtDeadline && !r.Reclaims:
		t.Error("goes at its deadline but is no reclaim")
	case r.Reclaims && !r.Drains:
		t.Error("a reclaim that does not drain")
	case r.Drains && r.DrainOptIn:
		t.Error("drains always and only when asked")
	case (r.Ends == notice.EndsHookCompleted) != (r.Hook == notice.HookTermination):
		t.Error("a termination hook is what a completed hook ends, and only it")
	case r.Hook == notice.HookLaunch && (r.Drains || r.DrainOptIn || r.TaintKey != "" || r.Ends != notice.EndsDrained):
		t.Error("a launch hook's notice is answered at intake: it cannot drain, taint or end otherwise")
	case len(r.Sources) == 0:
		t.Error("no source gives the kind")
	case r.Scheduled && !r.Reclaims:
		t.Error("a scheduled kind's start is when the instance goes")
	}
	for _, s := range r.Sources {
		if !k.From(s) {
			t.Errorf("From(%s) is false for a source of the row", s)
		}
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
	if k.Hook() != notice.HookTermination {
		r.Intents[0].Lifecycle = nil
	}
	_, err := record.Read(recordtest.NodeWith(recordtest.Encode(t, r)))
	switch {
	case !k.Recorded() && err == nil:
		t.Error("a record holding a launch notice was read")
	case k.Recorded() && err != nil:
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

// ValidInstanceID accepts exactly what the pattern ^i-[0-9a-f]{1,17}$ does.
func TestValidInstanceIDMatchesItsPattern(t *testing.T) {
	pattern := regexp.MustCompile(`^i-[0-9a-f]{1,17}$`)
	inputs := []string{"", "i-", "i-0", "i-0123456789abcdef0", "i-0123456789abcdef01", "i-ABC", "i-g", "x-0", "i--1", "i-0123 "}
	const alphabet = "i-0f9agA "
	rng := rand.New(rand.NewPCG(3, 4))
	for range 20000 {
		b := make([]byte, rng.IntN(22))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		inputs = append(inputs, "i-"+string(b), string(b))
	}
	for _, id := range inputs {
		if got, want := notice.ValidInstanceID(id), pattern.MatchString(id); got != want {
			t.Errorf("ValidInstanceID(%q) = %v, the pattern says %v", id, got, want)
		}
	}
}
