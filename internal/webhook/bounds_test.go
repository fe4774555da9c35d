// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"runtime"
	"strings"
	"testing"
)

// allocated runs f and returns the bytes it allocated.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// big is a template variable holding a string of most of a body: two of them do not fit.
const big = `{{ $s := repeat 80000 "x" }}`

// Each function whose result can be far larger than its arguments is refused before it runs
// when it would make more than a body may hold, and the error names it; within the limit it
// does what it always did.
func TestGrowthRefusedBeforeAllocating(t *testing.T) {
	tests := []struct {
		fn, huge, normal, want string
	}{
		{"repeat", `{{ repeat 99999999 "ab" }}`, `{{ repeat 3 "ab" }}`, "ababab"},
		{"indent", `{{ indent 131072 (repeat 131072 "\n") }}`, `{{ indent 2 "a\nb" }}`, "  a\n  b"},
		{"nindent", `{{ nindent 131072 (repeat 131072 "\n") }}`, `{{ nindent 2 "a" }}`, "\n  a"},
		{"replace", `{{ replace "a" (repeat 9000 "x") (repeat 90000 "a") }}`, `{{ replace "-" "_" "a-b-c" }}`, "a_b_c"},
		{"replace", `{{ replace "" (repeat 9000 "x") (repeat 90000 "a") }}`, `{{ replace "" "." "ab" }}`, ".a.b."},
		{"regexReplaceAll", `{{ regexReplaceAll "a" (repeat 90000 "a") (repeat 9000 "x") }}`, `{{ regexReplaceAll "(b+)" "abbc" "<$1>" }}`, "a<bb>c"},
		{"regexReplaceAll", `{{ regexReplaceAll "a+" (repeat 50000 "a") "$0$0${0}" }}`, `{{ regexReplaceAll "" "ab" "$0." }}`, ".a.b."},
		{"mustRegexReplaceAll", `{{ mustRegexReplaceAll "a" (repeat 90000 "a") (repeat 9000 "x") }}`, `{{ mustRegexReplaceAll "b" "abc" "$0$0" }}`, "abbc"},
		{"regexReplaceAllLiteral", `{{ regexReplaceAllLiteral "a*" (repeat 90000 "b") (repeat 9000 "x") }}`, `{{ regexReplaceAllLiteral "b" "abc" "$1" }}`, "a$1c"},
		{"mustRegexReplaceAllLiteral", `{{ mustRegexReplaceAllLiteral "." (repeat 90000 "b") "xy" }}`, `{{ mustRegexReplaceAllLiteral "b" "abc" "x" }}`, "axc"},
		{"join", `{{ join (repeat 1000 ",") (until 9000) }}`, `{{ join ", " (list 1 "a" nil 2) }}`, "1, a, 2"},
		{"wrapWith", `{{ wrapWith 1 (repeat 1000 "-") (repeat 90000 "a") }}`, `{{ wrapWith 5 "|" "ab cd ef" }}`, "ab cd|ef"},
		{"printf", `{{ printf "%999999999d" 1 }}`, `{{ printf "%5d|%-4s|%.2f" 42 "ab" 3.14159 }}`, "   42|ab  |3.14"},
		{"printf", `{{ printf "%9999d%9999d%9999d%9999d%9999d%9999d%9999d%9999d%9999d%9999d%9999d%9999d%9999d%9999d" 1 1 1 1 1 1 1 1 1 1 1 1 1 1 }}`, `{{ printf "%[1]s-%[1]s" "a" }}`, "a-a"},
		{"printf", `{{ printf "%100000v" (until 9000) }}`, `{{ printf "%3v" (list 1 2) }}`, "[  1   2]"},
		{"printf", `{{ printf "%*d" 1000000 1 }}`, `{{ printf "%*d" 4 1 }}`, "   1"},
		{"printf", `{{ printf "%.999999f" 1.5 }}`, `{{ printf "%.3f" 1.5 }}`, "1.500"},
		{"print", big + `{{ $x := print $s $s }}`, `{{ print "a" 1 2 "b" }}`, "a1 2b"},
		{"println", big + `{{ $x := println $s $s }}`, `{{ println "a" 1 }}`, "a 1\n"},
		{"html", big + `{{ $x := html $s $s }}`, `{{ html "<a>" }}`, "&lt;a&gt;"},
		{"js", big + `{{ $x := js $s $s }}`, `{{ js "it's" }}`, `it\'s`},
		{"urlquery", big + `{{ $x := urlquery $s $s }}`, `{{ urlquery "a b" }}`, "a+b"},
		{"cat", big + `{{ $x := cat $s $s }}`, `{{ cat "a" 1 nil "b" }}`, "a 1 b"},
		{"quote", big + `{{ $x := quote $s $s }}`, `{{ quote "a" 1 }}`, `"a" "1"`},
		{"squote", big + `{{ $x := squote $s $s }}`, `{{ squote "a" 1 }}`, `'a' '1'`},
		{"list", big + `{{ $x := list $s $s }}`, `{{ list 1 "a" }}`, "[1 a]"},
		{"tuple", big + `{{ $x := tuple $s $s }}`, `{{ tuple 1 "a" }}`, "[1 a]"},
		{"dict", big + `{{ $x := dict "a" $s "b" $s }}`, `{{ dict "a" 1 }}`, "map[a:1]"},
		{"append", big + `{{ $x := append (list $s) $s }}`, `{{ append (list 1) 2 }}`, "[1 2]"},
		{"mustPrepend", big + `{{ $x := mustPrepend (list $s) $s }}`, `{{ mustPrepend (list 1) 2 }}`, "[2 1]"},
		{"concat", big + `{{ $l := list $s }}{{ $x := concat $l $l }}`, `{{ concat (list 1) (list 2 3) }}`, "[1 2 3]"},
		{"merge", big + `{{ $x := merge (dict "a" $s) (dict "b" $s) }}`, `{{ merge (dict "a" 1) (dict "b" 2) }}`, "map[a:1 b:2]"},
		{"keys", big + `{{ $d := dict $s 1 }}{{ $x := keys $d $d }}`, `{{ keys (dict "a" 1) }}`, "[a]"},
		{"pluck", big + `{{ $d := dict "k" $s }}{{ $x := pluck "k" $d $d }}`, `{{ pluck "k" (dict "k" 1) (dict "k" 2) }}`, "[1 2]"},
		{"splitList", `{{ $x := splitList "" (repeat 90000 "a") }}`, `{{ splitList "," "a,b" }}`, "[a b]"},
		{"split", `{{ $x := split "," (repeat 90000 ",") }}`, `{{ split "," "a,b" }}`, "map[_0:a _1:b]"},
		{"splitn", `{{ $x := splitn "," 99999 (repeat 90000 ",") }}`, `{{ splitn "," 2 "a,b,c" }}`, "map[_0:a _1:b,c]"},
		{"toPrettyJson", `{{ $l := list }}{{ range 400 }}{{ $l = list $l }}{{ end }}{{ $x := toPrettyJson $l }}`, `{{ toPrettyJson (list 1) }}`, "[\n  1\n]"},
		{"until", `{{ until 99999999 }}`, `{{ until 3 }}`, "[0 1 2]"},
		{"seq", `{{ seq 99999999 }}`, `{{ seq 3 }}`, "1 2 3"},
	}
	for _, tt := range tests {
		t.Run(tt.fn, func(t *testing.T) {
			var err error
			if n := allocated(func() { _, err = ParseTemplate(tt.huge) }); n > allocCeiling {
				t.Errorf("allocated %d MiB before refusing", n>>20)
			}
			if err == nil || !strings.Contains(err.Error(), "error calling "+tt.fn+": ") || !strings.Contains(err.Error(), "more than") {
				t.Errorf("error %.300v; want one naming %s and the limit", err, tt.fn)
			}
			tmpl, err := ParseTemplate(tt.normal)
			if err != nil {
				t.Fatal(err)
			}
			if got, err := tmpl.Render(notification()); err != nil || string(got) != tt.want {
				t.Errorf("%s: got %q, %v; want %q", tt.normal, got, err, tt.want)
			}
		})
	}
}

