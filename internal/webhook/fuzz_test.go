// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"encoding/json"
	"errors"
	"fmt"
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

// memorySeeds ask for far more than a body may hold, each in its own way.
var memorySeeds = []string{
	`{{ indent 131072 (repeat 131072 "\n") }}`,
	`{{ if ne .Description "sample notification" }}{{ indent 131072 (repeat 131072 "\n") }}{{ end }}`,
	guardedTemplate,
	`{{ nindent 99999 (repeat 99999 "\n") }}`,
	`{{ replace "" (repeat 9000 "x") (repeat 90000 "a") }}`,
	`{{ regexReplaceAll "" (repeat 90000 "a") (repeat 99 "$0") }}`,
	`{{ regexReplaceAllLiteral "a*" (repeat 90000 "b") (repeat 9000 "x") }}`,
	`{{ join (repeat 1000 ",") (until 9000) }}`,
	`{{ wrapWith 1 (repeat 1000 "-") (repeat 90000 "a") }}`,
	`{{ printf "%999999999d" 1 }}{{ printf "%*d" 999999 1 }}{{ printf "%.999999f" 1.5 }}`,
	`{{ printf "%100000v" (until 9000) }}{{ printf "%[1]*[2]v" 100000 (list 1 2 3) }}`,
	`{{ $s := repeat 80000 "x" }}{{ print $s $s }}{{ cat $s $s }}{{ quote $s $s }}{{ list $s $s }}{{ dict "a" $s "b" $s }}`,
	`{{ $s := repeat 80000 "<" }}{{ html $s }}{{ js $s }}{{ urlquery $s }}{{ toJson $s }}`,
	`{{ $l := list 1 }}{{ range 60 }}{{ $l = concat $l $l }}{{ end }}{{ len $l }}`,
	`{{ $l := list }}{{ range 9000 }}{{ $l = list $l }}{{ end }}{{ toPrettyJson $l }}`,
	`{{ range 9999 }}{{ $x := repeat 100000 "x" }}{{ end }}`,
	`{{ range 9999 }}{{ $x := regexFindAll "x*" (repeat 100000 "a") -1 }}{{ end }}`,
	`{{ range .Pods }}{{ printf "%1000s" . }}{{ end }}{{ range $k, $v := .NodeLabels }}{{ repeat 1000 $v }}{{ end }}`,
	`{{ range 9999 }}{{ splitList "" $.Description }}{{ split "," $.Description }}{{ end }}`,
	`{{ $d := dict }}{{ $_ := set $d "self" $d }}{{ toJson $d }}`,
}

