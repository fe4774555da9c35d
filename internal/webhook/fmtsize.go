// SPDX-License-Identifier: Apache-2.0

package webhook

// This file bounds the length of what fmt would write for a value without writing it, so that
// print, printf and the functions that print their arguments are refused before they format
// more than a body may hold. It follows fmt's rules (print.go and format.go of the standard
// library): exact for strings, integers, floats, booleans and the lists and maps that hold
// them, a little over for the rest, never under.

import (
	"fmt"
	"math"
	"math/bits"
	"reflect"
	"strconv"
	"time"
	"unicode/utf8"
)

// directive is how fmt prints one operand: its verb, flags, width and precision.
type directive struct {
	verb                            rune
	plus, sharp, space, minus, zero bool
	plusV, sharpV                   bool // %+v and %#v
	width                           int  // 0: none
	prec                            int  // -1: none
}

// printV is the directive of print and of a value written by an action.
var printV = directive{verb: 'v', prec: -1}

// lengthCounter adds up lengths of printed operands. Once the count passes limit it stops
// walking, so that counting costs no more than the limit whatever the value.
type lengthCounter struct {
	n, limit int
	items    int  // list elements and map entries walked, for the render's budget
	erroring bool // inside fmt's text for a bad verb, where methods are not called
}

func (c *lengthCounter) over() bool { return c.n > c.limit }

// printedLength bounds len(fmt.Sprint(v)); a result over limit means only "more than limit".
func printedLength(v any, limit int) int {
	c := lengthCounter{limit: limit}
	c.operand(v, printV)
	return c.n
}

// measure is v's printed length, counted up to MaxBodyBytes (past it, only "more than" is
// known), and the number of list elements and map entries in it.
func measure(v any) (length, items int) {
	c := lengthCounter{limit: MaxBodyBytes}
	c.operand(v, printV)
	return c.n, c.items
}

// printLength bounds len(fmt.Sprint(args...)), or with ln, len(fmt.Sprintln(args...)).
func printLength(args []any, ln bool, limit int) int {
	c := lengthCounter{limit: limit}
	for i, a := range args {
		if i > 0 {
			c.n++ // a space, which Sprint leaves out between two strings
		}
		c.operand(a, printV)
		if c.over() {
			break
		}
	}
	if ln {
		c.n++
	}
	return c.n
}

// operand adds what fmt prints for one argument (printArg).
func (c *lengthCounter) operand(v any, d directive) {
	if v == nil {
		if d.verb == 'v' || d.verb == 'T' {
			c.n += padded(len("<nil>"), d)
		} else {
			c.n += len("%!(<nil>)") + utf8.RuneLen(d.verb)
		}
		return
	}
	rv := reflect.ValueOf(v)
	_, isBytes := v.([]byte)
	switch {
	case d.verb == 'T':
		c.n += textLength(rv.Type().String(), d)
	case d.verb == 'p':
		switch rv.Kind() {
		case reflect.Chan, reflect.Func, reflect.Map, reflect.Pointer, reflect.Slice, reflect.UnsafePointer:
			c.n += pointerLength(d)
		default:
			c.badVerb(rv, d)
		}
	case d.verb == 'w' && !isBytes: // only Errorf wraps: elsewhere a bad verb (for []byte, each byte's)
		c.badVerb(rv, d)
	default:
		c.value(rv, d, 0)
	}
}

// value adds what fmt prints for v at depth (printValue).
func (c *lengthCounter) value(v reflect.Value, d directive, depth int) {
	if c.over() || c.method(v, d) {
		return
	}
	switch v.Kind() {
	case reflect.Map:
		c.mapping(v, d, depth)
	case reflect.Struct:
		c.structure(v, d, depth)
	case reflect.Array, reflect.Slice:
		c.list(v, d, depth)
	case reflect.Interface:
		switch {
		case v.IsNil() && d.sharpV:
			c.n += len(v.Type().String()) + len("(nil)")
		case v.IsNil():
			c.n += padded(len("<nil>"), d)
		default:
			c.value(v.Elem(), d, depth+1)
		}
	case reflect.Pointer:
		// A pointer to a list, map or struct prints as & and what it points to, at the top only.
		if depth == 0 && !v.IsNil() {
			switch v.Elem().Kind() {
			case reflect.Array, reflect.Slice, reflect.Struct, reflect.Map:
				c.n++
				c.value(v.Elem(), d, depth+1)
				return
			}
		}
		c.leaf(v, d)
	default:
		c.leaf(v, d)
	}
}

