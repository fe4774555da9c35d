package webhook

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"text/template"
	"text/template/parse"
)

// FuzzTemplate parses arbitrary template text and renders it with a notification whose
// strings are arbitrary too: no panic, no error without WEBHOOK_TEMPLATE in it, never more
// than MaxBodyBytes; and the default template stays valid JSON whatever the values.
func FuzzTemplate(f *testing.F) {
	for _, seed := range []string{
		DefaultTemplate,
		`{"text":"{{ .EventID }} {{ .Kind }} {{ .NodeName }} {{ .StartTime }}"}`,
		`{{ range .Pods }}{{ . }},{{ end }}{{ range $k, $v := .NodeLabels }}{{ $k }}={{ $v }}{{ end }}`,
		`{{ .NodeLabels.team }}{{ index .NodeLabels "x" }}{{ $.JSON .Pods }}`,
		`{{ define "a" }}{{ template "a" . }}{{ end }}{{ template "a" . }}`,
		`{{ range 100 }}{{ printf "%2000s" "" }}{{ end }}`,
		`{{ range .StartTime.Unix }}{{ end }}`,
		`{{ env "HOME" }}`,
		`{{ if .Pods }}{{ len .Pods }}{{ else }}none{{ end }}{{ with .Description }}{{ . | printf "%q" }}{{ end }}`,
	} {
		f.Add(seed, `say "hi"`+"\n", "default/pod-0")
	}
	def, err := ParseTemplate(DefaultTemplate)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, text, value, pod string) {
		n := notification()
		n.Description, n.NodeName, n.EventID = value, value, value
		n.Pods = append(n.Pods, pod)
		n.NodeLabels = map[string]string{value: pod}

		body, err := def.Render(n)
		if err != nil || !json.Valid(body) {
			t.Fatalf("default template: %v\n%q", err, body)
		}

		tmpl, err := ParseTemplate(text)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "WEBHOOK_TEMPLATE: ") {
				t.Fatalf("error %q does not name WEBHOOK_TEMPLATE", err)
			}
			return
		}
		body, err = tmpl.Render(n)
		switch {
		case err != nil && !strings.HasPrefix(err.Error(), "WEBHOOK_TEMPLATE: "):
			t.Fatalf("error %q does not name WEBHOOK_TEMPLATE", err)
		case err != nil && body != nil:
			t.Fatalf("error %v with a %d-byte body", err, len(body))
		case len(body) > MaxBodyBytes:
			t.Fatalf("rendered %d bytes, bound is %d", len(body), MaxBodyBytes)
		}
	})
}