// FuzzTemplateMemory renders arbitrary templates, with arbitrary descriptions and up to a
// thousand pods, under a memory ceiling: a render fails or writes at most MaxBodyBytes, and
// allocates at most allocCeiling (ParseTemplate's two start-up renders, twice that).
func FuzzTemplateMemory(f *testing.F) {
	for _, seed := range append(memorySeeds, differentialSeeds...) {
		f.Add(seed, "a description", uint16(3))
	}
	f.Fuzz(func(t *testing.T, text, description string, pods uint16) {
		n := notification()
		n.Description = description
		for i := range min(int(pods), 1000) {
			n.Pods = append(n.Pods, fmt.Sprintf("namespace/pod-%d", i))
		}
		var tmpl *Template
		var err error
		if a := allocated(func() { tmpl, err = ParseTemplate(text) }); a > 2*allocCeiling {
			t.Fatalf("parsing allocated %d MiB", a>>20)
		}
		if err != nil {
			return
		}
		var body []byte
		if a := allocated(func() { body, err = tmpl.Render(n) }); a > allocCeiling {
			t.Fatalf("rendering allocated %d MiB", a>>20)
		}
		if err == nil && len(body) > MaxBodyBytes {
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
	// sprig's functions, as NTH's templates use them, and their results in Go's built-ins.
	`{{ .EventID | trimPrefix "spot-" }} {{ .Kind | lower }} {{ upper .Kind }} {{ title .Description }} {{ .Description | quote }} {{ squote .Kind }}`,
	`{{ join "," .Pods }} {{ .Pods | join ";" }} {{ toJson . }} {{ toJson .NodeLabels }} {{ toPrettyJson .Pods }} {{ toRawJson .Description }}`,
	`{{ default "none" .AutoScalingGroupName }} {{ default "none" "" }} {{ coalesce "" .Kind }} {{ empty .Pods }} {{ ternary "yes" "no" (eq .Kind "x") }}`,
	`{{ trunc 5 .NodeName }} {{ substr 1 4 .EventID }} {{ replace "-" "_" .EventID }} {{ contains "spot" .Kind }} {{ hasPrefix "i-" .InstanceID }} {{ nospace " a b " }}`,
	`{{ $l := list 1 "a" 2.5 nil }}{{ $l }} {{ len $l }} {{ index $l 1 }} {{ index $l 3 }} {{ slice $l 1 3 }} {{ first $l }} {{ last $l }} {{ rest $l }}`,
	`{{ range $i, $v := list 3 1 2 }}{{ $i }}:{{ $v }} {{ end }}{{ range until 3 }}{{ . }}{{ end }}{{ range untilStep 0 10 4 }}{{ . }}{{ end }} {{ seq 3 }}`,
	`{{ $d := dict "b" 2 "a" 1 "c" (list 1 2) }}{{ $d }} {{ $d.a }} {{ index $d "b" }} {{ index $d "zz" }} {{ range $k, $v := $d }}{{ $k }}={{ $v }};{{ end }} {{ keys $d | sortAlpha }} {{ hasKey $d "a" }}`,
	`{{ $d := dict "a" 1 }}{{ $d.nope }}`,
	`{{ eq (len (list 1 2)) 2 }} {{ eq (add 1 2) 3 }} {{ lt (add1 1) 3 }} {{ eq (atoi "7") 7 }} {{ eq (int64 7) 7 }} {{ gt (len .Pods) (int64 1) }} {{ eq (list) nil }}`,
	`{{ add 1 2 }} {{ sub 5 3 }} {{ mul 2 3 }} {{ div 7 2 }} {{ mod 7 2 }} {{ max 1 5 3 }} {{ min 4 2 }} {{ addf 1.5 2 }} {{ round 2.456 2 }} {{ floor 1.5 }} {{ ceil 1.2 }}`,
	`{{ splitList "/" .ProviderID }} {{ (split "/" .ProviderID)._3 }} {{ splitn "-" 2 .EventID }} {{ regexReplaceAll "[0-9]" .EventID "#" }} {{ regexMatch "^i-" .InstanceID }} {{ b64enc .Kind }} {{ b64enc .Kind | b64dec }} {{ sha256sum .Kind }}`,
	`{{ .StartTime | toString }} {{ toStrings (list 1 2) }} {{ indent 2 .Description }} {{ nindent 2 "x" }} {{ repeat 3 "ab" }} {{ wrap 5 .Description }} {{ abbrev 6 .Description }}`,
	`{{ if has "default/web-1" .Pods }}has{{ end }} {{ without .Pods "default/web-1" }} {{ uniq (list 1 1 2) }} {{ reverse .Pods }} {{ compact (list 0 1 "" "a") }} {{ append .Pods "x" }} {{ concat .Pods (list "y") }}`,
	`{{ typeOf .Pods }} {{ kindOf .NodeLabels }} {{ kindIs "slice" .Pods }} {{ typeIs "string" .Kind }} {{ deepEqual .Pods .Pods }} {{ semverCompare ">=1.2" "1.3.0" }}`,
	`{{ (semver "1.2.3").Major }}`,
	`{{ fail "stop" }}`,
	`{{ atoi "x" | add 1 }} {{ 3 | add 1 }} {{ "a" | upper | repeat 2 }} {{ list 1 2 | join "-" }}`,
	`{{ upper 1 }}`,
	`{{ trunc "a" "b" }}`,
	`{{ until 99999999 }}`,
	`{{ repeat 99999999 "x" }}`,
	`{{ repeat -1 "x" }}`,
	`{{ get (dict "a" 1) "a" }} {{ pluck "a" (dict "a" 1) (dict "a" 2) }} {{ dig "a" "b" "none" (dict "a" (dict "b" 2)) }} {{ merge (dict "a" 1) (dict "b" 2) }}`,
	`{{ range (dict) }}x{{ else }}empty{{ end }} {{ with (list) }}x{{ else }}empty{{ end }} {{ if (dict "a" 1) }}dict{{ end }} {{ not (list) }}`,
}

// FuzzEvaluatorMatchesTextTemplate holds the evaluator to text/template: on any template
// and data, both render the same text or both fail, with sprig's functions offered to both.
// The evaluator may fail where text/template would not only by its limits (steps, size of a
// body or of a function's result, the render's budget) or on a method it does not offer.
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
		std, stdErr := template.New(templateName).Option("missingkey=error").Funcs(FuncMap()).Parse(text)
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
		case errors.Is(oursErr, errTooMuch), errors.Is(oursErr, errTooLarge), errors.Is(oursErr, errTooBusy),
			strings.Contains(oursErr.Error(), "more than the limit of"),
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