// leaf adds a value that holds no others, or fmt's bad-verb text for it.
func (c *lengthCounter) leaf(v reflect.Value, d directive) {
	if n := leafLength(v, d); n >= 0 {
		c.n += n
	} else {
		c.badVerb(v, d)
	}
}

// leafLength is the length of a value that holds no others printed with d, or -1 when d's
// verb means nothing for it.
func leafLength(v reflect.Value, d directive) int {
	switch v.Kind() {
	case reflect.Invalid:
		return len("<invalid reflect.Value>")
	case reflect.Bool:
		if d.verb != 't' && d.verb != 'v' {
			return -1
		}
		return padded(len(strconv.FormatBool(v.Bool())), d)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return integerLength(magnitude(v.Int()), v.Int() < 0, true, d)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return integerLength(v.Uint(), false, false, d)
	case reflect.Float32, reflect.Float64:
		return floatLength(v.Float(), v.Type().Bits(), d)
	case reflect.Complex64, reflect.Complex128:
		return complexLength(v.Complex(), v.Type().Bits()/2, d)
	case reflect.String:
		return stringLength(v.String(), d)
	}
	switch d.verb { // pointers, channels, functions
	case 'v', 'p', 'b', 'o', 'd', 'x', 'X':
		if d.sharpV {
			return len(v.Type().String()) + len("()()") + pointerLength(d)
		}
		return pointerLength(d)
	}
	return -1
}

// method adds what fmt prints through v's own String, Error or GoString method, and reports
// whether it had one. Times are measured exactly; other types (a template meets only semver's
// versions) are taken to print about their fields and a little more.
func (c *lengthCounter) method(v reflect.Value, d directive) bool {
	if c.erroring || !v.IsValid() || !v.CanInterface() || v.Type().NumMethod() == 0 {
		return false
	}
	x := v.Interface()
	if _, ok := x.(fmt.Formatter); ok {
		c.estimated(v, d)
		return true
	}
	if d.sharpV {
		if _, ok := x.(fmt.GoStringer); !ok {
			return false
		}
		if t, ok := x.(time.Time); ok {
			c.n += textLength(t.GoString(), d)
		} else {
			c.estimated(v, d)
		}
		return true
	}
	switch d.verb {
	case 'v', 's', 'x', 'X', 'q':
	default:
		return false
	}
	switch x := x.(type) {
	case time.Time:
		c.n += stringLength(x.String(), d)
	case error, fmt.Stringer:
		c.estimated(v, d)
	default:
		return false
	}
	return true
}

// estimated adds a bound for a method's text: v's fields as fmt prints them without methods,
// and some slack, formatted as a string of that length.
func (c *lengthCounter) estimated(v reflect.Value, d directive) {
	fields := lengthCounter{limit: c.limit, erroring: true}
	fields.value(v, printV, 0)
	length := fields.n + 64
	switch d.verb {
	case 'q':
		length = 4*length + 2
	case 'x', 'X':
		length *= 5
	}
	c.n += length + d.width
}

// badVerb adds fmt's %!verb(type=value) for a verb that means nothing for v.
func (c *lengthCounter) badVerb(v reflect.Value, d directive) {
	c.n += len("%!(=)") + utf8.RuneLen(d.verb) + len(v.Type().String())
	was := c.erroring
	c.erroring = true
	d.verb = 'v'
	c.value(v, d, 0)
	c.erroring = was
}

// padded is the length of an ASCII text of length n padded to the width.
func padded(n int, d directive) int { return max(n, d.width) }

// runePadded is the length of a text of at most n bytes that may hold one rune of several
// bytes, padded to the width, which counts runes.
func runePadded(n int, d directive) int { return max(n, d.width+utf8.UTFMax-1) }

// textLength is the length of s as fmt's %s writes it: cut to the precision in runes, padded
// to the width in runes.
func textLength(s string, d directive) int {
	s = truncated(s, d.prec)
	return len(s) + max(0, d.width-utf8.RuneCountInString(s))
}

