// SPDX-License-Identifier: Apache-2.0

package drain

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func startedAt(t time.Time) podOpt {
	return func(p *corev1.Pod) { p.Status.StartTime = &metav1.Time{Time: t} }
}

func TestDoNotDisruptForms(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name       string
		opts       []podOpt
		wantMarked bool
		wantUntil  time.Time // zero: with no end
		wantErr    string    // part of the error; empty: none
	}{
		{name: "no annotation"},
		{name: "true", opts: []podOpt{annotated(AnnotationDoNotDisrupt, "true")}, wantMarked: true},
		{name: "false", opts: []podOpt{annotated(AnnotationDoNotDisrupt, "false")}},
		{name: "safe-to-evict false", opts: []podOpt{annotated(AnnotationSafeToEvict, "false")}, wantMarked: true},
		{name: "duration not yet over", opts: []podOpt{annotated(AnnotationDoNotDisrupt, "30m"), startedAt(now.Add(-10 * time.Minute))},
			wantMarked: true, wantUntil: now.Add(20 * time.Minute)},
		{name: "compound duration", opts: []podOpt{annotated(AnnotationDoNotDisrupt, "1h30m"), startedAt(now.Add(-time.Hour))},
			wantMarked: true, wantUntil: now.Add(30 * time.Minute)},
		{name: "duration over", opts: []podOpt{annotated(AnnotationDoNotDisrupt, "30m"), startedAt(now.Add(-40 * time.Minute))}},
		{name: "duration ending now", opts: []podOpt{annotated(AnnotationDoNotDisrupt, "30m"), startedAt(now.Add(-30 * time.Minute))}},
		{name: "zero duration", opts: []podOpt{annotated(AnnotationDoNotDisrupt, "0s"), startedAt(now)}},
		{name: "duration of a pod not started yet counts from now", opts: []podOpt{annotated(AnnotationDoNotDisrupt, "30m")},
			wantMarked: true, wantUntil: now.Add(30 * time.Minute)},
		{name: "duration over, but safe-to-evict false", opts: []podOpt{annotated(AnnotationDoNotDisrupt, "30m", AnnotationSafeToEvict, "false"),
			startedAt(now.Add(-time.Hour))}, wantMarked: true},
		{name: "a word", opts: []podOpt{annotated(AnnotationDoNotDisrupt, "yes")}, wantMarked: true, wantErr: `karpenter.sh/do-not-disrupt="yes"`},
		{name: "a number without a unit", opts: []podOpt{annotated(AnnotationDoNotDisrupt, "30")}, wantMarked: true, wantErr: `"30"`},
		{name: "negative duration", opts: []podOpt{annotated(AnnotationDoNotDisrupt, "-5m")}, wantMarked: true, wantErr: `"-5m"`},
		{name: "True in capitals", opts: []podOpt{annotated(AnnotationDoNotDisrupt, "True")}, wantMarked: true, wantErr: `"True"`},
		{name: "empty", opts: []podOpt{annotated(AnnotationDoNotDisrupt, "")}, wantMarked: true, wantErr: `""`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := NewPod(newPod("apps", "web", "n", tc.opts...))
			marked, until, err := DoNotDisrupt(pod, now)
			if marked != tc.wantMarked || !until.Equal(tc.wantUntil) {
				t.Errorf("marked %v until %v, want %v until %v", marked, until, tc.wantMarked, tc.wantUntil)
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("error %v, want none", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), `taken as "true"`)):
				t.Errorf("error %v, want one naming %s and saying how it is taken", err, tc.wantErr)
			}
		})
	}
}

// Select applies the duration: a pod still protected stays under a notice that is no reclaim,
// leaves last under a reclaim no later than its protection's end, and a pod whose protection
// is over is evicted in its own tier. An unreadable mark protects, and is reported.
func TestSelectWithDurations(t *testing.T) {
	started := time.Now().Add(-10 * time.Minute)
	pods := keepAll([]*corev1.Pod{
		newPod("apps", "protected", "n", ownedBy("ReplicaSet", "a"), annotated(AnnotationDoNotDisrupt, "1h"), startedAt(started)),
		newPod("apps", "expired", "n", ownedBy("ReplicaSet", "b"), annotated(AnnotationDoNotDisrupt, "5m"), startedAt(started)),
		newPod("apps", "garbled", "n", ownedBy("ReplicaSet", "c"), annotated(AnnotationDoNotDisrupt, "forever")),
	})
	byName := func(evict []Candidate) map[string]Candidate {
		out := map[string]Candidate{}
		for _, c := range evict {
			out[c.Pod.Name] = c
		}
		return out
	}

	evict, skipped := Select(pods, Policy{}, Terms{})
	got := byName(evict)
	if len(evict) != 1 || got["expired"].Tier != TierWorkload {
		t.Errorf("no reclaim: evicted %+v, want only the pod whose protection is over, in the workload tier", evict)
	}
	held := map[string]Skipped{}
	for _, s := range skipped {
		held[s.Pod.Name] = s
	}
	if held["protected"].Reason != ReasonDoNotEvict || held["garbled"].Reason != ReasonDoNotEvict {
		t.Errorf("no reclaim: skipped %+v, want the protected and the unreadable pods held", skipped)
	}
	if held["protected"].MarkError != "" || !strings.Contains(held["garbled"].MarkError, `"forever"`) {
		t.Errorf("mark errors: %q, %q", held["protected"].MarkError, held["garbled"].MarkError)
	}

	evict, _ = Select(pods, Policy{}, Terms{Reclaim: true})
	got = byName(evict)
	if c := got["protected"]; c.Tier != TierDoNotDisrupt || !c.ProtectedUntil.Equal(started.Add(time.Hour)) {
		t.Errorf("reclaim: protected pod %+v, want the last tier until an hour after its start", c)
	}
	if c := got["garbled"]; c.Tier != TierDoNotDisrupt || !c.ProtectedUntil.IsZero() || c.MarkError == "" {
		t.Errorf("reclaim: unreadable pod %+v, want the last tier with no end, and its error", c)
	}
	if c := got["expired"]; c.Tier != TierWorkload {
		t.Errorf("reclaim: expired pod %+v, want the workload tier", c)
	}
}

type markSeen struct {
	Observer
	told []string
}

func (m *markSeen) UnreadableMark(pod *Pod, why string) { m.told = append(m.told, pod.Name+": "+why) }

// A drain tells its observer once per pod of an unreadable mark, however often the pod is
// selected again (pods arriving late are selected again with the skipped ones).
func TestUnreadableMarkToldOncePerDrain(t *testing.T) {
	seen := &markSeen{}
	d := New(nil, Options{Observer: seen})
	pods := keepAll([]*corev1.Pod{
		newPod("apps", "garbled", "n", annotated(AnnotationDoNotDisrupt, "forever")),
		newPod("apps", "fine", "n", annotated(AnnotationDoNotDisrupt, "true")),
	})
	told := map[types.UID]bool{}
	for _, terms := range []Terms{{}, {Reclaim: true}, {}} {
		evict, skipped := Select(pods, Policy{}, terms)
		d.reportMarks("n", pods, evict, skipped, told)
	}
	if len(seen.told) != 1 || !strings.HasPrefix(seen.told[0], `garbled: annotation karpenter.sh/do-not-disrupt="forever"`) {
		t.Errorf("told %q, want the unreadable pod once", seen.told)
	}
}
