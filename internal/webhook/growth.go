// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// A function is refused before it runs when what it would make passes MaxBodyBytes: a body
// could not hold it, and making it first is what exhausts memory. growth predicts that size
// for the sprig functions whose result can be far larger than their arguments: a count times
// a string (repeat, indent), a replacement times its matches (replace, regexReplaceAll), a
// separator times what it separates (join, wrapWith), the indentation of nested lists
// (toPrettyJson), or all their arguments together (list, dict, cat, concat, ...). The other
// functions make at most a few times what they are given, and every result is measured again
// after the call (callGo); TestEveryFunctionIsBoundedOrAudited keeps the list honest. Go's
// built-in print functions are bounded in functions.go.
var growth = map[string]func(args []any) int{
	"repeat":                     func(a []any) int { return product(a[0].(int), len(a[1].(string))) },
	"indent":                     func(a []any) int { return indented(a[0].(int), a[1].(string)) },
	"nindent":                    func(a []any) int { return sum(1, indented(a[0].(int), a[1].(string))) },
	"replace":                    func(a []any) int { return replaced(a[0].(string), a[1].(string), a[2].(string)) },
	"wrapWith":                   func(a []any) int { return wrapped(a[0].(int), a[1].(string), a[2].(string)) },
	"join":                       func(a []any) int { return joined(a[0].(string), a[1]) },
	"cat":                        func(a []any) int { return printedAll(nonNil(a), 0) },
	"quote":                      func(a []any) int { return printedAll(nonNil(a), len(`""`)) },
	"squote":                     func(a []any) int { return printedAll(nonNil(a), len(`''`)) },
	"list":                       func(a []any) int { return sum(len("[]"), printedAll(a, 0)) },
	"tuple":                      func(a []any) int { return sum(len("[]"), printedAll(a, 0)) },
	"dict":                       func(a []any) int { return sum(len("map[]"), printedAll(a, 0)) },
	"append":                     func(a []any) int { return printedAll(a, 0) },
	"push":                       func(a []any) int { return printedAll(a, 0) },
	"mustAppend":                 func(a []any) int { return printedAll(a, 0) },
	"mustPush":                   func(a []any) int { return printedAll(a, 0) },
	"prepend":                    func(a []any) int { return printedAll(a, 0) },
	"mustPrepend":                func(a []any) int { return printedAll(a, 0) },
	"concat":                     func(a []any) int { return printedAll(a, 0) },
	"merge":                      func(a []any) int { return printedAll(a, 0) },
	"mergeOverwrite":             func(a []any) int { return printedAll(a, 0) },
	"mustMerge":                  func(a []any) int { return printedAll(a, 0) },
	"mustMergeOverwrite":         func(a []any) int { return printedAll(a, 0) },
	"keys":                       keysLength,
	"pluck":                      pluckedLength,
	"splitList":                  func(a []any) int { return splitLength(a[1].(string), a[0].(string), -1, false) },
	"split":                      func(a []any) int { return splitLength(a[1].(string), a[0].(string), -1, true) },
	"splitn":                     func(a []any) int { return splitLength(a[2].(string), a[0].(string), a[1].(int), true) },
	"toPrettyJson":               func(a []any) int { return jsonIndentation(reflect.ValueOf(a[0]), 0, MaxBodyBytes) },
	"mustToPrettyJson":           func(a []any) int { return jsonIndentation(reflect.ValueOf(a[0]), 0, MaxBodyBytes) },
	"regexReplaceAll":            regexReplaced(true),
	"mustRegexReplaceAll":        regexReplaced(true),
	"regexReplaceAllLiteral":     regexReplaced(false),
	"mustRegexReplaceAllLiteral": regexReplaced(false),
}

// overLimit is a call refused, or a result dropped, because it passes MaxBodyBytes; size is
// what it would be, when that is known.
type overLimit struct{ size int }

const unknownSize = math.MaxInt

func (e overLimit) Error() string {
	if e.size == unknownSize {
		return fmt.Sprintf("output would be more than the limit of %d bytes", MaxBodyBytes)
	}
	return fmt.Sprintf("output would be %d bytes, more than the limit of %d", e.size, MaxBodyBytes)
}

