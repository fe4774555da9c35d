// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"sync"
	"text/template/parse"

	"github.com/Masterminds/sprig/v3"
)

// NTH renders its webhook templates with sprig's functions, so templates written for NTH call
// upper, trimPrefix, join, default, toJson and the like. Lifeboat offers sprig's hermetic set
// (no clock, no randomness, no environment, no DNS) less what could read the process's
// secrets or tie it up; a ConfigMap editor must not be able to read the agent's credentials
// through a template.

// withheld are sprig functions a template may not call, and why.
var withheld = map[string]string{
	"env":                      "it reads the process's environment",
	"expandenv":                "it reads the process's environment",
	"getHostByName":            "it queries DNS",
	"genPrivateKey":            "it generates keys: slow, and of no use in a message",
	"genCA":                    "it generates keys: slow, and of no use in a message",
	"genCAWithKey":             "it generates certificates: of no use in a message",
	"genSelfSignedCert":        "it generates keys: slow, and of no use in a message",
	"genSelfSignedCertWithKey": "it generates certificates: of no use in a message",
	"genSignedCert":            "it generates keys: slow, and of no use in a message",
	"genSignedCertWithKey":     "it generates certificates: of no use in a message",
	"buildCustomCert":          "it handles certificates: of no use in a message",
	"bcrypt":                   "it is deliberately slow",
	"htpasswd":                 "it is deliberately slow",
	"derivePassword":           "it is deliberately slow",
	// Go's own slice is kept (it slices strings too, which Lifeboat's templates rely on).
	"slice": "",
}

// sprigFunctions are the sprig functions a template may call, as reflect values, and the
// names of the ones that sprig's full set has and Lifeboat withholds. Built on first use: a
// Lifeboat without a webhook never pays for them.
var sprigFunctions = sync.OnceValues(func() (map[string]reflect.Value, map[string]bool) {
	all := sprig.TxtFuncMap()
	hermetic := sprig.HermeticTxtFuncMap()
	wrapped := bounded(all)
	ext := map[string]reflect.Value{}
	for name, fn := range hermetic {
		if _, no := withheld[name]; no {
			continue
		}
		if b, ok := wrapped[name]; ok {
			fn = b
		} else if size, ok := growth[name]; ok {
			fn = guarded(fn, size)
		}
		ext[name] = reflect.ValueOf(fn)
	}
	missing := map[string]bool{}
	for name := range all {
		if _, ok := ext[name]; !ok && name != "slice" {
			missing[name] = true
		}
	}
	return ext, missing
})

func extensions() map[string]reflect.Value { ext, _ := sprigFunctions(); return ext }

func notOffered(name string) bool { _, missing := sprigFunctions(); return missing[name] }

// FuncMap is the functions a webhook template may call besides Go's built-in ones, for
// rendering with text/template in tests.
func FuncMap() map[string]any {
	m := make(map[string]any, len(extensions()))
	for name, fn := range extensions() {
		m[name] = fn.Interface()
	}
	return m
}

var undefinedFunction = regexp.MustCompile(`function "([^"]+)" not defined`)

// explainUndefined names why a function sprig has is not offered, when that is the parse
// error.
func explainUndefined(err error) error {
	m := undefinedFunction.FindStringSubmatch(err.Error())
	if m == nil || !notOffered(m[1]) {
		return err
	}
	why := withheld[m[1]]
	if why == "" {
		why = "its result would change from one run to the next (clock, randomness)"
	}
	return fmt.Errorf("function %q is not available in webhook templates: %s", m[1], why)
}

