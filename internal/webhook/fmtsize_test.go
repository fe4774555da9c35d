// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/Masterminds/sprig/v3"
)

// operands are values of every kind a template can hand to print or printf: the notification,
// its fields, and what sprig's functions return.
func operands(t testing.TB) []any {
	version, err := reflect.ValueOf(sprig.TxtFuncMap()["semver"]).Call([]reflect.Value{reflect.ValueOf("1.2.3-beta.1+build.5")})[0].Interface(), error(nil)
	if err != nil {
		t.Fatal(err)
	}
	n := notification()
	return []any{
		nil, true, false, 0, 7, -1, 123456789, math.MinInt64, uint64(math.MaxUint64), uint8(200), int64(-42),
		3.14, -1e300, 1e-300, 1e21, math.NaN(), math.Inf(-1), float32(1.5), complex(1, -2.5), complex64(3),
		"", "abc", "héllo wörld", "\x00\xff\"\\\n\u2028😀\x7f", strings.Repeat("ab ", 40),
		[]string{"a", "b c", ""}, []any{1, "a", nil, []any{}, map[string]any{"k": 2.5}},
		map[string]any{"b": 2, "a": "x", "c": nil, "d": []int{1, 2}}, map[string]string{"_0": "p", "_1": "q"},
		map[int]string{3: "c", 1: "a"}, []int{0, 1, 2, 10, 999}, []byte("bytes\x00"), [2]bool{true, false},
		n, n.StartTime, n.StartTime.Add(time.Nanosecond).In(time.FixedZone("XYZ", 3600)), n.Pods, n.NodeLabels,
		&n, &[]string{"x"}, version, []any{version, n.StartTime}, errors.New("an error"), time.Duration(1500),
		[]any{nil, []string(nil), map[string]any(nil)},
	}
}

var directives = []string{
	"%v", "%+v", "%#v", "%T", "%p", "%d", "%5d", "%-8.3f", "%x", "% x", "%#x", "%# x", "%X", "%q",
	"%+q", "%#q", "%s", "%10s", "%-10s", "%.2s", "%.0s", "%c", "%U", "%#U", "%b", "%o", "%O", "%e",
	"%E", "%g", "%G", "%.3g", "%#g", "%#.3x", "%t", "%z", "%w", "%3.3v", "%08.3f", "%+d", "% d",
	"%+.1e", "%#o", "%#b", "%10q", "%-12x", "%.40f", "%.*f", "%*d", "%-*s", "%[1]v", "%20.5v",
}

// The bound is never under what fmt writes, for every directive on every operand.
func TestPrintfLengthBoundsFmt(t *testing.T) {
	for _, v := range operands(t) {
		for _, f := range directives {
			args := []any{v}
			if strings.Contains(f, "*") {
				args = []any{7, v}
			}
			checkBound(t, f, args)
		}
	}
	for _, f := range []string{
		"", "plain", "%", "%%", "abc%", "%!", "%[2]d %[1]d", "%[5]d", "%[0]d", "%[x]d", "%[]d", "%[1",
		"%[1]*d", "%[2]*[1]d", "%.[2]d", "%[1].2d", "%[1]2d", "%d %d %d", "%d", "%*d", "%.*d", "%.d",
		"%-*d", "%[3]*.[2]*[1]f", "%v %[1]v %v", "%00000001d", "%[00000001]d", "%é", "%\xff", "%.",
	} {
		checkBound(t, f, []any{12345, -3, "str", []any{1.5, "x"}, nil})
		checkBound(t, f, []any{"only"})
		checkBound(t, f, nil)
	}
}

func checkBound(t *testing.T, format string, args []any) {
	t.Helper()
	got, err := printfLength(format, args, MaxBodyBytes)
	if err != nil {
		t.Fatalf("%q %#v: %v", format, args, err)
	}
	if want := len(fmt.Sprintf(format, args...)); got < want {
		t.Errorf("%q of %#v: bound %d, fmt writes %d: %q", format, args, got, want, fmt.Sprintf(format, args...))
	}
}

// For print the bound is exact on what templates mostly print.
func TestPrintLengthExact(t *testing.T) {
	for _, v := range []any{
		nil, true, 0, -7, 123456789, uint64(math.MaxUint64), 3.25, -1e300, 1e21, "", "héllo",
		[]string{"a", "b c", ""}, []any{1, "a", nil, []any{}}, map[string]any{"b": 2, "a": "x"},
		[]int{0, 1, 2, 10, 999}, notification().NodeLabels, notification().StartTime,
	} {
		if got, want := printedLength(v, MaxBodyBytes), len(fmt.Sprint(v)); got != want {
			t.Errorf("%#v: %d, fmt writes %d (%q)", v, got, want, fmt.Sprint(v))
		}
	}
	args := []any{"a", 1, 2, "b", "c", nil}
	if got, want := printLength(args, false, MaxBodyBytes), len(fmt.Sprint(args...)); got < want || got > want+len(args) {
		t.Errorf("print: %d, fmt writes %d", got, want)
	}
	if got, want := printLength(args, true, MaxBodyBytes), len(fmt.Sprintln(args...)); got != want {
		t.Errorf("println: %d, fmt writes %d", got, want)
	}
}

func TestPrintfLengthRefusesLargeWidths(t *testing.T) {
	for _, tt := range []struct {
		format string
		args   []any
		want   string
	}{
		{"%999999999d", []any{1}, "a width of 999999999 is more than the limit"},
		{"%.999999f", []any{1.5}, "a precision of 999999 is more than the limit"},
		{"%*d", []any{999999, 1}, "a width of 999999 (from an argument)"},
		{"%-*d", []any{-999999, 1}, "a width of -999999 (from an argument)"},
		{"%.*d", []any{uint(1 << 20), 1}, "a precision of 1048576 (from an argument)"},
		{"%" + strings.Repeat("9", 40) + "d", []any{1}, "a width of 99999999999999999999... is more"},
	} {
		if _, err := printfLength(tt.format, tt.args, MaxBodyBytes); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%.30q: %v; want %q", tt.format, err, tt.want)
		}
	}
	// Each element of a list is padded: the bound counts the width once an element.
	n, err := printfLength("%1000v", []any{make([]int, 1000)}, MaxBodyBytes)
	if err != nil || n <= MaxBodyBytes {
		t.Errorf("a width on each of a thousand elements: %d, %v; want more than the limit", n, err)
	}
}

// FuzzPrintfLength holds the bound to fmt: never under what Sprintf writes.
func FuzzPrintfLength(f *testing.F) {
	for _, d := range directives {
		f.Add(d+" and %[2]q", "héllo\n", int64(-42), 2.5)
	}
	f.Fuzz(func(t *testing.T, format, s string, i int64, x float64) {
		for _, args := range [][]any{
			{s, i, x},
			{i, x, s, true, nil},
			{[]any{s, i, x}, map[string]any{s: i}},
			{notification(), uint8(i), float32(x)},
		} {
			n, err := printfLength(format, args, MaxBodyBytes)
			if err != nil || n > MaxBodyBytes {
				continue
			}
			if want := len(fmt.Sprintf(format, args...)); n < want {
				t.Fatalf("%q of %#v: bound %d, fmt writes %d", format, args, n, want)
			}
		}
	})
}