// Every sprig function a template may call was looked at: its result's size is predicted
// before the call (growth), it is a range bounded in count (bounded), or it makes at most a few
// times what it is given, which the measure of every result after the call then bounds. A
// function added by a sprig upgrade fails here until someone decides which.
func TestEveryFunctionIsBoundedOrAudited(t *testing.T) {
	audited := map[string][]string{
		"a number, a hash, a time or a yes or no": {
			"add", "add1", "add1f", "addf", "adler32sum", "ago", "all", "any", "atoi", "biggest", "ceil",
			"contains", "deepEqual", "div", "divf", "duration", "durationRound", "empty", "fail", "float64",
			"floor", "has", "hasKey", "hasPrefix", "hasSuffix", "hello", "int", "int64", "isAbs", "kindIs",
			"kindOf", "max", "maxf", "min", "minf", "mod", "mul", "mulf", "mustDateModify", "mustHas",
			"mustRegexMatch", "mustToDate", "must_date_modify", "osIsAbs", "randInt", "regexMatch", "round",
			"semver", "semverCompare", "sha1sum", "sha256sum", "sha512sum", "sub", "subf", "toDate",
			"toDecimal", "typeIs", "typeIsLike", "typeOf", "unixEpoch",
		},
		"a part or a rearrangement of what it is given": {
			"abbrev", "abbrevboth", "base", "chunk", "clean", "coalesce", "compact", "deepCopy", "default",
			"dig", "dir", "ext", "first", "get", "initial", "initials", "last", "mustChunk", "mustCompact",
			"mustDeepCopy", "mustFirst", "mustInitial", "mustLast", "mustRegexFind", "mustRegexFindAll",
			"mustRegexSplit", "mustRest", "mustReverse", "mustSlice", "mustUniq", "mustWithout", "nospace",
			"omit", "osBase", "osClean", "osDir", "osExt", "pick", "plural", "regexFind", "regexFindAll",
			"regexSplit", "rest", "reverse", "set", "shuffle", "sortAlpha", "substr", "ternary", "trim",
			"trimAll", "trimPrefix", "trimSuffix", "trimall", "trunc", "uniq", "unset", "urlParse", "values",
			"without", "wrap",
		},
		"a few times what it is given (an encoding, an escaping, a change of case)": {
			"b32dec", "b32enc", "b64dec", "b64enc", "camelcase", "decryptAES", "encryptAES", "fromJson",
			"kebabcase", "lower", "mustFromJson", "mustToJson", "mustToRawJson", "regexQuoteMeta", "snakecase",
			"swapcase", "title", "toJson", "toRawJson", "toString", "toStrings", "untitle", "upper", "urlJoin",
		},
	}
	decided := map[string]string{"until": "bounded", "untilStep": "bounded", "seq": "bounded"}
	for name := range growth {
		decided[name] = "growth"
	}
	for why, names := range audited {
		for _, name := range names {
			if decided[name] != "" {
				t.Errorf("%s is listed twice: %s and %s", name, decided[name], why)
			}
			decided[name] = why
		}
	}
	for name := range extensions() {
		if decided[name] == "" {
			t.Errorf("sprig's %s is offered to templates, but nobody decided how its result is bounded", name)
		}
	}
	for name, why := range decided {
		if _, ok := extensions()[name]; !ok {
			t.Errorf("%s (%s) is not a function a template may call", name, why)
		}
	}
}