// bounded wraps the sprig functions whose result is a range of numbers: a range is refused
// past maxSteps numbers, as a loop is; within the bound they are sprig's.
func bounded(all map[string]any) map[string]any {
	until := all["until"].(func(int) []int)
	untilStep := all["untilStep"].(func(int, int, int) []int)
	seq := all["seq"].(func(...int) string)
	sortAlpha := all["sortAlpha"].(func(any) []string)
	return map[string]any{
		// sprig sorts a []string in place: the notification's pods would be reordered for
		// whoever holds them after the render.
		"sortAlpha": func(list any) []string {
			if l, ok := list.([]string); ok {
				list = slices.Clone(l)
			}
			return sortAlpha(list)
		},
		"until": func(count int) ([]int, error) {
			if err := fewSteps(0, count, 1); err != nil {
				return nil, err
			}
			return until(count), nil
		},
		"untilStep": func(start, stop, step int) ([]int, error) {
			if err := fewSteps(start, stop, step); err != nil {
				return nil, err
			}
			return untilStep(start, stop, step), nil
		},
		"seq": func(params ...int) (string, error) {
			var err error
			switch len(params) {
			case 1:
				err = fewSteps(1, params[0], 1)
			case 2:
				err = fewSteps(params[0], params[1], 1)
			case 3:
				err = fewSteps(params[0], params[2], params[1])
			}
			if err != nil {
				return "", err
			}
			return seq(params...), nil
		},
	}
}

// fewSteps refuses a range from start to stop by step of more than maxSteps numbers.
func fewSteps(start, stop, step int) error {
	span := int64(stop) - int64(start)
	if span < 0 {
		span = -span
	}
	by := int64(step)
	if by < 0 {
		by = -by
	}
	if by == 0 {
		by = 1
	}
	if span/by >= maxSteps {
		return fmt.Errorf("more than %d numbers", maxSteps)
	}
	return nil
}

// callGo calls a Go function for a template: arguments are checked and converted as
// text/template does for the parameter types, and a panic becomes the call's error.
func (e *execution) callGo(dot any, n parse.Node, name string, fn reflect.Value, args []parse.Node, final any) (any, error) {
	argv, err := e.goArgs(dot, n, name, fn.Type(), args, final)
	if err != nil {
		return nil, err
	}
	out, err := safeCall(fn, argv)
	if err != nil {
		return nil, e.fail(n, "error calling %s: %v", name, err)
	}
	result := fromValue(out)
	return result, e.account(n, name, result, true)
}

// goArgs evaluates a call's arguments for the parameters of typ, the value piped into it
// (final) last; their number must be typ's.
func (e *execution) goArgs(dot any, n parse.Node, name string, typ reflect.Type, args []parse.Node, final any) ([]reflect.Value, error) {
	numIn := len(args)
	if final != (noFinal{}) {
		numIn++
	}
	numFixed := len(args)
	if typ.IsVariadic() {
		numFixed = typ.NumIn() - 1
		if numIn < numFixed {
			return nil, e.fail(n, "wrong number of args for %s: want at least %d got %d", name, typ.NumIn()-1, len(args))
		}
	} else if numIn != typ.NumIn() {
		return nil, e.fail(n, "wrong number of args for %s: want %d got %d", name, typ.NumIn(), numIn)
	}
	argv := make([]reflect.Value, numIn)
	for i, arg := range args {
		t := paramType(typ, i, numFixed)
		v, err := e.goArg(dot, arg, t)
		if err != nil {
			return nil, err
		}
		argv[i] = v
	}
	if final != (noFinal{}) {
		v, err := e.convert(n, final, paramType(typ, numIn-1, numFixed))
		if err != nil {
			return nil, err
		}
		argv[numIn-1] = v
	}
	return argv, nil
}

// paramType is the type of the i-th argument to a function of type typ with numFixed
// parameters before its variadic ones, if it has any.
func paramType(typ reflect.Type, i, numFixed int) reflect.Type {
	if typ.IsVariadic() && i >= numFixed {
		return typ.In(typ.NumIn() - 1).Elem()
	}
	return typ.In(i)
}

func safeCall(fn reflect.Value, args []reflect.Value) (v reflect.Value, err error) {
	defer func() {
		if r := recover(); r != nil {
			if e, ok := r.(error); ok {
				err = e
			} else {
				err = fmt.Errorf("%v", r)
			}
		}
	}()
	out := fn.Call(args)
	if len(out) == 2 && !out[1].IsNil() {
		return out[0], out[1].Interface().(error)
	}
	return out[0], nil
}