func truncated(s string, prec int) string {
	if prec < 0 {
		return s
	}
	for i := range s {
		if prec == 0 {
			return s[:i]
		}
		prec--
	}
	return s
}

// stringLength is the length of s printed with d, or -1 for a verb that means nothing for it.
func stringLength(s string, d directive) int {
	switch d.verb {
	case 'v':
		if d.sharpV {
			return quotedLength(s, false, d)
		}
		return textLength(s, d)
	case 's':
		return textLength(s, d)
	case 'q':
		return quotedLength(truncated(s, d.prec), d.plus, d)
	case 'x', 'X':
		return padded(hexLength(s, d), d)
	}
	return -1
}

// quotedLength is the length of s as strconv.Quote (or, ascii, QuoteToASCII) writes it,
// padded to the width in runes. A backquoted %#q is never longer.
func quotedLength(s string, ascii bool, d directive) int {
	length, runes := len(`""`), len(`""`)
	for i := 0; i < len(s); {
		r, w := utf8.DecodeRuneInString(s[i:])
		i += w
		escaped := 0
		switch {
		case r == utf8.RuneError && w == 1:
			escaped = len(`\xff`)
		case r == '"' || r == '\\':
			escaped = len(`\\`)
		case r < utf8.RuneSelf && strconv.IsPrint(r):
			escaped = 1
		case !ascii && strconv.IsPrint(r):
			length, runes = length+w, runes+1
			continue
		case r == '\a' || r == '\b' || r == '\f' || r == '\n' || r == '\r' || r == '\t' || r == '\v':
			escaped = len(`\n`)
		case r < ' ' || r == 0x7f:
			escaped = len(`\x00`)
		case r < 0x10000:
			escaped = len(`\u0000`)
		default:
			escaped = len(`\U00000000`)
		}
		length, runes = length+escaped, runes+escaped
	}
	return length + max(0, d.width-runes)
}

// hexLength is the length of %x of the bytes of s: two digits a byte, with the spaces and 0x
// prefixes the flags ask for, the precision counting bytes.
func hexLength(s string, d directive) int {
	n := len(s)
	if d.prec >= 0 {
		n = min(n, d.prec)
	}
	switch {
	case n == 0:
		return 0
	case d.space && d.sharp:
		return 4*n + n - 1
	case d.space:
		return 2*n + n - 1
	case d.sharp:
		return 2*n + len("0x")
	}
	return 2 * n
}

func decimalDigits(u uint64) int {
	n := 1
	for ; u >= 10; u /= 10 {
		n++
	}
	return n
}

func magnitude(i int64) uint64 {
	if i < 0 {
		return uint64(-(i + 1)) + 1
	}
	return uint64(i)
}

// integerLength is the length of an integer of magnitude u printed with d: its digits in the
// verb's base, at least the precision, a sign and a prefix; or a rune, a quoted rune or U+
// notation; -1 for a verb that means nothing for it.
func integerLength(u uint64, negative, signed bool, d directive) int {
	width := bits.Len64(u)
	digits := 0
	switch d.verb {
	case 'v', 'd':
		digits = decimalDigits(u)
		if d.verb == 'v' && d.sharpV && !signed {
			digits = max((width+3)/4, 1) + len("0x")
		}
	case 'b':
		digits = max(width, 1)
	case 'o', 'O':
		digits = (width + 2) / 3
	case 'x', 'X':
		digits = (width + 3) / 4
	case 'c':
		return runePadded(utf8.UTFMax, d)
	case 'q':
		return runePadded(len(`'\U0010ffff'`), d)
	case 'U':
		return runePadded(len("U+")+max(16, d.prec)+len(" '\U0010ffff'"), d)
	default:
		return -1
	}
	digits = max(digits, d.prec, 1)
	if d.zero && !d.minus && d.prec < 0 {
		digits = max(digits, d.width) // zeros to the width, and then the prefix
	}
	if negative || d.plus || d.space {
		digits++
	}
	if d.sharp {
		digits += len("0x")
	}
	if d.verb == 'O' {
		digits += len("0o")
	}
	return padded(digits, d)
}

// pointerLength is the length of an address printed with d: 0x and hexadecimal digits, or
// <nil>; or a number for the integer verbs.
func pointerLength(d directive) int {
	if d.verb == 'v' || d.verb == 'p' {
		d.verb, d.sharp = 'x', true
	}
	return integerLength(math.MaxUint64, false, false, d)
}

