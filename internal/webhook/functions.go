// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"errors"
	"fmt"
	"reflect"
	"text/template"
	"time"
)

// paramKind is what a function accepts for one parameter. Arguments are checked against
// it as text/template checks them against a Go signature: a number is not a string, and
// nil is accepted only where the Go parameter is an interface.
type paramKind int

const (
	valueParam  paramKind = iota // any value but nil (a reflect.Value in text/template)
	anyParam                     // any value, nil too
	stringParam                  // a string
)

// function is a built-in function or a method a template may call.
type function struct {
	params   []paramKind
	variadic bool             // the last parameter repeats (zero or more times)
	lazy     func(v any) bool // and, or: true when v decides the result, so later arguments are not evaluated
	call     func(args []any) (any, error)
	makes    bool // its result is new text: measured, and refused past the limit (execution.account)
}

func fixed(params ...paramKind) []paramKind { return params }

// builtins are text/template's built-in functions, with the same names, arguments and results.
var builtins = map[string]function{
	"and":      {params: fixed(valueParam, valueParam), variadic: true, lazy: func(v any) bool { return !truth(v) }},
	"or":       {params: fixed(valueParam, valueParam), variadic: true, lazy: truth},
	"not":      {params: fixed(valueParam), call: func(a []any) (any, error) { return !truth(a[0]), nil }},
	"len":      {params: fixed(valueParam), call: length},
	"index":    {params: fixed(valueParam, valueParam), variadic: true, call: index},
	"slice":    {params: fixed(valueParam, valueParam), variadic: true, call: slice},
	"print":    printing(fmt.Sprint),
	"println":  {params: fixed(anyParam), variadic: true, makes: true, call: printLine},
	"printf":   {params: fixed(stringParam, anyParam), variadic: true, makes: true, call: printf},
	"html":     printing(template.HTMLEscaper),
	"js":       printing(template.JSEscaper),
	"urlquery": printing(template.URLQueryEscaper),
	"eq":       {params: fixed(valueParam, valueParam), variadic: true, call: eq},
	"ne":       {params: fixed(valueParam, valueParam), call: func(a []any) (any, error) { same, err := equal(a[0], a[1]); return !same, err }},
	"lt":       {params: fixed(valueParam, valueParam), call: func(a []any) (any, error) { return less(a[0], a[1]) }},
	"le":       {params: fixed(valueParam, valueParam), call: func(a []any) (any, error) { return lessOrEqual(a[0], a[1]) }},
	"gt": {params: fixed(valueParam, valueParam), call: func(a []any) (any, error) {
		le, err := lessOrEqual(a[0], a[1])
		return !le && err == nil, err
	}},
	"ge": {params: fixed(valueParam, valueParam), call: func(a []any) (any, error) {
		lt, err := less(a[0], a[1])
		return !lt && err == nil, err
	}},
	"call": {params: fixed(valueParam, valueParam), variadic: true, call: func(a []any) (any, error) {
		return nil, fmt.Errorf("non-function %v of type %T (a notification holds no functions)", a[0], a[0])
	}},
}

// printing is a built-in function that prints its arguments, as print does, and then perhaps
// escapes the text: refused before it runs when the printed arguments could not fit a body
// (escaping makes them longer still), and measured again after.
func printing(f func(a ...any) string) function {
	return function{params: fixed(anyParam), variadic: true, makes: true, call: func(a []any) (any, error) {
		if err := within(measured(printLength(a, false, MaxBodyBytes))); err != nil {
			return nil, err
		}
		return f(a...), nil
	}}
}

func printLine(a []any) (any, error) {
	if err := within(measured(printLength(a, true, MaxBodyBytes))); err != nil {
		return nil, err
	}
	return fmt.Sprintln(a...), nil
}

// printf reads the format before formatting: a width or precision is applied to every
// operand, and to every element of a list, so a short format can ask for any size.
func printf(a []any) (any, error) {
	n, err := printfLength(a[0].(string), a[1:], MaxBodyBytes)
	if err == nil {
		err = within(measured(n))
	}
	if err != nil {
		return nil, err
	}
	return fmt.Sprintf(a[0].(string), a[1:]...), nil
}

// functionNames is what the parser accepts as function names: the built-ins and the
// extensions (sprig's), nothing more.
func functionNames() map[string]any {
	names := make(map[string]any, len(builtins)+len(extensions()))
	for name := range extensions() {
		names[name] = true
	}
	for name := range builtins {
		names[name] = true
	}
	return names
}

func jsonMethod(n Notification) function {
	return function{params: fixed(anyParam), makes: true, call: func(a []any) (any, error) { return n.JSON(a[0]) }}
}

