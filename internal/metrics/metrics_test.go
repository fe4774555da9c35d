// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"errors"
	"fmt"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"

	"lifeboat.dev/lifeboat/internal/check"
	"lifeboat.dev/lifeboat/internal/drain"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/panics"
	"lifeboat.dev/lifeboat/internal/version"
)

// exercised returns Metrics on which every metric Lifeboat registers has samples, with the
// label values the code uses (from their own packages where they are exported).
func exercised() *Metrics {
	m := New()
	m.ConnectionRefused(ServerMetrics)()
	for _, s := range panics.Sites {
		m.PanicRecovered(s.Name)
	}
	m.ObserveIMDS("spot/instance-action", nil)
	m.ClaimRefused(ClaimCheckEC2, "node_condition")
	m.SetupProblems(map[string]int{"rules": 1})
	m.QueueMessageIgnored("health", "no_instance")
	for _, k := range []notice.Kind{notice.SpotInterruption, notice.CapacityReservationInterruption, notice.ScheduledMaintenance,
		notice.Rebalance, notice.ASGTermination, notice.StateChange, notice.ASGLaunch, notice.CapacityBlockExpiration, notice.InstanceImpaired} {
		for _, s := range []notice.Source{notice.SourceQueue, notice.SourceIMDS, notice.SourceEC2Status} {
			m.Notice(string(k), string(s))
		}
	}
	for _, a := range []string{ActionCordon, ActionDrain, ActionUncordon, ActionLifecycleComplete, ActionHeartbeat, ActionWebhook, ActionMarkUnhealthy} {
		for _, r := range []string{ResultOK, ResultError, ResultDryRun, ResultSkipped, ResultNotFound, ResultRefused, ResultGivenUp} {
			m.Action(a, r)
		}
	}
	m.Drain(time.Second, 4*time.Second, nil)
	for _, r := range []string{EvictionEvicted, EvictionForced, EvictionFailed, EvictionRefused, EvictionRetried} {
		m.Evictions(r, 1)
	}
	for _, o := range []string{"done", "retry", "unreadable", "ignored", "not_owned", "foreign_account", "launching"} {
		m.QueueMessage(o)
	}
	m.QueueLag(time.Second)
	m.ObserveSQS("receive", errors.New("down"))
	m.AWSCall("CompleteLifecycleAction", nil, nil)
	m.Leader(true)
	m.SourceHealthy("queue", true)
	m.ConfigWarning("cluster_name_unset")
	m.NoticeWarning(ProblemStartTimeUnreadable)
	for _, c := range []string{ClaimClaimed, ClaimRenewed, ClaimWaited, ClaimLost} {
		m.DrainClaim(c)
	}
	m.DetachWait("volumes", "released", time.Second)
	for _, r := range []drain.Reason{drain.ReasonMirror, drain.ReasonOwnPod, drain.ReasonFinished, drain.ReasonTerminating,
		drain.ReasonDaemonSet, drain.ReasonLocalData, drain.ReasonTolerates, drain.ReasonDoNotEvict} {
		m.PodLeft(r.Label())
	}
	m.BlockedPod("disruption_budget", 1)
	m.BlockedPod("several_disruption_budgets", 1)
	m.KubeRequest("main", "create", "pods/eviction", "429", true, time.Millisecond)
	m.CountEpisodes(func() (Episodes, bool) { return Episodes{ByPhase: map[string]int{"draining": 1}, PodsHeld: 1}, true })
	m.WatchBudget(BudgetReader{Limit: func() float64 { return 8 }, Lanes: []string{"urgent"},
		Waiting: func(string) int { return 0 }, InFlight: func(string) int { return 1 }})
	m.BudgetChanged(4, "throttled")
	findings := map[CheckKey]int{}
	for _, r := range []string{check.ReasonBudgetBlocks, check.ReasonLongGrace, check.ReasonDoNotDisrupt,
		check.ReasonSingleReplica, check.ReasonLocalData, check.ReasonUnmanaged} {
		findings[CheckKey{Namespace: "shop-eu", Reason: r}] = 1
	}
	m.CheckFindings(findings, time.Now(), nil)
	m.InstanceCallRefused("CompleteLifecycleAction")
	m.InvalidRecord()
	m.InstanceStatusPass(3, 1, nil)
	m.InstanceStatusPass(3, 0, errors.New("throttled"))
	for _, e := range []string{RetainedAbandoned, RetainedTerminated, RetainedExpired, RetainedRefused} {
		m.Retained(e)
	}
	return m
}

