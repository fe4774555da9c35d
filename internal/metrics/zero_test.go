// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"testing"

	dto "github.com/prometheus/client_model/go"

	"lifeboat.dev/lifeboat/internal/detach"
	"lifeboat.dev/lifeboat/internal/kube/pacing"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/source/sqs"
)

// Counters and histograms whose labels are open-ended (an instance-metadata path, a
// Kubernetes verb, resource or status code): their series start at their first use.
var openEnded = map[string]bool{
	"lifeboat_imds_polls_total":              true,
	"lifeboat_kube_requests_total":           true,
	"lifeboat_kube_requests_throttled_total": true,
	"lifeboat_kube_request_duration_seconds": true,
	// Its series start when the mode names the paths it runs (ClaimPaths): the agent and the
	// controller have different ones.
	"lifeboat_instance_claims_refused_total": true,
	// Its series start when the queue's owner hands the parser's pairs over (IgnoredAtZero):
	// the agent reads no queue (TestIgnoredMessagesStartAtZero holds the controller to it).
	"lifeboat_queue_messages_ignored_total": true,
}

// TestCountersStartAtZero: after New, every counter and histogram (but the open-ended ones)
// has series, all at 0, so that increase() sees a process's first failure.
func TestCountersStartAtZero(t *testing.T) {
	all, err := exercised().Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := New().Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	atStart := map[string]*dto.MetricFamily{}
	for _, f := range fresh {
		atStart[f.GetName()] = f
	}
	for _, f := range all {
		name := f.GetName()
		if (f.GetType() != dto.MetricType_COUNTER && f.GetType() != dto.MetricType_HISTOGRAM) || openEnded[name] || !isLifeboat(name) {
			continue
		}
		if atStart[name] == nil {
			t.Errorf("%s has no series after New: its first increment is invisible to increase()", name)
			continue
		}
		for _, s := range atStart[name].GetMetric() {
			if s.GetCounter().GetValue() != 0 || s.GetHistogram().GetSampleCount() != 0 {
				t.Errorf("%s%v is not 0 at start", name, s.GetLabel())
			}
		}
	}
}

func isLifeboat(name string) bool { return len(name) > 9 && name[:9] == "lifeboat_" }

// TestKnownLabelValuesAtZero: each closed set of label values, as the packages that use
// them define it, has its series after New.
func TestKnownLabelValuesAtZero(t *testing.T) {
	m := New()
	want := [][]string{}
	for _, k := range notice.Kinds() {
		for _, s := range []notice.Source{notice.SourceIMDS, notice.SourceQueue, notice.SourceEC2Status, notice.SourceNodeCondition} {
			pair := []string{"lifeboat_notices_total", "kind", labelValue(string(k)), "source", labelValue(string(s))}
			if k.From(s) {
				want = append(want, pair)
			} else if hasSeries(t, m, pair[0], pair[1:]...) {
				t.Errorf("%s%v: a pair the kind table does not allow has a series", pair[0], pair[1:])
			}
		}
	}
	for _, e := range []string{sqs.EventReceive, sqs.EventDelete, sqs.EventExtend, sqs.EventRetry} {
		want = append(want, []string{"lifeboat_sqs_calls_total", "event", e, "result", ResultError})
	}
	for _, o := range []detach.Outcome{detach.Released, detach.Cut, detach.Skipped} {
		want = append(want, []string{"lifeboat_handback_wait_seconds", "wait", "volumes", "outcome", string(o)})
	}
	for _, r := range []string{pacing.ReasonThrottled, pacing.ReasonQueueing, pacing.ReasonDemand} {
		want = append(want, []string{"lifeboat_kube_request_limit_changes_total", "reason", r})
	}
	want = append(want,
		[]string{"lifeboat_actions_total", "action", ActionLifecycleComplete, "result", ResultRefused},
		[]string{"lifeboat_actions_total", "action", ActionMarkUnhealthy, "result", ResultError},
		[]string{"lifeboat_aws_calls_total", "operation", "CompleteLifecycleAction", "result", ResultError},
		[]string{"lifeboat_drain_duration_seconds", "result", ResultError},
		[]string{"lifeboat_evictions_total", "result", EvictionFailed},
		[]string{"lifeboat_instance_calls_refused_total", "call", "RecordLifecycleActionHeartbeat"},
		[]string{"lifeboat_drain_pods_left_total", "reason", "do_not_disrupt"},
		[]string{"lifeboat_instance_status_passes_total", "result", ResultError},
	)
	for _, w := range want {
		if !hasSeries(t, m, w[0], w[1:]...) {
			t.Errorf("%s%v has no series after New", w[0], w[1:])
		}
	}
}

// hasSeries reports whether the metric has a series with all the label pairs.
func hasSeries(t *testing.T, m *Metrics, name string, pairs ...string) bool {
	t.Helper()
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, s := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range s.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			match := true
			for i := 0; i+1 < len(pairs); i += 2 {
				match = match && labels[pairs[i]] == pairs[i+1]
			}
			if match {
				return true
			}
		}
	}
	return false
}

// TestIgnoredAtZero: the (kind, reason) pairs the parser's owner hands over start at 0.
func TestIgnoredAtZero(t *testing.T) {
	m := New()
	if hasSeries(t, m, "lifeboat_queue_messages_ignored_total", "kind", "health", "reason", "no_instance") {
		t.Fatal("a series before its owner handed the labels over")
	}
	m.IgnoredAtZero([][2]string{{"health", "no_instance"}})
	if !hasSeries(t, m, "lifeboat_queue_messages_ignored_total", "kind", "health", "reason", "no_instance") {
		t.Error("no series for the pair handed over")
	}
}