// within is nil for a size a body may hold, else the error that refuses it. A size counted
// only up to the limit is not reported as if it were the whole.
func within(size int) error {
	if size <= MaxBodyBytes {
		return nil
	}
	return overLimit{size: size}
}

// product and sum saturate instead of overflowing; a negative count counts as nothing (the
// call fails on it by itself).
func product(a, b int) int {
	if a <= 0 || b <= 0 {
		return 0
	}
	if a > math.MaxInt/b {
		return unknownSize
	}
	return a * b
}

func sum(xs ...int) int {
	total := 0
	for _, x := range xs {
		if x > math.MaxInt-total {
			return unknownSize
		}
		total += max(x, 0)
	}
	return total
}

// measured is a length counted up to the limit: past it, only "more than" is known.
func measured(n int) int {
	if n > MaxBodyBytes {
		return unknownSize
	}
	return n
}

// indented is what indent makes: the padding before each line, and the text.
func indented(spaces int, s string) int {
	return sum(len(s), product(spaces, strings.Count(s, "\n")+1))
}

// replaced is what replace makes: the text, and each match's growth (with old empty, a match
// is every place between two runes).
func replaced(old, replacement, src string) int {
	return sum(len(src), product(strings.Count(src, old), len(replacement)-len(old)))
}

// wrapped bounds what wrapWith makes: each break either takes the place of a space or, in a
// word longer than the line, comes after a line's worth of bytes.
func wrapped(length int, sep, s string) int {
	if sep == "" {
		sep = "\n"
	}
	length = max(length, 1)
	return sum(len(s), product(strings.Count(s, " "), len(sep)-1), product(len(s)/length, len(sep)))
}

// printedAll is the printed length of args together, each with extra more and a separator.
func printedAll(args []any, extra int) int {
	total := 0
	for _, a := range args {
		total = sum(total, printedLength(a, MaxBodyBytes), extra, 1)
		if total > MaxBodyBytes {
			return unknownSize
		}
	}
	return total
}

func nonNil(args []any) []any {
	var kept []any
	for _, a := range args {
		if a != nil {
			kept = append(kept, a)
		}
	}
	return kept
}

// joined is what join makes: the elements of a list or array but nil ones (or v itself, when
// it is not a list), printed, and a separator between each two.
func joined(sep string, v any) int {
	elems := []any{v}
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Slice || rv.Kind() == reflect.Array {
		elems = make([]any, rv.Len())
		for i := range elems {
			elems[i] = rv.Index(i).Interface()
		}
	}
	elems = nonNil(elems)
	return sum(printedAll(elems, 0), product(len(elems)-1, len(sep)))
}

// keysLength is what keys makes: the keys of every map given.
func keysLength(args []any) int {
	total := len("[]")
	for _, a := range args {
		for k := range a.(map[string]any) {
			if total = sum(total, len(k), 1); total > MaxBodyBytes {
				return unknownSize
			}
		}
	}
	return total
}

// pluckedLength is what pluck makes: one value of each map given.
func pluckedLength(args []any) int {
	var values []any
	for _, d := range args[1:] {
		if v, ok := d.(map[string]any)[args[0].(string)]; ok {
			values = append(values, v)
		}
	}
	return sum(len("[]"), printedAll(values, 0))
}

// splitLength is what split, splitList and splitn (at most n pieces, n < 0 for all) make,
// printed: the text, and a separator between pieces or, for a map, a key and separator each.
func splitLength(s, sep string, n int, keyed bool) int {
	pieces := strings.Count(s, sep) + 1
	if n >= 0 {
		pieces = min(pieces, n)
	}
	if !keyed {
		return sum(len(s), len("[]"), pieces)
	}
	return sum(len(s), len("map[]"), product(pieces, len("_: ")+decimalDigits(uint64(pieces))))
}

