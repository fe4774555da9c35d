// SPDX-License-Identifier: Apache-2.0

package demo

import (
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"lifeboat.dev/lifeboat/internal/metrics"
)

// TestCounted: of a process's metrics, what it counted is shown and the series Lifeboat starts
// at 0 are not, except the gauges whose 0 says something.
func TestCounted(t *testing.T) {
	m := metrics.New()
	m.Notice("spot_interruption", "imds")
	m.Notice("spot_interruption", "imds")
	m.Leader(false)
	m.SourceHealthy("imds", true)
	m.Drain(3*time.Second, 10*time.Second, nil)
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	zeros := 0
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, "lifeboat_notices_total{") && strings.HasSuffix(l, " 0") {
			zeros++
		}
	}
	if zeros < 10 {
		t.Fatalf("the registry starts only %d notice series at 0; this test no longer shows the zeros left out", zeros)
	}

	got, err := counted(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`lifeboat_notices_total{kind="spot_interruption",source="imds"} 2`,
		`lifeboat_leader 0`,
		`lifeboat_source_healthy{source="imds"} 1`,
		`lifeboat_drain_duration_seconds_count{result="ok"} 1`,
	} {
		if !slices.Contains(got, want) {
			t.Errorf("counted lacks %s; it has:\n%s", want, strings.Join(got, "\n"))
		}
	}
	for _, l := range got {
		if strings.HasSuffix(l, " 0") && !strings.HasPrefix(l, "lifeboat_leader") && !strings.HasPrefix(l, "lifeboat_source_healthy") {
			t.Errorf("counted shows a series at 0: %s", l)
		}
		if strings.HasPrefix(l, "lifeboat_kube_") || strings.HasPrefix(l, "lifeboat_build_info") {
			t.Errorf("counted shows plumbing: %s", l)
		}
	}
	if !slices.IsSorted(got) {
		t.Errorf("counted is not sorted:\n%s", strings.Join(got, "\n"))
	}
}

func TestCountedRefusesWhatIsNotMetrics(t *testing.T) {
	if _, err := counted(strings.NewReader("<html>not metrics</html>\n")); err == nil {
		t.Error("an answer that is not the text exposition was read as metrics")
	}
}
