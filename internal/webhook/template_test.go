// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func notification() Notification {
	start := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	return Notification{
		EventID:              "spot-i-0abc",
		Kind:                 "spot-interruption",
		Monitor:              "imds",
		Description:          "Spot instance will be terminated",
		State:                "active",
		NodeName:             "ip-10-0-0-7.ec2.internal",
		InstanceID:           "i-0abc",
		ProviderID:           "aws:///us-east-1a/i-0abc",
		InstanceType:         "m5.large",
		AutoScalingGroupName: "workers",
		StartTime:            start,
		EndTime:              start.Add(2 * time.Minute),
		Pods:                 []string{"default/web-1", "kube-system/dns-2"},
		NodeLabels:           map[string]string{"team": "infra", "kubernetes.io/os": "linux"},
	}
}

func TestDefaultTemplateIsValidJSONWhateverTheValues(t *testing.T) {
	tmpl, err := ParseTemplate(DefaultTemplate)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		edit func(*Notification)
	}{
		{"plain", func(*Notification) {}},
		{"quotes", func(n *Notification) { n.Description = `the "old" host said "bye"` }},
		{"newlines and tabs", func(n *Notification) { n.Description = "line one\nline two\r\n\tindented" }},
		{"backslashes", func(n *Notification) { n.Description = `C:\path\ and \" and \u0041` }},
		{"control characters", func(n *Notification) { n.Description = "nul\x00 bell\x07 esc\x1b del\x7f" }},
		{"invalid UTF-8", func(n *Notification) { n.Description = "bad \xff\xfe bytes" }},
		{"HTML and template syntax", func(n *Notification) { n.Description = `</script><b>&amp;</b> {{ .EventID }}` }},
		{"JSON injection attempt", func(n *Notification) { n.Description = `"}, "admin": true, "x": {"` }},
		{"quotes in every field", func(n *Notification) {
			n.EventID, n.Kind, n.InstanceID, n.NodeName = `e"1`, `k"2`, `i"3`, "n\n4"
		}},
		{"empty", func(n *Notification) { *n = Notification{} }},
		{"unicode", func(n *Notification) { n.Description = "Wartung ⚠️ 計画メンテナンス \u2028 \u2029" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := notification()
			tt.edit(&n)
			body, err := tmpl.Render(n)
			if err != nil {
				t.Fatal(err)
			}
			var msg map[string]string
			if err := json.Unmarshal(body, &msg); err != nil {
				t.Fatalf("body is not a JSON object of strings: %v\n%s", err, body)
			}
			if len(msg) != 1 || msg["text"] == "" {
				t.Fatalf("want exactly a text field, got %v", msg)
			}
			text := msg["text"]
			want := []string{n.EventID, n.Kind, n.InstanceID, n.NodeName, n.StartTime.UTC().Format("2006-01-02 15:04:05 MST")}
			if strings.ToValidUTF8(n.Description, "\uFFFD") == n.Description {
				want = append(want, n.Description)
			}
			for _, w := range want {
				if !strings.Contains(text, w) {
					t.Errorf("text %q lacks %q", text, w)
				}
			}
		})
	}
}

