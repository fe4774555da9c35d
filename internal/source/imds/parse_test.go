package imds

import (
	"strings"
	"testing"
	"time"

	"lifeboat.dev/lifeboat/internal/notice"
)

const inst = "i-0123456789abcdef0"

func TestParseSpot(t *testing.T) {
	tests := []struct {
		body    string
		wantID  string
		wantErr string
	}{
		{`{"action":"terminate","time":"2026-11-21T10:00:00Z"}`, "spot-i-0123456789abcdef0-terminate", ""},
		{`{"action":"stop","time":"2026-11-21T10:00:00Z"}`, "spot-i-0123456789abcdef0-stop", ""},
		{`{"action":"explode","time":"2026-11-21T10:00:00Z"}`, "", `unknown action "explode"`},
		{`{"action":"terminate","time":"soon"}`, "", `time "soon" is not RFC 3339`},
		{`<html>502</html>`, "", "spot/instance-action: not JSON"},
	}
	for _, tt := range tests {
		n, err := parseSpot([]byte(tt.body), inst)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%s: error %v, want %q", tt.body, err, tt.wantErr)
			}
			continue
		}
		if err != nil || n.ID != tt.wantID || n.Deadline != time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC) || n.Kind != notice.SpotInterruption {
			t.Errorf("%s: %+v %v", tt.body, n, err)
		}
	}
	a, _ := parseSpot([]byte(`{"action":"terminate","time":"2026-11-21T10:00:00Z"}`), inst)
	b, _ := parseSpot([]byte(`{"action":"terminate","time":"2026-11-21T10:00:07Z"}`), inst)
	if a.ID != b.ID {
		t.Errorf("a restated time changed the notice id: %s vs %s", a.ID, b.ID)
	}
}

func TestParseScheduled(t *testing.T) {
	body := `[
	 {"NotBefore":"21 Nov 2026 12:00:00 GMT","Code":"system-reboot","Description":"scheduled reboot","EventId":"instance-event-0d59937288b749b32","NotAfter":"21 Nov 2026 14:00:00 GMT","State":"active"},
	 {"NotBefore":"20 Nov 2026 12:00:00 GMT","Code":"instance-stop","Description":"old","EventId":"instance-event-1","State":"canceled"}]`
	ns, events, err := parseScheduled([]byte(body), inst)
	if err != nil || len(ns) != 2 || len(events) != 2 {
		t.Fatalf("%d notices, %d events, %v", len(ns), len(events), err)
	}
	if ns[1].ID != "sched-i-0123456789abcdef0-instance-event-1" || !ns[1].Released || ns[0].Released {
		t.Errorf("canceled event: %+v; active one released=%v", ns[1], ns[0].Released)
	}
	n := ns[0]
	if n.ID != "sched-i-0123456789abcdef0-instance-event-0d59937288b749b32" || n.Action != "system-reboot" ||
		!n.Deadline.Equal(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)) || !n.EndTime.Equal(time.Date(2026, 11, 21, 14, 0, 0, 0, time.UTC)) {
		t.Errorf("%+v", n)
	}
	for _, bad := range []string{`{}`, `[{"EventId":"e","State":"active","NotBefore":"tomorrow"}]`, `[{"State":"active"}]`,
		`[{"EventId":"e","State":"pending","NotBefore":"21 Nov 2026 12:00:00 GMT"}]`} {
		if _, _, err := parseScheduled([]byte(bad), inst); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

func TestParseRebalanceAndLifecycle(t *testing.T) {
	n, err := parseRebalance([]byte(`{"noticeTime":"2026-11-21T10:00:00Z"}`), inst)
	if err != nil || n.ID != "rebalance-i-0123456789abcdef0" || !n.Deadline.IsZero() {
		t.Errorf("rebalance: %+v %v", n, err)
	}
	if _, err := parseRebalance([]byte(`{"noticeTime":12}`), inst); err == nil {
		t.Error("rebalance with a numeric time accepted")
	}
	for body, want := range map[string]string{"Terminated": "asg-term-i-0123456789abcdef0", "InService\n": "", "Warmed:Stopped": ""} {
		n, err := parseLifecycleState([]byte(body), inst)
		if err != nil || (want == "") != (n == nil) || (n != nil && n.ID != want) {
			t.Errorf("%q: %+v %v", body, n, err)
		}
	}
	if _, err := parseLifecycleState([]byte("<garbage>"), inst); err == nil {
		t.Error("garbage lifecycle state accepted")
	}
}

func FuzzParsers(f *testing.F) {
	for _, s := range []string{`{"action":"terminate","time":"2026-11-21T10:00:00Z"}`, `[{"EventId":"e","State":"active","NotBefore":"21 Nov 2026 12:00:00 GMT"}]`,
		`{"noticeTime":"2026-11-21T10:00:00Z"}`, "Terminated", "", "\x00", `[{"EventId":"x","State":"active","NotBefore":"2026-11-21T10:00:00Z","NotAfter":"bad"}]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		check := func(ns []notice.Notice) {
			for _, n := range ns {
				if n.ID == "" || len(n.ID) > 63 || n.InstanceID != inst {
					t.Fatalf("bad notice %+v from %q", n, body)
				}
			}
		}
		if n, err := parseSpot(body, inst); err == nil {
			check([]notice.Notice{n})
		}
		if ns, _, err := parseScheduled(body, inst); err == nil {
			check(ns)
		}
		if n, err := parseRebalance(body, inst); err == nil {
			check([]notice.Notice{n})
		}
		if n, err := parseLifecycleState(body, inst); err == nil && n != nil {
			check([]notice.Notice{*n})
		}
	})
}