// timeMethods are the methods of time.Time a template may call, such as
// {{ .StartTime.UTC.Format "2006-01-02 15:04" }}.
var timeMethods = map[string]func(time.Time) function{
	"Format": func(t time.Time) function {
		return function{params: fixed(stringParam), makes: true, call: func(a []any) (any, error) { return t.Format(a[0].(string)), nil }}
	},
	"UTC":       niladic(func(t time.Time) any { return t.UTC() }),
	"Local":     niladic(func(t time.Time) any { return t.Local() }),
	"String":    niladic(func(t time.Time) any { return t.String() }),
	"IsZero":    niladic(func(t time.Time) any { return t.IsZero() }),
	"Unix":      niladic(func(t time.Time) any { return t.Unix() }),
	"UnixMilli": niladic(func(t time.Time) any { return t.UnixMilli() }),
	"UnixNano":  niladic(func(t time.Time) any { return t.UnixNano() }),
	"Year":      niladic(func(t time.Time) any { return t.Year() }),
	"YearDay":   niladic(func(t time.Time) any { return t.YearDay() }),
	"Day":       niladic(func(t time.Time) any { return t.Day() }),
	"Hour":      niladic(func(t time.Time) any { return t.Hour() }),
	"Minute":    niladic(func(t time.Time) any { return t.Minute() }),
	"Second":    niladic(func(t time.Time) any { return t.Second() }),
}

func niladic(f func(time.Time) any) func(time.Time) function {
	return func(t time.Time) function {
		return function{call: func([]any) (any, error) { return f(t), nil }}
	}
}

// indirect follows pointers (and interfaces) to a value; isNil reports a nil on the way.
func indirect(v reflect.Value) (rv reflect.Value, isNil bool) {
	for ; v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface; v = v.Elem() {
		if v.IsNil() {
			return v, true
		}
	}
	return v, false
}

func length(a []any) (any, error) {
	if a[0] == nil {
		return nil, errors.New("len of nil")
	}
	v, isNil := indirect(reflect.ValueOf(a[0]))
	if isNil {
		return nil, errors.New("len of nil pointer")
	}
	switch v.Kind() {
	case reflect.Array, reflect.Chan, reflect.Map, reflect.Slice, reflect.String:
		return v.Len(), nil
	}
	return nil, fmt.Errorf("len of type %s", v.Type())
}

// index is index ITEM KEYS...: an element of a list or array, a byte of a string, or a map's
// value (the zero value when the key is absent).
func index(a []any) (any, error) {
	if a[0] == nil {
		return nil, errors.New("index of untyped nil")
	}
	item := reflect.ValueOf(a[0])
	for _, key := range a[1:] {
		var isNil bool
		if item, isNil = indirect(item); isNil {
			return nil, errors.New("index of nil pointer")
		}
		switch item.Kind() {
		case reflect.Array, reflect.Slice, reflect.String:
			i, err := position(key, item.Len())
			if err != nil {
				return nil, err
			}
			if i == item.Len() { // position allows the length itself, for slice's bounds
				return nil, fmt.Errorf("index out of range: %d", i)
			}
			item = item.Index(i)
		case reflect.Map:
			k, err := mapKey(key, item.Type().Key())
			if err != nil {
				return nil, err
			}
			if v := item.MapIndex(k); v.IsValid() {
				item = v
			} else {
				item = reflect.Zero(item.Type().Elem())
			}
		default:
			return nil, fmt.Errorf("can't index item of type %s", item.Type())
		}
	}
	return fromValue(item), nil
}

// mapKey converts an index argument to a map's key type: assignable, or one integer type to
// another.
func mapKey(key any, typ reflect.Type) (reflect.Value, error) {
	v := reflect.ValueOf(key)
	if !v.IsValid() {
		if !canBeNil(typ) {
			return v, fmt.Errorf("value is nil; should be of type %s", typ)
		}
		return reflect.Zero(typ), nil
	}
	if v.Type().AssignableTo(typ) {
		return v, nil
	}
	if intLike(v.Kind()) && intLike(typ.Kind()) && v.Type().ConvertibleTo(typ) {
		return v.Convert(typ), nil
	}
	return v, fmt.Errorf("value has type %s; should be %s", v.Type(), typ)
}

func intLike(k reflect.Kind) bool {
	switch k {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return true
	}
	return false
}

// slice is slice ITEM [LOW [HIGH [MAX]]] on a string, list or array, with Go's bounds.
func slice(a []any) (any, error) {
	if a[0] == nil {
		return nil, errors.New("slice of untyped nil")
	}
	item, isNil := indirect(reflect.ValueOf(a[0]))
	if isNil {
		return nil, errors.New("slice of nil pointer")
	}
	indexes := a[1:]
	if len(indexes) > 3 {
		return nil, fmt.Errorf("too many slice indexes: %d", len(indexes))
	}
	var capacity int
	switch item.Kind() {
	case reflect.String:
		if len(indexes) == 3 {
			return nil, errors.New("cannot 3-index slice a string")
		}
		capacity = item.Len()
	case reflect.Array, reflect.Slice:
		capacity = item.Cap()
	default:
		return nil, fmt.Errorf("can't slice item of type %s", item.Type())
	}
	if item.Kind() == reflect.Array && !item.CanAddr() {
		// An array held by value cannot be sliced in place; a copy can.
		c := reflect.New(item.Type()).Elem()
		c.Set(item)
		item = c
	}
	bounds := [3]int{0, item.Len(), capacity}
	for i, x := range indexes {
		var err error
		if bounds[i], err = position(x, capacity); err != nil {
			return nil, err
		}
	}
	if bounds[0] > bounds[1] {
		return nil, fmt.Errorf("invalid slice index: %d > %d", bounds[0], bounds[1])
	}
	if len(indexes) < 3 {
		return fromValue(item.Slice(bounds[0], bounds[1])), nil
	}
	if bounds[1] > bounds[2] {
		return nil, fmt.Errorf("invalid slice index: %d > %d", bounds[1], bounds[2])
	}
	return fromValue(item.Slice3(bounds[0], bounds[1], bounds[2])), nil
}