func TestCustomTemplateSeesEveryField(t *testing.T) {
	const text = `{{.EventID}}|{{.Kind}}|{{.Monitor}}|{{.Description}}|{{.State}}|{{.NodeName}}|{{.InstanceID}}|` +
		`{{.ProviderID}}|{{.InstanceType}}|{{.AutoScalingGroupName}}|{{.StartTime.Format "15:04:05"}}|{{.EndTime.Unix}}|` +
		`{{range .Pods}}{{.}};{{end}}|{{range $k, $v := .NodeLabels}}{{$k}}={{$v}};{{end}}|{{.NodeLabels.team}}|{{$.JSON .Pods}}`
	tmpl, err := ParseTemplate(text)
	if err != nil {
		t.Fatal(err)
	}
	n := notification()
	got, err := tmpl.Render(n)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`spot-i-0abc|spot-interruption|imds|Spot instance will be terminated|active|ip-10-0-0-7.ec2.internal|i-0abc|`+
		`aws:///us-east-1a/i-0abc|m5.large|workers|05:06:07|%d|default/web-1;kube-system/dns-2;|kubernetes.io/os=linux;team=infra;|infra|`+
		`["default/web-1","kube-system/dns-2"]`, n.EndTime.Unix())
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// An NTH template, with fields written as NTH users write them, renders unchanged.
func TestNTHStyleTemplate(t *testing.T) {
	tmpl, err := ParseTemplate(`{"text":"EventID: {{ .EventID }} - Kind: {{ .Kind }} - Node: {{ .NodeName }} - Start: {{ .StartTime }}"}`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := tmpl.Render(notification())
	if err != nil {
		t.Fatal(err)
	}
	want := `{"text":"EventID: spot-i-0abc - Kind: spot-interruption - Node: ip-10-0-0-7.ec2.internal - Start: 2025-03-04 05:06:07 +0000 UTC"}`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestRenderMissingLabel(t *testing.T) {
	tests := []struct {
		name, text string
		labels     map[string]string
		want       string
		wantErr    string
	}{
		{"present", `{{ .NodeLabels.team }}`, map[string]string{"team": "infra"}, "infra", ""},
		{"missing is an error", `{{ .NodeLabels.team }}`, map[string]string{"other": "x"}, "", `map has no entry for key "team"`},
		{"nil labels is an error", `{{ .NodeLabels.team }}`, nil, "", `map has no entry for key "team"`},
		{"index tolerates a missing key", `[{{ index .NodeLabels "team" }}]`, nil, "[]", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmpl, err := ParseTemplate(tt.text)
			if err != nil {
				t.Fatalf("a label lookup must parse (labels differ per node): %v", err)
			}
			n := notification()
			n.NodeLabels = tt.labels
			got, err := tmpl.Render(n)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "WEBHOOK_TEMPLATE") {
					t.Fatalf("got %q, %v; want an error naming WEBHOOK_TEMPLATE with %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || string(got) != tt.want {
				t.Fatalf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestParseTemplateRejects(t *testing.T) {
	tests := []struct {
		name, text, want string
	}{
		{"syntax", `{{ .Kind `, "not a valid Go template"},
		{"environment", `{{ env "HOME" }}`, `function "env" is not available in webhook templates`},
		{"environment (sprig spelling)", `{{ getenv "HOME" }}`, `function "getenv" not defined`},
		{"file", `{{ readFile "/etc/passwd" }}`, `function "readFile" not defined`},
		{"include", `{{ include "/etc/passwd" . }}`, `function "include" not defined`},
		{"exec", `{{ exec "id" }}`, `function "exec" not defined`},
		{"unknown field", `{{ .Nope }}`, "can't evaluate field Nope"},
		{"method on a field with wrong arguments", `{{ .StartTime.Format }}`, "wrong number of args"},
		{"loop over a number", `{{ range .StartTime.Unix }}{{ end }}`, "more than 10000 loop iterations"},
		{"loop over a literal", `{{ range 1000000000 }}{{ end }}`, "more than 10000 loop iterations"},
		{"nested loops", `{{ range 1000 }}{{ range 1000 }}{{ end }}{{ end }}`, "more than 10000 loop iterations"},
		{"recursion", `{{ define "a" }}{{ template "a" . }}{{ end }}{{ template "a" . }}`, `template "a" calls itself`},
		{"indirect recursion", `{{ define "a" }}{{ if .Pods }}{{ template "b" . }}{{ end }}{{ end }}{{ define "b" }}{{ range .Pods }}{{ template "a" $ }}{{ end }}{{ end }}x`, `calls itself`},
		{"deep nesting", strings.Repeat("{{ range .Pods }}", 60) + strings.Repeat("{{ end }}", 60), "nested more than 50 deep"},
		{"deep call chain", chain(60), "nested more than 50 deep"},
		{"fan-out of template calls", `{{ define "x" }}{{ template "y" }}{{ template "y" }}{{ end }}` +
			`{{ define "y" }}{{ range 5000 }}{{ end }}{{ end }}{{ template "x" }}`, "more than 10000"},
		{"too much output", `{{ printf "%900000s" "" }}`, "a width of 900000 is more than the limit of 131072 bytes"},
		{"too much output at once", `{{ printf "%90000s" "" }}{{ printf "%90000s" "" }}`, "exceeds 131072 bytes"},
		{"too much output in a loop", `{{ range 100 }}{{ printf "%2000s" "" }}{{ end }}`, "exceeds 131072 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmpl, err := ParseTemplate(tt.text)
			if err == nil {
				t.Fatalf("parsed; want an error with %q", tt.want)
			}
			if tmpl != nil {
				t.Error("returned a template along with the error")
			}
			if !strings.HasPrefix(err.Error(), "WEBHOOK_TEMPLATE: ") || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q: want WEBHOOK_TEMPLATE and %q", err, tt.want)
			}
		})
	}
}

// A template whose body grows with a node's data is refused at start when the largest
// notification a node can bring would pass the bound.
func TestStartUpRefusesBodiesThatGrowWithData(t *testing.T) {
	for _, text := range []string{
		`{{ range .Pods }}{{ printf "%1000s" . }}{{ end }}`,
		`{{ range $k, $v := .NodeLabels }}{{ repeat 20 $k }}{{ end }}`,
		`{{ $d := .Description }}{{ range 200 }}{{ $d }}{{ end }}`,
		`{{ range .Pods }}{{ $.JSON $.Pods }}{{ end }}`,
		// Passes the sample render (whose description it names), not the largest notification.
		`{{ if ne .Description "sample notification" }}{{ indent 131072 (repeat 131072 "\n") }}{{ end }}`,
	} {
		_, err := ParseTemplate(text)
		if err == nil || !strings.Contains(err.Error(), "fails on the largest notification a node can bring (250 pods, 64 labels, a 1024-byte description)") {
			t.Errorf("%s: %v", text, err)
		}
	}
}

// Data beyond the largest notification still cannot grow a body past the bound.
func TestRenderBoundedOnRealData(t *testing.T) {
	tmpl, err := ParseTemplate(`{{ range .Pods }}{{ printf "%200s" . }}{{ end }}`)
	if err != nil {
		t.Fatal(err)
	}
	n := notification()
	for i := range 1000 {
		n.Pods = append(n.Pods, fmt.Sprintf("ns/pod-%d", i))
	}
	got, err := tmpl.Render(n)
	if !errors.Is(err, errTooLarge) || got != nil {
		t.Fatalf("got %d bytes, %v; want errTooLarge", len(got), err)
	}
	n.Pods = n.Pods[:500]
	got, err = tmpl.Render(n)
	if err != nil || len(got) != 500*200 {
		t.Fatalf("got %d bytes, %v; want 100000 bytes", len(got), err)
	}
}

// The step limit is per render: renders after a big one start from zero, also concurrently.
func TestStepsCountedPerRender(t *testing.T) {
	tmpl, err := ParseTemplate(`{{ range .Pods }}.{{ end }}`)
	if err != nil {
		t.Fatal(err)
	}
	n := notification()
	n.Pods = make([]string, maxSteps-1)
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			_, err := tmpl.Render(n)
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// .JSON lets a custom template build any JSON shape safely, lists and maps included.
func TestJSONMethodBuildsValidBodies(t *testing.T) {
	tmpl, err := ParseTemplate(`{"blocks":[{"type":"section","text":{"type":"mrkdwn","text":{{ $.JSON (printf "*%s* on %s" .Kind .NodeName) }}}}],` +
		`"pods":[{{ range $i, $p := .Pods }}{{ if $i }},{{ end }}{{ $.JSON $p }}{{ end }}],"labels":{{ $.JSON .NodeLabels }},"start":{{ $.JSON .StartTime }}}`)
	if err != nil {
		t.Fatal(err)
	}
	n := notification()
	n.NodeName = "node \"one\"\n"
	n.Pods = []string{`ns/"quoted"`, "ns/back\\slash", "ns/\x01ctl"}
	n.NodeLabels = map[string]string{`k"ey`: "v\nal"}
	body, err := tmpl.Render(n)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Pods   []string
		Labels map[string]string
		Start  time.Time
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("%v\n%s", err, body)
	}
	if !slices.Equal(got.Pods, n.Pods) || got.Labels[`k"ey`] != "v\nal" || !got.Start.Equal(n.StartTime) {
		t.Errorf("decoded %+v from %s", got, body)
	}
}

// chain defines t0 calling t1 ... calling t(n-1).
func chain(n int) string {
	var b strings.Builder
	for i := range n - 1 {
		fmt.Fprintf(&b, `{{ define "t%d" }}{{ template "t%d" }}{{ end }}`, i, i+1)
	}
	fmt.Fprintf(&b, `{{ define "t%d" }}end{{ end }}{{ template "t0" }}`, n-1)
	return b.String()
}

func TestNestingWithinTheLimitRenders(t *testing.T) {
	for _, text := range []string{chain(45), strings.Repeat("{{ range 1 }}", 40) + "x" + strings.Repeat("{{ end }}", 40)} {
		tmpl, err := ParseTemplate(text)
		if err != nil {
			t.Fatalf("%.60s...: %v", text, err)
		}
		n := notification()
		n.Pods = []string{"one"}
		if got, err := tmpl.Render(n); err != nil || len(got) == 0 {
			t.Fatalf("got %q, %v", got, err)
		}
	}
}

// An index at a list's length is an error, as in text/template, not a fault: a template that
// indexes the data it is given must never stop the process.
func TestIndexAtLengthIsAnError(t *testing.T) {
	tmpl, err := ParseTemplate(`{{index .Pods 0}}`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tmpl.Render(Notification{}); err == nil || !strings.Contains(err.Error(), "index out of range: 0") {
		t.Errorf("index of an empty list: %v", err)
	}
}

// Every field of a notification reads as reflection reads it.
func TestNotificationFieldsAllRead(t *testing.T) {
	n := notification()
	v := reflect.ValueOf(n)
	for i := range v.NumField() {
		name := v.Type().Field(i).Name
		got, ok := notificationField(&n, name)
		if !ok || !reflect.DeepEqual(got, v.Field(i).Interface()) {
			t.Errorf("%s: %v, %v; want %v", name, got, ok, v.Field(i).Interface())
		}
	}
	if _, ok := notificationField(&n, "JSON"); ok {
		t.Error("JSON is a method, not a field")
	}
}

// The largest notification sets every field, as long as the field can be.
func TestWorstCaseNotificationIsFull(t *testing.T) {
	n := worstCaseNotification()
	v := reflect.ValueOf(n)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Errorf("%s is not set", v.Type().Field(i).Name)
		}
	}
	if len(n.Pods) != worstPods || len(n.NodeLabels) != worstLabels || len(n.Description) != worstDescription {
		t.Errorf("%d pods, %d labels, a %d-byte description", len(n.Pods), len(n.NodeLabels), len(n.Description))
	}
	if len(n.NodeName) != 253 || len(n.EventID) != 63 || len(n.Pods[0]) != 63+1+63 || len(n.AutoScalingGroupName) != 255 {
		t.Errorf("node %d, event %d, pod %d, group %d bytes", len(n.NodeName), len(n.EventID), len(n.Pods[0]), len(n.AutoScalingGroupName))
	}
	for k, v := range n.NodeLabels {
		if len(k) != 63+1+63 || len(v) != 63 {
			t.Errorf("label %d=%d bytes", len(k), len(v))
		}
	}
	if got := withPlacement(Notification{ProviderID: n.ProviderID}); got.AvailabilityZone != n.AvailabilityZone || got.Region != n.Region {
		t.Errorf("zone %q and region %q do not follow from %q", n.AvailabilityZone, n.Region, n.ProviderID)
	}
}

// A render leaves the caller's notification as it was: sortAlpha sorts its list in place, and
// the caller's pods keep their order.
func TestRenderLeavesTheNotificationAlone(t *testing.T) {
	tmpl, err := ParseTemplate(`{{ sortAlpha .Pods | join "," }}`)
	if err != nil {
		t.Fatal(err)
	}
	n := Notification{Pods: []string{"b/2", "a/1"}}
	out, err := tmpl.Render(n)
	if err != nil || string(out) != "a/1,b/2" {
		t.Fatalf("rendered %q, %v", out, err)
	}
	if n.Pods[0] != "b/2" {
		t.Errorf("the caller's pods were reordered: %v", n.Pods)
	}
}