// fromValue is v as the evaluator holds values: the dynamic value, nil for none.
func fromValue(v reflect.Value) any {
	if v.Kind() == reflect.Interface {
		if v.IsNil() {
			return nil
		}
		v = v.Elem()
	}
	if !v.IsValid() || !v.CanInterface() {
		return nil
	}
	return v.Interface()
}

// goArg evaluates an argument for a parameter of type typ. Constants take the parameter's
// type; other arguments are evaluated, then checked against it.
func (e *execution) goArg(dot any, n parse.Node, typ reflect.Type) (reflect.Value, error) {
	switch n := n.(type) {
	case *parse.DotNode:
		return e.convert(n, dot, typ)
	case *parse.NilNode:
		if canBeNil(typ) {
			return reflect.Zero(typ), nil
		}
		return reflect.Value{}, e.fail(n, "cannot assign nil to %s", typ)
	case *parse.FieldNode, *parse.VariableNode, *parse.PipeNode, *parse.IdentifierNode, *parse.ChainNode:
		v, err := e.arg(dot, n)
		if err != nil {
			return reflect.Value{}, err
		}
		return e.convert(n, v, typ)
	}
	if typ.Kind() == reflect.Interface && typ.NumMethod() == 0 {
		v, err := e.arg(dot, n)
		if err != nil {
			return reflect.Value{}, err
		}
		return e.convert(n, v, typ)
	}
	return e.typedConstant(n, typ)
}

// typedConstant is the constant n as a value of the parameter type typ, which must be of its
// kind.
func (e *execution) typedConstant(n parse.Node, typ reflect.Type) (reflect.Value, error) {
	value := reflect.New(typ).Elem()
	num, _ := n.(*parse.NumberNode)
	switch typ.Kind() {
	case reflect.Bool:
		if b, ok := n.(*parse.BoolNode); ok {
			value.SetBool(b.True)
			return value, nil
		}
		return value, e.fail(n, "expected bool; found %s", n)
	case reflect.String:
		if s, ok := n.(*parse.StringNode); ok {
			value.SetString(s.Text)
			return value, nil
		}
		return value, e.fail(n, "expected string; found %s", n)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if num != nil && num.IsInt {
			value.SetInt(num.Int64)
			return value, nil
		}
		return value, e.fail(n, "expected integer; found %s", n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if num != nil && num.IsUint {
			value.SetUint(num.Uint64)
			return value, nil
		}
		return value, e.fail(n, "expected unsigned integer; found %s", n)
	case reflect.Float32, reflect.Float64:
		if num != nil && num.IsFloat {
			value.SetFloat(num.Float64)
			return value, nil
		}
		return value, e.fail(n, "expected float; found %s", n)
	case reflect.Complex64, reflect.Complex128:
		if num != nil && num.IsComplex {
			value.SetComplex(num.Complex128)
			return value, nil
		}
		return value, e.fail(n, "expected complex; found %s", n)
	}
	return reflect.Value{}, e.fail(n, "can't handle %s for arg of type %s", n, typ)
}

// convert checks that v can be passed as typ, dereferencing a pointer once if that helps.
func (e *execution) convert(n parse.Node, v any, typ reflect.Type) (reflect.Value, error) {
	rv := reflect.ValueOf(v)
	if !rv.IsValid() {
		if canBeNil(typ) {
			return reflect.Zero(typ), nil
		}
		return rv, e.fail(n, "invalid value; expected %s", typ)
	}
	if rv.Type().AssignableTo(typ) {
		return rv, nil
	}
	if rv.Kind() == reflect.Pointer && rv.Type().Elem().AssignableTo(typ) {
		if rv.IsNil() {
			return rv, e.fail(n, "dereference of nil pointer of type %s", typ)
		}
		return rv.Elem(), nil
	}
	return rv, e.fail(n, "wrong type for value; expected %s; got %s", typ, rv.Type())
}

func canBeNil(typ reflect.Type) bool {
	switch typ.Kind() {
	case reflect.Chan, reflect.Func, reflect.Interface, reflect.Map, reflect.Pointer, reflect.Slice:
		return true
	}
	return false
}