// A value printed by an action is refused before fmt formats it when it could not fit what is
// left of the body: fmt builds the whole text before the body can refuse it.
func TestPrintRefusedBeforeFormatting(t *testing.T) {
	tmpl, err := ParseTemplate(`{{ .Pods }}`)
	if err != nil {
		t.Fatal(err)
	}
	n := notification()
	n.Pods = make([]string, 100000)
	for i := range n.Pods {
		n.Pods[i] = "some-namespace/some-pod-name"
	}
	var got []byte
	if a := allocated(func() { got, err = tmpl.Render(n) }); a > 1<<20 {
		t.Errorf("allocated %d KiB to refuse a list of %d pods", a>>10, len(n.Pods))
	}
	if err != errTooLarge || got != nil {
		t.Errorf("got %d bytes, %v; want %v", len(got), err, errTooLarge)
	}
	n.Pods = n.Pods[:1000]
	if got, err := tmpl.Render(n); err != nil || len(got) != 1000*len("some-namespace/some-pod-name")+1000+1 {
		t.Errorf("a thousand pods: %d bytes, %v", len(got), err)
	}
}

// A render that makes and drops large values, each within the limit, stops at the render's
// budget instead of allocating without end.
func TestRenderBudget(t *testing.T) {
	for _, text := range []string{
		`{{ range 9999 }}{{ $x := repeat 100000 "x" }}{{ end }}`,
		`{{ range 9999 }}{{ $x := regexFindAll "x*" (repeat 100000 "a") -1 }}{{ end }}`,
		`{{ range 9999 }}` + strings.Repeat(`{{ $x := dict "a" 1 "b" 2 }}`, 100) + `{{ end }}`,
	} {
		var err error
		if a := allocated(func() { _, err = ParseTemplate(text) }); a > allocCeiling {
			t.Errorf("%.60s: allocated %d MiB", text, a>>20)
		}
		if err == nil || !strings.Contains(err.Error(), "more than 4194304 bytes in one render") {
			t.Errorf("%.60s: %v", text, err)
		}
	}
}

// guardedTemplate is the template behind a condition that neither start-up render meets: it
// passes the start and is refused when a notice meets it.
const guardedTemplate = `{{ if eq .InstanceID "i-0abc" }}{{ indent 131072 (repeat 131072 "\n") }}{{ end }}ok`

func TestGuardedTemplateRefusedAtRender(t *testing.T) {
	tmpl, err := ParseTemplate(guardedTemplate)
	if err != nil {
		t.Fatal(err)
	}
	var got []byte
	if a := allocated(func() { got, err = tmpl.Render(notification()) }); a > allocCeiling {
		t.Errorf("allocated %d MiB before refusing", a>>20)
	}
	want := "WEBHOOK_TEMPLATE: WEBHOOK_TEMPLATE:1:35: executing at <indent>: error calling indent: output would be 17180131328 bytes, more than the limit of 131072"
	if err == nil || err.Error() != want || got != nil {
		t.Errorf("got %q, %v\nwant error %s", got, err, want)
	}
	other := notification()
	other.InstanceID = "i-0def"
	if got, err := tmpl.Render(other); err != nil || string(got) != "ok" {
		t.Errorf("another instance: %q, %v", got, err)
	}
}