// Label values that are names from elsewhere, kept as they are spelled there: paths of the
// instance metadata, AWS operations, Kubernetes verbs, resources and namespaces, HTTP codes,
// build stamps.
var verbatimLabels = []string{"path", "operation", "iam_action", "call", "verb", "resource", "namespace", "code", "version", "commit", "goversion"}

var snakeCase = regexp.MustCompile(`^[a-z0-9]+(_[a-z0-9]+)*$`)

// snakeCaseValues is a promlint validation: every other label value is snake_case.
func snakeCaseValues(mf *dto.MetricFamily) []error {
	var problems []error
	for _, s := range mf.GetMetric() {
		for _, l := range s.GetLabel() {
			if !slices.Contains(verbatimLabels, l.GetName()) && !snakeCase.MatchString(l.GetValue()) {
				problems = append(problems, fmt.Errorf("label %s=%q is not snake_case", l.GetName(), l.GetValue()))
			}
		}
	}
	return problems
}

// TestLint: Prometheus's own linter finds nothing in the registry (help texts, _total
// counters, base units, no type in names, no camel case), every label value Lifeboat chooses
// is snake_case, and the lint saw every metric the registry describes.
func TestLint(t *testing.T) {
	m := exercised()
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	l := promlint.NewWithMetricFamilies(families)
	l.AddCustomValidations(snakeCaseValues)
	problems, err := l.Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
	gathered := map[string]bool{}
	for _, f := range families {
		gathered[f.GetName()] = true
	}
	for _, name := range Described(m.Registry) {
		if !gathered[name] {
			t.Errorf("%s has no sample here: the lint did not see it (exercise it above)", name)
		}
	}
}

// TestSnakeCaseValidation: the label-value validation catches a kebab-case value.
func TestSnakeCaseValidation(t *testing.T) {
	name, help, label, value, kind := "x_total", "x", "reason", "own-pod", dto.MetricType_COUNTER
	one := 1.0
	mf := &dto.MetricFamily{Name: &name, Help: &help, Type: &kind, Metric: []*dto.Metric{{
		Label: []*dto.LabelPair{{Name: &label, Value: &value}}, Counter: &dto.Counter{Value: &one}}}}
	if errs := snakeCaseValues(mf); len(errs) != 1 || !strings.Contains(errs[0].Error(), `reason="own-pod"`) {
		t.Errorf("got %v, want the kebab-case value named", errs)
	}
}

// Names from elsewhere in kebab-case are exposed in snake_case.
func TestLabelValuesFromElsewhere(t *testing.T) {
	m := New()
	m.Notice(string(notice.SpotInterruption), "imds")
	m.CheckFindings(map[CheckKey]int{{Namespace: "shop-eu", Reason: check.ReasonBudgetBlocks}: 2}, time.Now(), nil)
	if v := m.Value("lifeboat_notices_total", "kind", "spot_interruption"); v != 1 {
		t.Errorf("lifeboat_notices_total{kind=spot_interruption} = %v, want 1", v)
	}
	if v := m.Value("lifeboat_readiness_findings", "namespace", "shop-eu", "reason", "budget_allows_no_disruption"); v != 2 {
		t.Errorf("lifeboat_readiness_findings{namespace=shop-eu,reason=budget_allows_no_disruption} = %v, want 2", v)
	}
}

// lifeboat_build_info is 1 from the start, labelled with the build's stamp.
func TestBuildInfo(t *testing.T) {
	m := New()
	commit, _ := version.Build()
	if v := m.Value("lifeboat_build_info", "version", version.Version, "commit", commit, "goversion", runtime.Version()); v != 1 {
		t.Errorf("lifeboat_build_info{version=%q,commit=%q,goversion=%q} = %v, want 1", version.Version, commit, runtime.Version(), v)
	}
}

