// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"fmt"
	"reflect"
	"strings"
	"unicode/utf8"
)

// printfLength bounds len(fmt.Sprintf(format, args...)), reading the format as fmt does:
// flags, argument indexes, and widths and precisions given in the format or taken from
// arguments (*). A width or precision over limit is an error whatever fmt would make of it:
// fmt pads every operand, and every element of a list, to it.
func printfLength(format string, args []any, limit int) (int, error) {
	p := printfReader{format: format, args: args, c: lengthCounter{limit: limit}}
	if err := p.read(); err != nil {
		return 0, err
	}
	return p.c.n, nil
}

// printfReader walks a format as fmt's doPrintf does, counting instead of writing.
type printfReader struct {
	format     string
	args       []any
	i          int  // the next byte of the format
	arg        int  // the next argument
	afterIndex bool // the last thing read was an argument index, [n]
	goodArg    bool // this directive's argument indexes were valid
	reordered  bool // an index was given: unused arguments are not reported
	c          lengthCounter
}

func (p *printfReader) read() error {
	for p.i < len(p.format) && !p.c.over() {
		next := strings.IndexByte(p.format[p.i:], '%')
		if next < 0 {
			p.c.n += len(p.format) - p.i
			break
		}
		p.c.n += next
		p.i += next + 1
		d, err := p.directive()
		if err != nil {
			return err
		}
		if d.verb < 0 {
			p.c.n += len("%!(NOVERB)")
			break
		}
		p.operand(d)
	}
	p.extra()
	return nil
}

// directive reads the flags, index, width, precision and verb after a %; verb -1: the format
// ended first.
func (p *printfReader) directive() (directive, error) {
	d := directive{prec: -1}
	p.goodArg = true
	p.flags(&d)
	p.index()
	if err := p.width(&d); err != nil {
		return d, err
	}
	if err := p.precision(&d); err != nil {
		return d, err
	}
	if !p.afterIndex {
		p.index()
	}
	if p.i >= len(p.format) {
		d.verb = -1
		return d, nil
	}
	verb, size := utf8.DecodeRuneInString(p.format[p.i:])
	p.i += size
	d.verb = verb
	return d, nil
}

func (p *printfReader) flags(d *directive) {
	for ; p.i < len(p.format); p.i++ {
		switch p.format[p.i] {
		case '#':
			d.sharp = true
		case '0':
			d.zero = true
		case '+':
			d.plus = true
		case '-':
			d.minus = true
		case ' ':
			d.space = true
		default:
			return
		}
	}
}

// index reads an argument index, [n]. A valid one selects the next operand; an invalid one
// turns this directive's text into %!verb(BADINDEX).
func (p *printfReader) index() {
	p.afterIndex = false
	if p.i >= len(p.format) || p.format[p.i] != '[' {
		return
	}
	p.reordered = true
	rest := p.format[p.i:]
	closing := strings.IndexByte(rest, ']')
	if len(rest) < len("[n]") || closing < 0 {
		p.i++
		p.goodArg = false
		return
	}
	p.i += closing + 1
	n, ok := number(rest[1:closing])
	switch {
	case !ok || closing == 1:
		p.goodArg = false
	case n >= 1 && n <= len(p.args):
		p.arg, p.afterIndex = n-1, true
	default:
		p.goodArg, p.afterIndex = false, true
	}
}

// number reads an argument index: digits, all of s, as fmt reads them (ok is false for
// anything else, or once the number passes fmt's bound of a million).
func number(s string) (n int, ok bool) {
	if s == "" {
		return 0, false
	}
	for _, b := range []byte(s) {
		if b < '0' || b > '9' || n > 1e6 {
			return 0, false
		}
		n = n*10 + int(b-'0')
	}
	return n, true
}

