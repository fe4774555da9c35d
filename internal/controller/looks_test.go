// SPDX-License-Identifier: Apache-2.0

package controller_test

import (
	"context"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"lifeboat.dev/lifeboat/internal/record"
	"lifeboat.dev/lifeboat/internal/source/nodecondition"
)

// withLooks passes Info and above, and node repair's debug line for each look at a node
// (nodecondition.LogLooked): tests wait for the look at a node's state rather than for time.
type withLooks struct{ slog.Handler }

func (h withLooks) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelDebug }

func (h withLooks) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelInfo && r.Message != nodecondition.LogLooked {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h withLooks) WithAttrs(a []slog.Attr) slog.Handler { return withLooks{h.Handler.WithAttrs(a)} }
func (h withLooks) WithGroup(n string) slog.Handler      { return withLooks{h.Handler.WithGroup(n)} }

var lookLine = regexp.MustCompile(`msg="` + regexp.QuoteMeta(nodecondition.LogLooked) + `".* node=(\S+) resourceVersion=(\d+) outcome=(\S+)`)

// logMark is where the controller's log ends now: lookedAt after it reads only later looks.
func (w *intakeWorld) logMark() int { return len(w.logs.String()) }

// lookedAt waits until node repair has looked, after the log's mark, at each node as it is
// now or later, and returns each look's outcome (nodecondition.Looked*). Whatever that look
// decided has been decided: a repair it did not take is not taken until the node changes or
// a timer it set runs out.
func (w *intakeWorld) lookedAt(t *testing.T, ctx context.Context, mark int, ns ...*corev1.Node) map[string]string {
	t.Helper()
	want := map[string]uint64{}
	for _, n := range ns {
		rv, err := strconv.ParseUint(w.node(t, ctx, n).ResourceVersion, 10, 64)
		if err != nil {
			t.Fatalf("%s: resourceVersion: %v", n.Name, err)
		}
		want[n.Name] = rv
	}
	got := map[string]string{}
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		for _, m := range lookLine.FindAllStringSubmatch(w.logs.String()[mark:], -1) {
			rv, _ := strconv.ParseUint(m[2], 10, 64)
			if min, ok := want[m[1]]; ok && rv >= min {
				got[m[1]] = m[3]
			}
		}
		return len(got) == len(want), nil
	})
	if err != nil {
		t.Fatalf("node repair did not look at the nodes' current state: looked at %v of %v", got, want)
	}
	return got
}

// waitFinished waits until the node's record says the notice's work is complete: drained and
// its completion done, which the record claims once, so nothing of it is repeated later.
func (w *intakeWorld) waitFinished(t *testing.T, ctx context.Context, n *corev1.Node, noticeID string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		r, _ := record.Read(w.node(t, ctx, n))
		return slices.Contains(r.Finished, noticeID), nil
	})
	if err != nil {
		r, _ := record.Read(w.node(t, ctx, n))
		t.Fatalf("%s: the work of %s did not finish: record %+v", n.Name, noticeID, r)
	}
}