// lifeboat_leader has no series until the controller's election sets it: agents, which elect
// nothing, do not count as replicas without a leader.
func TestLeaderOnlyOnceSet(t *testing.T) {
	m := New()
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "lifeboat_leader" {
			t.Fatalf("lifeboat_leader has a series before the election: %v", f)
		}
	}
	m.Leader(false)
	if v, present := gathered(t, m, "lifeboat_leader"); !present || v != 0 {
		t.Errorf("lifeboat_leader after Leader(false): %v (present %v), want 0", v, present)
	}
	m.Leader(true)
	if v, _ := gathered(t, m, "lifeboat_leader"); v != 1 {
		t.Errorf("lifeboat_leader after Leader(true): %v, want 1", v)
	}
}

// gathered returns the value of a metric without labels, and whether it has a series.
func gathered(t *testing.T, m *Metrics, name string) (float64, bool) {
	t.Helper()
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetGauge().GetValue(), true
		}
	}
	return 0, false
}

// A throttled request counts in both counters; a disruption budget's refusal (a 429 too) only
// among the requests.
func TestThrottledCountedApart(t *testing.T) {
	m := New()
	m.KubeRequest("main", "create", "pods/eviction", "429", false, time.Millisecond)
	m.KubeRequest("main", "create", "pods/eviction", "429", true, time.Millisecond)
	m.KubeRequest("cordon", "patch", "nodes", "429", true, time.Millisecond)
	m.KubeRequest("main", "watch", "pods", "200", false, time.Minute)
	for _, c := range []struct {
		metric string
		labels []string
		want   float64
	}{
		{"lifeboat_kube_requests_total", []string{"resource", "pods/eviction", "code", "429"}, 2},
		{"lifeboat_kube_requests_throttled_total", []string{"resource", "pods/eviction"}, 1},
		{"lifeboat_kube_requests_throttled_total", []string{"client", "cordon", "verb", "patch"}, 1},
		{"lifeboat_kube_request_duration_seconds", nil, 3}, // watches excluded
	} {
		if got := m.Value(c.metric, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.metric, c.labels, got, c.want)
		}
	}
}

// Described lists the names of the metrics a registry describes, for tests that must cover
// them all.
func TestDescribedListsEveryCollector(t *testing.T) {
	names := Described(New().Registry)
	for _, want := range []string{"lifeboat_build_info", "lifeboat_episodes", "lifeboat_kube_requests_in_flight_limit", "go_goroutines"} {
		if !slices.Contains(names, want) {
			t.Errorf("Described misses %s: %v", want, names)
		}
	}
}

// lifeboat_reconcile_panics_total has a series at 0 for every site from the start (so that a
// site's first panic is an increase), names each site in its help, and counts each site apart.
func TestPanicsBySite(t *testing.T) {
	m := New()
	help := newPanics().WithLabelValues("x").Desc().String()
	for _, s := range panics.Sites {
		if !strings.Contains(help, s.Name+",") && !strings.Contains(help, s.Name+")") {
			t.Errorf("the help does not name site %s", s.Name)
		}
		if v, present := sample(t, m, "lifeboat_reconcile_panics_total", "site", s.Name); !present || v != 0 {
			t.Errorf("lifeboat_reconcile_panics_total{site=%q} = %v (present %v) at start, want 0", s.Name, v, present)
		}
	}
	m.PanicRecovered(panics.Webhook.Name)
	if v := m.Value("lifeboat_reconcile_panics_total", "site", "webhook"); v != 1 {
		t.Errorf("{site=webhook} = %v, want 1", v)
	}
	if v := m.Value("lifeboat_reconcile_panics_total"); v != 1 {
		t.Errorf("the sum over sites = %v, want 1", v)
	}
}

// sample returns the value of the metric's series with the label, and whether it has one.
func sample(t *testing.T, m *Metrics, name, label, value string) (float64, bool) {
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
			for _, l := range s.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return s.GetCounter().GetValue(), true
				}
			}
		}
	}
	return 0, false
}