// position converts an index argument to an int in [0, last].
func position(x any, last int) (int, error) {
	v := reflect.ValueOf(x)
	var i int64
	switch kindOf(x) {
	case intKind:
		i = v.Int()
	case uintKind:
		i = int64(v.Uint())
	case invalidKind:
		return 0, errors.New("cannot index slice/array with nil")
	default:
		return 0, fmt.Errorf("cannot index slice/array with type %T", x)
	}
	if i < 0 || int(i) < 0 || int(i) > last {
		return 0, fmt.Errorf("index out of range: %d", i)
	}
	return int(i), nil
}

// basicKind groups values as text/template's comparisons do.
type basicKind int

const (
	otherKind basicKind = iota
	invalidKind
	boolKind
	intKind
	uintKind
	floatKind
	complexKind
	stringKind
)

func kindOf(v any) basicKind {
	switch reflect.ValueOf(v).Kind() {
	case reflect.Invalid:
		return invalidKind
	case reflect.Bool:
		return boolKind
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return intKind
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return uintKind
	case reflect.Float32, reflect.Float64:
		return floatKind
	case reflect.Complex64, reflect.Complex128:
		return complexKind
	case reflect.String:
		return stringKind
	}
	return otherKind
}

var (
	errIncompatible = errors.New("incompatible types for comparison")
	errNotOrdered   = errors.New("invalid type for comparison")
)

func eq(a []any) (any, error) {
	if len(a) == 1 {
		return nil, errors.New("missing argument for comparison")
	}
	for _, other := range a[1:] {
		if same, err := equal(a[0], other); same || err != nil {
			return same, err
		}
	}
	return false, nil
}

func equal(a, b any) (bool, error) {
	ka, kb := kindOf(a), kindOf(b)
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	if ka != kb {
		switch {
		case ka == intKind && kb == uintKind:
			return va.Int() >= 0 && uint64(va.Int()) == vb.Uint(), nil
		case ka == uintKind && kb == intKind:
			return vb.Int() >= 0 && va.Uint() == uint64(vb.Int()), nil
		case va.IsValid() && vb.IsValid():
			return false, errIncompatible
		}
		// nil against a value of another kind: equal only to a nil list, map or pointer.
		if ka != otherKind && kb != otherKind {
			return false, nil
		}
	}
	switch ka {
	case boolKind:
		return va.Bool() == vb.Bool(), nil
	case intKind:
		return va.Int() == vb.Int(), nil
	case uintKind:
		return va.Uint() == vb.Uint(), nil
	case floatKind:
		return va.Float() == vb.Float(), nil
	case complexKind:
		return va.Complex() == vb.Complex(), nil
	case stringKind:
		return va.String() == vb.String(), nil
	}
	if va.IsValid() && vb.IsValid() && va.Kind() != vb.Kind() {
		return false, fmt.Errorf("non-comparable types %T and %T", a, b)
	}
	if isNil(va) || isNil(vb) {
		return isNil(va) == isNil(vb), nil
	}
	if !vb.Type().Comparable() {
		return false, fmt.Errorf("non-comparable type %T", b)
	}
	return a == b, nil
}

// isNil reports no value, or a nil list, map, pointer, channel or function.
func isNil(v reflect.Value) bool {
	if !v.IsValid() {
		return true
	}
	switch v.Kind() {
	case reflect.Chan, reflect.Func, reflect.Interface, reflect.Map, reflect.Pointer, reflect.Slice:
		return v.IsNil()
	}
	return false
}

func less(a, b any) (bool, error) {
	ka, kb := kindOf(a), kindOf(b)
	for _, k := range []basicKind{ka, kb} {
		if k == otherKind || k == invalidKind || k == boolKind || k == complexKind {
			return false, errNotOrdered
		}
	}
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	if ka != kb {
		switch {
		case ka == intKind && kb == uintKind:
			return va.Int() < 0 || uint64(va.Int()) < vb.Uint(), nil
		case ka == uintKind && kb == intKind:
			return vb.Int() >= 0 && va.Uint() < uint64(vb.Int()), nil
		}
		return false, errIncompatible
	}
	switch ka {
	case intKind:
		return va.Int() < vb.Int(), nil
	case uintKind:
		return va.Uint() < vb.Uint(), nil
	case floatKind:
		return va.Float() < vb.Float(), nil
	}
	return va.String() < vb.String(), nil
}

func lessOrEqual(a, b any) (bool, error) {
	if lt, err := less(a, b); lt || err != nil {
		return lt, err
	}
	return equal(a, b)
}