// floatLength is the length of a floating-point number f of the given bits printed with d, or
// -1 for a verb that means nothing for it.
func floatLength(f float64, size int, d directive) int {
	const sign, point, exponent = 1, 1, len("e+308")
	length := 0
	switch d.verb {
	case 'v', 'g', 'G':
		if d.prec >= 0 {
			length = max(d.prec, 1) + sign + point + exponent
			break
		}
		var buf [32]byte
		length = len(strconv.AppendFloat(buf[:0], f, 'g', -1, size))
		if d.plus || d.space {
			length += sign
		}
		if d.sharp { // a point and trailing zeros, up to six digits
			length += point + 6
		}
	case 'e', 'E':
		length = precOr(d, 6) + 1 + sign + point + exponent
	case 'f', 'F':
		length = integerDigits(f) + precOr(d, 6) + sign + point
	case 'b':
		length = len("-4503599627370496p-1074")
	case 'x', 'X':
		length = max(d.prec, 13) + len("-0x1.p+1023")
	default:
		return -1
	}
	return padded(length, d)
}

func precOr(d directive, otherwise int) int {
	if d.prec < 0 {
		return otherwise
	}
	return d.prec
}

// integerDigits bounds the digits before the point of f printed with %f.
func integerDigits(f float64) int {
	a := math.Abs(f)
	if a < 10 || math.IsInf(a, 0) || math.IsNaN(a) {
		return len("Inf")
	}
	return int(math.Log10(a)) + 2
}

// complexLength is (real+imagi), each part a float of the given bits printed with d; -1 for
// a verb that means nothing for it.
func complexLength(x complex128, size int, d directive) int {
	re := floatLength(real(x), size, d)
	d.plus = true // the imaginary part always has its sign
	im := floatLength(imag(x), size, d)
	if re < 0 {
		return -1
	}
	return len("(i)") + re + im
}

// list adds a slice or an array: [a b c], or with %#v its type and {a, b, c}. Bytes print as
// a string for %s, %q, %x and %X.
func (c *lengthCounter) list(v reflect.Value, d directive, depth int) {
	if v.Type().Elem().Kind() == reflect.Uint8 {
		switch d.verb {
		case 's', 'q', 'x', 'X':
			b := make([]byte, v.Len())
			for i := range b {
				b[i] = byte(v.Index(i).Uint())
			}
			c.n += stringLength(string(b), d)
			return
		}
	}
	c.items += v.Len()
	if d.sharpV {
		c.n += len(v.Type().String())
		if v.Kind() == reflect.Slice && v.IsNil() {
			c.n += len("(nil)")
			return
		}
	}
	c.n += len("[]") + separators(v.Len(), d)
	for i := 0; i < v.Len() && !c.over(); i++ {
		c.value(v.Index(i), d, depth+1)
	}
}

// separators is the length of what separates n elements: a space, or ", " with %#v.
func separators(n int, d directive) int {
	if n == 0 {
		return 0
	}
	if d.sharpV {
		return 2 * (n - 1)
	}
	return n - 1
}

// mapping adds a map: map[k:v k:v], or with %#v its type and {k:v, k:v}. Keys print with the
// directive too, width and all.
func (c *lengthCounter) mapping(v reflect.Value, d directive, depth int) {
	c.items += v.Len()
	if d.sharpV {
		c.n += len(v.Type().String())
		if v.IsNil() {
			c.n += len("(nil)")
			return
		}
	}
	c.n += len("map[]") + separators(v.Len(), d) + v.Len() // and a colon an entry
	for it := v.MapRange(); it.Next() && !c.over(); {
		c.value(it.Key(), d, depth+1)
		c.value(it.Value(), d, depth+1)
	}
}

// structure adds a struct: {a b}, with %+v and %#v its field names, with %#v its type.
func (c *lengthCounter) structure(v reflect.Value, d directive, depth int) {
	if d.sharpV {
		c.n += len(v.Type().String())
	}
	c.n += len("{}") + separators(v.NumField(), d)
	for i := 0; i < v.NumField() && !c.over(); i++ {
		if d.plusV || d.sharpV {
			c.n += len(v.Type().Field(i).Name) + len(":")
		}
		c.value(v.Field(i), d, depth+1)
	}
}