// differentialSeeds exercise every construct the evaluator handles; as fuzz seeds they also
// run in every go test.
var differentialSeeds = []string{
	DefaultTemplate,
	`{{ .EventID }} {{ .Kind }} {{ .Monitor }} {{ .State }} {{ .ProviderID }} {{ .InstanceType }} {{ .AutoScalingGroupName }}`,
	`{{ . }}|{{ .Pods }}|{{ .NodeLabels }}|{{ .StartTime }}|{{ .EndTime.UTC }}`,
	`{{ .StartTime.Format "2006-01-02T15:04:05Z07:00" }} {{ .StartTime.Unix }} {{ .EndTime.UnixMilli }} {{ .StartTime.IsZero }}`,
	`{{ .StartTime.Year }}-{{ .StartTime.YearDay }} {{ .StartTime.Hour }}:{{ .StartTime.Minute }}:{{ .StartTime.Second }} {{ .StartTime.Day }} {{ .StartTime.String }}`,
	`{{ range .Pods }}{{ . }},{{ else }}none{{ end }}{{ range $i, $p := .Pods }}{{ $i }}={{ $p }};{{ end }}`,
	`{{ range $k, $v := .NodeLabels }}{{ $k }}={{ $v }}{{ end }}{{ range .NodeLabels }}[{{ . }}]{{ end }}`,
	`{{ range $i, $p := .Pods }}{{ if eq $i 1 }}{{ break }}{{ end }}{{ if not $i }}{{ continue }}{{ end }}{{ $p }}{{ end }}`,
	`{{ range 3 }}{{ . }}{{ end }}{{ range $n := 2 }}{{ $n }}{{ end }}{{ range 0 }}x{{ else }}empty{{ end }}`,
	`{{ range .StartTime.Minute }}{{ printf "%T" . }}{{ end }}`,
	`{{ $x := .Kind }}{{ $x }}{{ $x = "changed" }}{{ $x }}{{ with $y := .Pods }}{{ len $y }}{{ end }}`,
	`{{ if .Pods }}{{ len .Pods }}{{ else if .NodeLabels }}labels{{ else }}none{{ end }}`,
	`{{ with .Description }}{{ . | printf "%q" }}{{ else with .Kind }}{{ . }}{{ else }}nothing{{ end }}`,
	`{{ .NodeLabels.team }}{{ index .NodeLabels "x" }}{{ index .Pods 0 }}{{ index .EventID 1 }}{{ $.JSON .Pods }}`,
	`{{ slice .Pods 1 }}{{ slice .EventID 1 3 }}{{ slice .Pods 0 1 2 }}{{ slice .EventID }}`,
	`{{ .JSON .NodeLabels }}{{ .JSON .StartTime }}{{ .JSON 3 }}{{ .JSON nil }}{{ .Kind | .JSON }}`,
	`{{ and .Pods .Kind }}|{{ or "" .Kind }}|{{ and 0 (index .Pods 5) }}|{{ or 1 (index .Pods 5) }}|{{ .Kind | and 1 }}|{{ not .Pods }}`,
	`{{ eq .Kind "spot-interruption" "x" }} {{ ne 1 2 }} {{ lt 1 2 }} {{ le 2 2 }} {{ gt "b" "a" }} {{ ge 1.5 2.5 }} {{ eq .StartTime .StartTime }}`,
	`{{ eq (len .Pods) 2 }} {{ lt (index .EventID 0) 200 }} {{ eq .StartTime.Unix 1741064767 }} {{ gt .StartTime.Unix (len .Pods) }}`,
	`{{ eq 1 1.0 }}`,
	`{{ eq .Pods .Pods }}`,
	`{{ lt true false }}`,
	`{{ eq "a" 1 }}`,
	`{{ print 1 2.5 "s" true 'a' 0x1F 1e3 }}{{ println .Kind 3 }}{{ printf "%d-%s-%v" 1 "a" .Pods }}`,
	`{{ html "<a href='x'>&</a>" }}{{ js "it's \"q\"" }}{{ urlquery "a b&c" }}{{ .Description | html }}`,
	`{{ define "row" }}<{{ . }}>{{ end }}{{ range .Pods }}{{ template "row" . }}{{ end }}{{ template "row" }}`,
	`{{ block "b" .Kind }}[{{ . }}]{{ end }}{{ template "b" .EventID }}`,
	`{{ define "x" }}{{ $ }}{{ end }}{{ template "x" .Pods }}`,
	`{{ template "missing" }}`,
	`{{ (.StartTime).Unix }} {{ (index .Pods 1) }} {{ (.NodeLabels).team }}`,
	`{{ len .Kind }}{{ len .NodeLabels }}`,
	`{{ len 3 }}`,
	`{{ .Nope }}`,
	`{{ .Kind.Nope }}`,
	`{{ .Kind 1 }}`,
	`{{ .NodeLabels.team 1 }}`,
	`{{ .StartTime.Format 1 }}`,
	`{{ .StartTime.Format }}`,
	`{{ printf 1 }}`,
	`{{ index .Pods 9 }}`,
	`{{ index .NodeLabels 1 }}`,
	`{{ slice .Pods 2 1 }}`,
	`{{ call .Kind }}`,
	`{{ nil }}`,
	`{{ 1 2 }}`,
	`{{ "a" | "b" }}`,
	`{{ 99999999999999999999 }}`,
	`{{ 1i }} {{ 2.0 }} {{ -3 }} {{ 0o17 }} {{ 0b101 }} {{ 1_000 }}`,
	`{{ range .Kind }}{{ end }}`,
	`{{ range $k, $v := 3 }}{{ end }}`,
	`{{ $.Pods }}{{ $.NodeLabels.team }}{{ $.StartTime.Unix }}`,
	`{{/* comment */}}{{- .Kind -}}  {{ "x" }}`,
	// Found by review: nil as an argument, structs of two types, break in an inner range's
	// else, and assignment to a declaration that and/or skipped.
	`{{ eq nil 1 }} {{ eq nil nil }} {{ ne nil 1 }} {{ not nil }} {{ and nil 1 }} {{ or nil "x" }}`,
	`{{ if eq .Pods nil }}no pods{{ else }}pods{{ end }} {{ if eq nil .NodeLabels }}no labels{{ end }}`,
	`{{ eq . .StartTime }} {{ ne . .StartTime }}`,
	`{{ eq .StartTime . }}`,
	`{{ range .Pods }}{{ range 0 }}{{ else }}a{{ break }}b{{ end }}x{{ end }}`,
	`{{ range .Pods }}{{ range 0 }}{{ else }}a{{ continue }}b{{ end }}x{{ end }}`,
	`{{ or 1 ($x := 2) }}{{ $x = 3 }}ok`,
	`{{ and 0 ($x := 2) }}{{ range $x = .Pods }}{{ end }}`,
}