// jsonIndentation counts the indentation json.MarshalIndent writes with two spaces a level:
// a new line and the level's spaces before each element of a list or map and before the
// closing bracket of one that has elements. Counting stops past limit.
func jsonIndentation(v reflect.Value, depth, limit int) int {
	for v.Kind() == reflect.Interface || v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return 0
		}
		v = v.Elem()
	}
	n := 0
	switch v.Kind() {
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 || v.Len() == 0 {
			return 0 // bytes are one base64 string
		}
		n = sum(product(v.Len(), 1+2*(depth+1)), 1+2*depth)
		for i := 0; i < v.Len() && n <= limit; i++ {
			n = sum(n, jsonIndentation(v.Index(i), depth+1, limit-n))
		}
	case reflect.Map:
		if v.Len() == 0 {
			return 0
		}
		n = sum(product(v.Len(), 1+2*(depth+1)), 1+2*depth)
		for it := v.MapRange(); it.Next() && n <= limit; {
			n = sum(n, jsonIndentation(it.Value(), depth+1, limit-n))
		}
	}
	return n
}

// regexReplaced is what regexReplaceAll (expand) or regexReplaceAllLiteral makes: the text
// less its matches, and for each match the replacement's literal bytes and, for each $name in
// it, at most the match (a group lies within its match). The matches are counted first, which
// costs a copy of the text.
func regexReplaced(expand bool) func(args []any) int {
	return func(args []any) int {
		re, err := regexp.Compile(args[0].(string))
		if err != nil {
			return 0 // the call fails on it by itself
		}
		s, repl := args[1].(string), args[2].(string)
		matches, matched := 0, 0
		re.ReplaceAllStringFunc(s, func(m string) string {
			matches, matched = matches+1, matched+len(m)
			return m
		})
		literal, refs := len(repl), 0
		if expand {
			literal, refs = expansion(repl)
		}
		return sum(len(s)-matched, product(matches, literal), product(refs, matched))
	}
}

// expansion splits a regexp replacement template into its literal bytes and its references,
// $name or ${name}, read as regexp.Expand reads them ($$ is a literal $; a $ that starts no
// name is itself).
func expansion(repl string) (literal, refs int) {
	for i := 0; i < len(repl); {
		switch {
		case repl[i] != '$':
			literal, i = literal+1, i+1
		case strings.HasPrefix(repl[i:], "$$"):
			literal, i = literal+1, i+2
		default:
			if n := reference(repl[i+1:]); n > 0 {
				refs, i = refs+1, i+1+n
			} else {
				literal, i = literal+1, i+1
			}
		}
	}
	return literal, refs
}

// reference is the length of the name (braces and all) that s starts with, or 0.
func reference(s string) int {
	brace := strings.HasPrefix(s, "{")
	i := 0
	if brace {
		i = 1
	}
	start := i
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '_' {
			break
		}
		i += size
	}
	switch {
	case i == start:
		return 0
	case !brace:
		return i
	case i < len(s) && s[i] == '}':
		return i + 1
	}
	return 0
}

// guarded is fn refused, before it runs, when size predicts a result past the limit. Its
// results gain an error if they had none; its arguments are fn's.
func guarded(fn any, size func(args []any) int) any {
	f := reflect.ValueOf(fn)
	t := f.Type()
	in := make([]reflect.Type, t.NumIn())
	for i := range in {
		in[i] = t.In(i)
	}
	out := []reflect.Type{t.Out(0), errorType}
	return reflect.MakeFunc(reflect.FuncOf(in, out, t.IsVariadic()), func(args []reflect.Value) []reflect.Value {
		if err := within(size(flatten(args, t.IsVariadic()))); err != nil {
			return []reflect.Value{reflect.Zero(t.Out(0)), reflect.ValueOf(&err).Elem()}
		}
		var results []reflect.Value
		if t.IsVariadic() {
			results = f.CallSlice(args)
		} else {
			results = f.Call(args)
		}
		if len(results) == 1 {
			results = append(results, reflect.Zero(errorType))
		}
		return results
	}).Interface()
}

// flatten is a call's arguments as values, a variadic function's last ones spread out.
func flatten(args []reflect.Value, variadic bool) []any {
	var out []any
	for i, a := range args {
		if variadic && i == len(args)-1 {
			for j := 0; j < a.Len(); j++ {
				out = append(out, fromValue(a.Index(j)))
			}
			break
		}
		out = append(out, fromValue(a))
	}
	return out
}