func (p *printfReader) width(d *directive) error {
	if p.i < len(p.format) && p.format[p.i] == '*' {
		p.i++
		w, ok, err := p.fromArg("width")
		if !ok {
			p.c.n += len("%!(BADWIDTH)")
		}
		if w < 0 {
			w, d.minus = -w, true
		}
		d.width, p.afterIndex = w, false
		return err
	}
	w, present, err := p.fromFormat("width")
	if present && p.afterIndex {
		p.goodArg = false
	}
	d.width = w
	return err
}

func (p *printfReader) precision(d *directive) error {
	if p.i+1 >= len(p.format) || p.format[p.i] != '.' {
		return nil
	}
	p.i++
	if p.afterIndex {
		p.goodArg = false
	}
	p.index()
	if p.i < len(p.format) && p.format[p.i] == '*' {
		p.i++
		prec, ok, err := p.fromArg("precision")
		if prec < 0 || !ok {
			p.c.n += len("%!(BADPREC)")
			prec = -1
		}
		d.prec, p.afterIndex = prec, false
		return err
	}
	prec, _, err := p.fromFormat("precision")
	d.prec = prec
	return err
}

// fromFormat reads a width or precision written in the format.
func (p *printfReader) fromFormat(what string) (n int, present bool, err error) {
	start := p.i
	for p.i < len(p.format) && p.format[p.i] >= '0' && p.format[p.i] <= '9' {
		p.i++
		if n <= p.c.limit {
			n = n*10 + int(p.format[p.i-1]-'0')
		}
	}
	if n > p.c.limit {
		digits := p.format[start:p.i]
		if len(digits) > 20 {
			digits = digits[:20] + "..."
		}
		return 0, true, fmt.Errorf("a %s of %s is more than the limit of %d bytes", what, digits, p.c.limit)
	}
	return n, p.i > start, nil
}

// fromArg takes a width or precision from the next argument, which must be an integer.
func (p *printfReader) fromArg(what string) (n int, ok bool, err error) {
	if p.arg >= len(p.args) {
		return 0, false, nil
	}
	v := reflect.ValueOf(p.args[p.arg])
	p.arg++
	switch kindOf(p.args[p.arg-1]) {
	case intKind:
		if v.Int() > int64(p.c.limit) || v.Int() < -int64(p.c.limit) {
			return 0, false, fmt.Errorf("a %s of %d (from an argument) is more than the limit of %d bytes", what, v.Int(), p.c.limit)
		}
		return int(v.Int()), true, nil
	case uintKind:
		if v.Uint() > uint64(p.c.limit) {
			return 0, false, fmt.Errorf("a %s of %d (from an argument) is more than the limit of %d bytes", what, v.Uint(), p.c.limit)
		}
		return int(v.Uint()), true, nil
	}
	return 0, false, nil
}

// operand adds one directive's text: a percent sign, an error for a bad or missing argument,
// or the argument printed.
func (p *printfReader) operand(d directive) {
	switch {
	case d.verb == '%':
		p.c.n++
	case !p.goodArg:
		p.c.n += len("%!(BADINDEX)") + utf8.RuneLen(d.verb)
	case p.arg >= len(p.args):
		p.c.n += len("%!(MISSING)") + utf8.RuneLen(d.verb)
	default:
		if d.verb == 'v' || d.verb == 'w' {
			d.sharpV, d.sharp = d.sharp, false
			d.plusV, d.plus = d.plus, false
		}
		p.c.operand(p.args[p.arg], d)
		p.arg++
	}
}

// extra adds fmt's report of arguments no directive used, unless indexes were given.
func (p *printfReader) extra() {
	if p.reordered || p.arg >= len(p.args) || p.c.over() {
		return
	}
	p.c.n += len("%!(EXTRA )")
	for i, a := range p.args[p.arg:] {
		if i > 0 {
			p.c.n += len(", ")
		}
		if a == nil {
			p.c.n += len("<nil>")
			continue
		}
		p.c.n += len(reflect.TypeOf(a).String()) + len("=")
		p.c.operand(a, printV)
	}
}