// FuzzEvaluatorMatchesTextTemplate holds the evaluator to text/template: on any template
// and data, both render the same text or both fail. The evaluator may fail where
// text/template would not only by its limits (steps, size) or on a time.Time method it
// does not offer.
func FuzzEvaluatorMatchesTextTemplate(f *testing.F) {
	for _, seed := range differentialSeeds {
		f.Add(seed, "team", "ns/pod-9", false)
		f.Add(seed, "team", "ns/pod-9", true)
	}
	f.Fuzz(func(t *testing.T, text, value, pod string, nilCollections bool) {
		n := notification()
		n.Description, n.Kind = value, value
		n.Pods = append(n.Pods, pod)
		n.NodeLabels[value] = pod
		if nilCollections {
			n.Pods, n.NodeLabels = nil, nil
		}

		trees, err := parse.Parse(templateName, text, "", "", functionNames())
		std, stdErr := template.New(templateName).Option("missingkey=error").Parse(text)
		if (err == nil) != (stdErr == nil) {
			t.Fatalf("parsers disagree: evaluator's %v, text/template's %v", err, stdErr)
		}
		if err != nil || limitNesting(trees) != nil {
			return // recursion is rejected before any render
		}
		ours := &boundedBuffer{max: MaxBodyBytes}
		oursErr := execute(trees, templateName, ours, n, false)
		switch {
		case oursErr == nil:
		case errors.Is(oursErr, errTooMuch), errors.Is(oursErr, errTooLarge),
			strings.Contains(oursErr.Error(), "not available in webhook templates"):
			return
		case strings.Contains(text, "range"):
			return // text/template has no step limit: it might not end
		}
		theirs := &boundedBuffer{max: MaxBodyBytes}
		theirsErr := std.Execute(theirs, n)
		switch {
		case oursErr == nil && theirsErr != nil:
			t.Fatalf("evaluator rendered %q; text/template failed: %v", ours.b.String(), theirsErr)
		case oursErr != nil && theirsErr == nil:
			t.Fatalf("evaluator failed: %v; text/template rendered %q", oursErr, theirs.b.String())
		case oursErr == nil && ours.b.String() != theirs.b.String():
			t.Fatalf("outputs differ\nevaluator:     %q\ntext/template: %q", ours.b.String(), theirs.b.String())
		}
	})
}
