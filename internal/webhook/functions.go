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
	"print":    {params: fixed(anyParam), variadic: true, call: func(a []any) (any, error) { return fmt.Sprint(a...), nil }},
	"println":  {params: fixed(anyParam), variadic: true, call: func(a []any) (any, error) { return fmt.Sprintln(a...), nil }},
	"printf":   {params: fixed(stringParam, anyParam), variadic: true, call: func(a []any) (any, error) { return fmt.Sprintf(a[0].(string), a[1:]...), nil }},
	"html":     {params: fixed(anyParam), variadic: true, call: func(a []any) (any, error) { return template.HTMLEscaper(a...), nil }},
	"js":       {params: fixed(anyParam), variadic: true, call: func(a []any) (any, error) { return template.JSEscaper(a...), nil }},
	"urlquery": {params: fixed(anyParam), variadic: true, call: func(a []any) (any, error) { return template.URLQueryEscaper(a...), nil }},
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

// functionNames is what the parser accepts as function names: the built-ins, nothing more.
func functionNames() map[string]any {
	names := make(map[string]any, len(builtins))
	for name := range builtins {
		names[name] = true
	}
	return names
}

func jsonMethod(n Notification) function {
	return function{params: fixed(anyParam), call: func(a []any) (any, error) { return n.JSON(a[0]) }}
}

// timeMethods are the methods of time.Time a template may call, such as
// {{ .StartTime.UTC.Format "2006-01-02 15:04" }}.
var timeMethods = map[string]func(time.Time) function{
	"Format": func(t time.Time) function {
		return function{params: fixed(stringParam), call: func(a []any) (any, error) { return t.Format(a[0].(string)), nil }}
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

func length(a []any) (any, error) {
	switch v := a[0].(type) {
	case string:
		return len(v), nil
	case []string:
		return len(v), nil
	case map[string]string:
		return len(v), nil
	case nil:
		return nil, errors.New("len of nil")
	}
	return nil, fmt.Errorf("len of type %T", a[0])
}

// index is index ITEM KEYS...: an element of a list, a byte of a string or a label value
// ("" when the label is absent).
func index(a []any) (any, error) {
	item := a[0]
	if item == nil {
		return nil, errors.New("index of untyped nil")
	}
	for _, key := range a[1:] {
		switch v := item.(type) {
		case []string:
			i, err := position(key, len(v)-1)
			if err != nil {
				return nil, err
			}
			item = v[i]
		case string:
			i, err := position(key, len(v)-1)
			if err != nil {
				return nil, err
			}
			item = v[i]
		case map[string]string:
			k, ok := key.(string)
			if !ok {
				return nil, fmt.Errorf("value has type %T; should be string", key)
			}
			item = v[k]
		default:
			return nil, fmt.Errorf("can't index item of type %T", item)
		}
	}
	return item, nil
}

// slice is slice ITEM [LOW [HIGH [MAX]]] on a string or a list, with Go's bounds.
func slice(a []any) (any, error) {
	indexes := a[1:]
	if len(indexes) > 3 {
		return nil, fmt.Errorf("too many slice indexes: %d", len(indexes))
	}
	var length, capacity int
	switch v := a[0].(type) {
	case string:
		if len(indexes) == 3 {
			return nil, errors.New("cannot 3-index slice a string")
		}
		length, capacity = len(v), len(v)
	case []string:
		length, capacity = len(v), cap(v)
	case nil:
		return nil, errors.New("slice of untyped nil")
	default:
		return nil, fmt.Errorf("can't slice item of type %T", a[0])
	}
	bounds := [3]int{0, length, capacity}
	for i, x := range indexes {
		var err error
		if bounds[i], err = position(x, capacity); err != nil {
			return nil, err
		}
	}
	if bounds[0] > bounds[1] {
		return nil, fmt.Errorf("invalid slice index: %d > %d", bounds[0], bounds[1])
	}
	if bounds[1] > bounds[2] {
		return nil, fmt.Errorf("invalid slice index: %d > %d", bounds[1], bounds[2])
	}
	if s, ok := a[0].(string); ok {
		return s[bounds[0]:bounds[1]], nil
	}
	return a[0].([]string)[bounds[0]:bounds[1]:bounds[2]], nil
}

// position converts an index argument to an int in [0, last].
func position(x any, last int) (int, error) {
	switch kindOf(x) {
	case intKind, uintKind:
	case invalidKind:
		return 0, errors.New("cannot index slice/array with nil")
	default:
		return 0, fmt.Errorf("cannot index slice/array with type %T", x)
	}
	i := asInt64(x)
	if i < 0 || i > int64(last) {
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
	switch v.(type) {
	case nil:
		return invalidKind
	case bool:
		return boolKind
	case int, int64:
		return intKind
	case uint8:
		return uintKind
	case float64:
		return floatKind
	case complex128:
		return complexKind
	case string:
		return stringKind
	}
	return otherKind
}

func asInt64(v any) int64 {
	switch v := v.(type) {
	case int:
		return int64(v)
	case int64:
		return v
	case uint8:
		return int64(v)
	}
	return 0
}

// sameIntType is i with the integer type of like: ranging over an int64 yields int64s.
func sameIntType(like any, i int64) any {
	switch like.(type) {
	case int64:
		return i
	case uint8:
		return uint8(i)
	}
	return int(i)
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
	if ka != kb {
		switch {
		case ka == intKind && kb == uintKind, ka == uintKind && kb == intKind:
			return asInt64(a) == asInt64(b), nil // a uint8 always fits
		case a == nil || b == nil:
			return isNilCollection(a) || isNilCollection(b), nil // nil equals a nil list or map
		}
		return false, errIncompatible
	}
	switch ka {
	case intKind, uintKind:
		return asInt64(a) == asInt64(b), nil
	case otherKind:
		// As text/template: values of one kind compare (two structs of different types are
		// simply unequal), provided the second is of a comparable type.
		ta, tb := reflect.TypeOf(a), reflect.TypeOf(b)
		if ta.Kind() != tb.Kind() {
			return false, fmt.Errorf("non-comparable types %T and %T", a, b)
		}
		if isNilCollection(a) || isNilCollection(b) {
			return isNilCollection(a) == isNilCollection(b), nil
		}
		if !tb.Comparable() {
			return false, fmt.Errorf("non-comparable type %T", b)
		}
	}
	return a == b, nil
}

func isNilCollection(v any) bool {
	switch v := v.(type) {
	case []string:
		return v == nil
	case map[string]string:
		return v == nil
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
	if ka != kb {
		if (ka == intKind || ka == uintKind) && (kb == intKind || kb == uintKind) {
			return asInt64(a) < asInt64(b), nil
		}
		return false, errIncompatible
	}
	switch ka {
	case intKind, uintKind:
		return asInt64(a) < asInt64(b), nil
	case floatKind:
		return a.(float64) < b.(float64), nil
	}
	return a.(string) < b.(string), nil
}

func lessOrEqual(a, b any) (bool, error) {
	if lt, err := less(a, b); lt || err != nil {
		return lt, err
	}
	return equal(a, b)
}
