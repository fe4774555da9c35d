// SPDX-License-Identifier: Apache-2.0

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
	ns, warnings, err := parseScheduled([]byte(body), inst)
	if err != nil || len(ns) != 2 || len(warnings) != 0 {
		t.Fatalf("%d notices, warnings %+v, %v", len(ns), warnings, err)
	}
	if ns[1].ID != "sched-i-0123456789abcdef0-instance-event-1" || !ns[1].Released || ns[0].Released {
		t.Errorf("canceled event: %+v; active one released=%v", ns[1], ns[0].Released)
	}
	n := ns[0]
	if n.ID != "sched-i-0123456789abcdef0-instance-event-0d59937288b749b32" || n.Action != "system-reboot" ||
		!n.Deadline.Equal(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)) || !n.EndTime.Equal(time.Date(2026, 11, 21, 14, 0, 0, 0, time.UTC)) {
		t.Errorf("%+v", n)
	}
	for _, bad := range []string{`{}`, `"events"`, `<html>502</html>`} {
		if _, _, err := parseScheduled([]byte(bad), inst); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

// One event Lifeboat cannot read never hides the others.
func TestParseScheduledKeepsTheRest(t *testing.T) {
	body := `[
	 {"EventId":"e-pending","State":"pending","Code":"system-reboot","NotBefore":"21 Nov 2026 12:00:00 GMT"},
	 {"State":"active","Code":"instance-stop","NotBefore":"21 Nov 2026 12:00:00 GMT"},
	 {"EventId":"e-tomorrow","State":"active","Code":"instance-retirement","NotBefore":"tomorrow","NotAfter":"21 Nov 2026 14:00:00 GMT"},
	 {"EventId":"e-good","State":"Active","Code":"system-maintenance","NotBefore":"22 Nov 2026 12:00:00 GMT","NotAfter":"sometime"},
	 {"EventId":"e-old","State":"canceled","Code":"system-reboot","NotBefore":"?"}]`
	ns, warnings, err := parseScheduled([]byte(body), inst)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]notice.Notice{}
	for _, n := range ns {
		byID[n.ID] = n
	}
	if len(ns) != 3 {
		t.Fatalf("%d notices, want e-tomorrow, e-good and e-old: %+v", len(ns), ns)
	}
	tomorrow := byID["sched-i-0123456789abcdef0-e-tomorrow"]
	if !strings.Contains(tomorrow.CordonOnly, `"tomorrow"`) || !tomorrow.Deadline.IsZero() || tomorrow.Released ||
		!tomorrow.EndTime.Equal(time.Date(2026, 11, 21, 14, 0, 0, 0, time.UTC)) {
		t.Errorf("unreadable start: %+v", tomorrow)
	}
	good := byID["sched-i-0123456789abcdef0-e-good"]
	if good.CordonOnly != "" || !good.Deadline.Equal(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)) || !good.EndTime.IsZero() {
		t.Errorf("readable event: %+v", good)
	}
	// A released event needs no start time: it only undoes.
	if old := byID["sched-i-0123456789abcdef0-e-old"]; !old.Released || old.CordonOnly != "" {
		t.Errorf("canceled event: %+v", old)
	}
	var problems []string
	for _, w := range warnings {
		problems = append(problems, w.Problem)
	}
	want := []string{problemEventStateUnknown, problemEventUnreadable, problemStartUnreadable, problemEventUnreadable}
	if strings.Join(problems, ",") != strings.Join(want, ",") {
		t.Errorf("warnings %+v, want problems %v", warnings, want)
	}
	if !strings.Contains(warnings[0].Detail, `"pending"`) || !strings.Contains(warnings[0].Detail, "e-pending") {
		t.Errorf("the unknown state's warning names neither the state nor the event: %s", warnings[0].Detail)
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
	for body, want := range map[string]string{"Terminated": "asg-term-i-0123456789abcdef0", "InService\n": "", "Warmed:Stopped": "", "Standby": ""} {
		n, unknown, err := parseLifecycleState([]byte(body), inst)
		if err != nil || unknown != "" || (want == "") != (n == nil) || (n != nil && n.ID != want) {
			t.Errorf("%q: %+v %q %v", body, n, unknown, err)
		}
	}
	// A state name this version does not know is reported, not an error.
	for _, body := range []string{"Quarantined", "Warmed:Pending:Wait\n"} {
		if n, unknown, err := parseLifecycleState([]byte(body), inst); err != nil || n != nil || unknown != strings.TrimSpace(body) {
			t.Errorf("%q: %+v %q %v", body, n, unknown, err)
		}
	}
	for _, body := range []string{"<garbage>", "", "In Service", ":", `{"state":"Terminated"}`} {
		if _, _, err := parseLifecycleState([]byte(body), inst); err == nil {
			t.Errorf("%q accepted as a lifecycle state", body)
		}
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
		if ns, warnings, err := parseScheduled(body, inst); err == nil {
			check(ns)
			for _, n := range ns {
				// An active event either has its start or says why it only cordons.
				if !n.Released && n.Deadline.IsZero() == (n.CordonOnly == "") {
					t.Fatalf("event with deadline %v and cordon-only %q from %q", n.Deadline, n.CordonOnly, body)
				}
			}
			for _, w := range warnings {
				if w.Problem == "" || w.Detail == "" {
					t.Fatalf("warning %+v from %q", w, body)
				}
			}
		}
		if n, err := parseRebalance(body, inst); err == nil {
			check([]notice.Notice{n})
		}
		if n, unknown, err := parseLifecycleState(body, inst); err == nil && n != nil {
			check([]notice.Notice{*n})
		} else if err != nil && unknown != "" {
			t.Fatalf("error %v with an unknown state %q", err, unknown)
		}
	})
}
