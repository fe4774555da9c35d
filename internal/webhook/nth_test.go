// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"context"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/test/nth"
)

// stringConstants are the string constants declared in the Go files under dir, by name.
func stringConstants(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			g, ok := decl.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, v := range vs.Values {
					if lit, ok := v.(*ast.BasicLit); ok && lit.Kind == token.STRING {
						s, err := strconv.Unquote(lit.Value)
						if err != nil {
							return err
						}
						out[vs.Names[i].Name] = s
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestNTHKindsAreNTHs holds WEBHOOK_NTH_KINDS to NTH's own constants (pkg/monitor): every
// Lifeboat kind has an NTH kind, and every NTH name Lifeboat gives a template is one NTH
// declares.
// nthKindName is the shape of NTH's kind and monitor names among its package's constants.
var nthKindName = regexp.MustCompile(`^[A-Z]+(_[A-Z]+)+$`)

// nthNotGiven are NTH kinds no Lifeboat notice is named after, with why.
var nthNotGiven = map[string]string{
	"SQS_TERMINATE": "NTH's catch-all for a queue termination; every Lifeboat notice has a kind of its own",
}

func TestNTHKindsAreNTHs(t *testing.T) {
	declared := map[string]bool{}
	for _, v := range stringConstants(t, filepath.Join(nth.Dir(t), "pkg", "monitor")) {
		declared[v] = true
	}
	// Every NTH name given is NTH's, and every kind NTH declares is some Lifeboat kind's
	// (kinds NTH never reads, such as Capacity Block expirations, keep Lifeboat's own name).
	given := map[string]bool{}
	for _, k := range notice.Kinds() {
		if rules, _ := notice.RulesOf(k); rules.NTHKind != "" {
			given[rules.NTHKind] = true
			if !declared[rules.NTHKind] {
				t.Errorf("%q -> %q: NTH declares no such kind", k, rules.NTHKind)
			}
		}
	}
	for name := range declared {
		if nthKindName.MatchString(name) && !strings.HasSuffix(name, "_MONITOR") && !given[name] && nthNotGiven[name] == "" {
			t.Errorf("NTH declares kind %q, which no Lifeboat kind gives templates", name)
		}
	}
	for kind, monitor := range nthIMDSMonitors {
		if !declared[kind] || !declared[monitor] {
			t.Errorf("%s / %s: not both declared by NTH", kind, monitor)
		}
	}
	if !declared["SQS_MONITOR"] {
		t.Error("NTH declares no SQS_MONITOR")
	}

	for _, tc := range []struct{ kind, monitor, wantKind, wantMonitor string }{
		{"spot-interruption", "imds", "SPOT_ITN", "SPOT_ITN_MONITOR"},
		{"spot-interruption", "queue", "SPOT_ITN", "SQS_MONITOR"},
		{"scheduled-maintenance", "imds", "SCHEDULED_EVENT", "SCHEDULED_EVENT_MONITOR"},
		{"asg-termination", "queue", "ASG_LIFECYCLE", "SQS_MONITOR"},
		{"state-change", "queue", "STATE_CHANGE", "SQS_MONITOR"},
		{"something-new", "queue", "something-new", "queue"},
	} {
		got := asNTH(Notification{Kind: tc.kind, Monitor: tc.monitor})
		if got.Kind != tc.wantKind || got.Monitor != tc.wantMonitor {
			t.Errorf("%s from %s: %s / %s, want %s / %s", tc.kind, tc.monitor, got.Kind, got.Monitor, tc.wantKind, tc.wantMonitor)
		}
	}
}

// nthTemplates are the webhook templates NTH ships as examples: its default, the one its
// unit tests render, and the ones its end-to-end tests install (from shell, unescaped here).
func nthTemplates(t *testing.T) map[string]string {
	t.Helper()
	dir := nth.Dir(t)
	out := map[string]string{
		"default (pkg/config)":           stringConstants(t, filepath.Join(dir, "pkg", "config"))["webhookTemplateDefault"],
		"unit test (pkg/webhook)":        stringConstants(t, filepath.Join(dir, "pkg", "webhook"))["testWebhookTemplate"],
		"end-to-end test (webhook-test)": "",
	}
	script, err := os.ReadFile(filepath.Join(dir, "test", "e2e", "webhook-test"))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(script)) {
		_, rest, ok := strings.Cut(line, `--set webhookTemplate="`)
		if !ok {
			continue
		}
		rest = rest[:strings.LastIndex(rest, `"`)]
		out["end-to-end test (webhook-test)"] = strings.NewReplacer(`\{`, "{", `\}`, "}", `\"`, `"`, `\.`, ".").Replace(rest)
	}
	for name, text := range out {
		if text == "" {
			t.Fatalf("NTH's %s template not found in its source", name)
		}
	}
	return out
}

// TestNTHTemplatesRender sends NTH's example templates with WEBHOOK_NTH_KINDS: each parses,
// renders valid JSON with NTH's kind name, and the fields NTH filled from instance metadata
// that Lifeboat has (zone, region) are there.
func TestNTHTemplatesRender(t *testing.T) {
	for name, text := range nthTemplates(t) {
		t.Run(name, func(t *testing.T) {
			rec, srv := endpoint(t, statuses(200))
			s, err := New(Settings{URL: srv.URL, Template: text, NTHKinds: true}, fast(Options{}))
			if err != nil {
				t.Fatalf("%v\ntemplate: %s", err, text)
			}
			n := notification()
			n.Monitor = "queue"
			n.AvailabilityZone, n.Region = "", ""
			if err := s.Send(context.Background(), n); err != nil {
				t.Fatal(err)
			}
			body := rec.bodies[0]
			if !json.Valid([]byte(body)) {
				t.Errorf("body is not JSON: %s", body)
			}
			if !strings.Contains(strings.ToUpper(body), "SPOT_ITN") {
				t.Errorf("body has no NTH kind SPOT_ITN: %s", body)
			}
			if strings.Contains(text, ".AvailabilityZone") && !strings.Contains(body, "AvailabilityZone: us-east-1a") {
				t.Errorf("body lacks the zone from the providerID: %s", body)
			}
		})
	}
}

// TestLifeboatKindsByDefault: without WEBHOOK_NTH_KINDS a template sees Lifeboat's names.
func TestLifeboatKindsByDefault(t *testing.T) {
	rec, srv := endpoint(t, statuses(200))
	s, err := New(Settings{URL: srv.URL, Template: `{{ .Kind }} {{ .Monitor }} {{ .Region }}`}, fast(Options{}))
	if err != nil {
		t.Fatal(err)
	}
	n := notification()
	n.Region = ""
	if err := s.Send(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	if got, want := rec.bodies[0], "spot-interruption imds us-east-1"; got != want {
		t.Errorf("body %q, want %q", got, want)
	}
}

func TestRegionOf(t *testing.T) {
	for zone, want := range map[string]string{
		"us-east-1a": "us-east-1", "eu-west-3c": "eu-west-3", "us-east-1-bos-1a": "us-east-1",
		"ap-southeast-2b": "ap-southeast-2", "nonsense": "", "a-b-c": "",
	} {
		if got := regionOf(zone); got != want {
			t.Errorf("regionOf(%q) = %q, want %q", zone, got, want)
		}
	}
}

// TestTemplatesCannotReadTheProcess: functions that would read the environment, files or
// the network are refused when the template is parsed, naming the function and why.
func TestTemplatesCannotReadTheProcess(t *testing.T) {
	t.Setenv("AWS_SECRET_ACCESS_KEY", "do-not-leak")
	for _, tc := range []struct{ text, want string }{
		{`{{ env "AWS_SECRET_ACCESS_KEY" }}`, `function "env" is not available in webhook templates: it reads the process's environment`},
		{`{{ expandenv "$AWS_SECRET_ACCESS_KEY" }}`, `function "expandenv" is not available in webhook templates: it reads the process's environment`},
		{`{{ getHostByName "example.com" }}`, `function "getHostByName" is not available in webhook templates: it queries DNS`},
		{`{{ now }}`, `function "now" is not available in webhook templates`},
		{`{{ genPrivateKey "rsa" }}`, `function "genPrivateKey" is not available in webhook templates`},
		{`{{ readFile "/etc/passwd" }}`, `function "readFile" not defined`},
	} {
		_, err := ParseTemplate(tc.text)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "WEBHOOK_TEMPLATE: ") {
			t.Errorf("%s: error %v, want one naming WEBHOOK_TEMPLATE and %q", tc.text, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "do-not-leak") {
			t.Errorf("%s: the error shows the secret: %v", tc.text, err)
		}
	}
}

// TestSprigFunctions renders templates that use sprig as NTH's users write them, and the
// bounds that keep one call from allocating without limit.
func TestSprigFunctions(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{`{{ .Kind | upper }} {{ .EventID | trimPrefix "spot-" }}`, "SPOT-INTERRUPTION i-0abc"},
		{`{{ join ", " .Pods }}`, "default/web-1, kube-system/dns-2"},
		{`{{ default "no group" .AutoScalingGroupName }}|{{ default "none" "" }}`, "workers|none"},
		{`{{ toJson .Pods }}`, `["default/web-1","kube-system/dns-2"]`},
		{`{{ index .NodeLabels "team" | quote }}`, `"infra"`},
		{`{{ $d := dict "k" .Kind }}{{ $d.k }} {{ len (list 1 2 3) }}`, "spot-interruption 3"},
		{`{{ slice .EventID 0 4 }}`, "spot"},
	} {
		tmpl, err := ParseTemplate(tc.text)
		if err != nil {
			t.Errorf("%s: %v", tc.text, err)
			continue
		}
		got, err := tmpl.Render(notification())
		if err != nil || string(got) != tc.want {
			t.Errorf("%s: %q, %v; want %q", tc.text, got, err, tc.want)
		}
	}
	for text, want := range map[string]string{
		`{{ repeat 1000000 "abc" }}`: "output would be 3000000 bytes, more than the limit of 131072", `{{ until 100000000 }}`: "more than 10000 numbers",
		`{{ indent 1000000000 "x" }}`: "output would be 1000000001 bytes, more than the limit", `{{ seq 1 100000000 }}`: "more than 10000 numbers",
		// Structures that double by sharing themselves: each call is cheap, printing one is not.
		`{{ $l := list 1 }}{{ range 60 }}{{ $l = list $l $l }}{{ end }}{{ toJson $l }}`:      "error calling list: output would be more than the limit",
		`{{ $l := list 1 }}{{ range 60 }}{{ $l = concat $l $l }}{{ end }}{{ len $l }}`:       "error calling concat: output would be more than the limit",
		`{{ $d := dict "a" 1 }}{{ range 60 }}{{ $d = dict "x" $d "y" $d }}{{ end }}{{ $d }}`: "error calling dict: output would be more than the limit",
	} {
		if _, err := ParseTemplate(text); err == nil || !strings.Contains(err.Error(), "WEBHOOK_TEMPLATE") || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error saying %q", text, err, want)
		}
	}
}
