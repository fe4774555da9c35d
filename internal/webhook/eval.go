// SPDX-License-Identifier: Apache-2.0

package webhook

// This file runs text/template parse trees over a Notification.
//
// Why not text/template's own Execute: it finds methods by name at run time
// (reflect.Value.MethodByName), and once a binary can do that the linker must keep every
// exported method of every type it links, which more than doubled the binary
// (docs/design/template-evaluator.md). Templates keep text/template's
// syntax, parser, built-in functions and printing, and sprig's functions (sprig.go), which are
// called through reflect.Value.Call, not looked up by name. Methods a template can reach are
// closed: Notification's JSON and the time.Time methods listed in timeMethods; other values
// (what sprig returns: lists, dicts, numbers) are reached as fields of a map, indexed, ranged
// over, compared and printed as text/template does.
//
// The differential fuzz test (FuzzEvaluatorMatchesTextTemplate) holds this evaluator to
// text/template's output on every template both accept.

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"strings"
	"text/template/parse"
	"time"
)

var (
	errBreak    = errors.New("break outside a range")
	errContinue = errors.New("continue outside a range")
	errTooMuch  = fmt.Errorf("more than %d loop iterations or template calls", maxSteps)
	errTooBusy  = fmt.Errorf("the template's commands, function calls and the values they make come to more than %d bytes in one render", maxRenderBytes)
)

// noFinal marks a command that has no value piped into it.
type noFinal struct{}

type variable struct {
	name  string
	value any
}

// execution is one render: its output, variables and step count.
type execution struct {
	trees          map[string]*parse.Tree
	tree           *parse.Tree // the template running now, for error positions
	out            io.Writer
	vars           []variable
	steps          int
	spent          int  // of maxRenderBytes
	missingKeyZero bool // a missing map key yields "" instead of an error (the start-up renders)
}

// execute renders the template called name from trees with data as dot.
func execute(trees map[string]*parse.Tree, name string, out io.Writer, data Notification, missingKeyZero bool) error {
	t := trees[name]
	if t == nil || t.Root == nil {
		return fmt.Errorf("%q is an incomplete or empty template", name)
	}
	e := &execution{trees: trees, tree: t, out: out, vars: []variable{{"$", data}}, missingKeyZero: missingKeyZero}
	err := e.walk(data, t.Root)
	if errors.Is(err, errBreak) || errors.Is(err, errContinue) {
		return nil // the parser only accepts break and continue inside a range
	}
	return err
}

// fail is an error at node n, with its position in the template text.
func (e *execution) fail(n parse.Node, format string, args ...any) error {
	location, context := e.tree.ErrorContext(n)
	return fmt.Errorf("%s: executing at <%s>: %s", location, context, fmt.Sprintf(format, args...))
}

func (e *execution) step(n parse.Node) error {
	e.steps++
	if e.steps > maxSteps {
		location, _ := e.tree.ErrorContext(n)
		return fmt.Errorf("%s: %w", location, errTooMuch)
	}
	return nil
}

// spend counts cost against the render's budget (maxRenderBytes).
func (e *execution) spend(n parse.Node, cost int) error {
	e.spent += cost
	if e.spent > maxRenderBytes {
		location, _ := e.tree.ErrorContext(n)
		return fmt.Errorf("%s: %w", location, errTooBusy)
	}
	return nil
}

// account counts a call against the budget; a value it made (makes) is refused when a body
// could not hold it, and counts with its size. Lists can hold lists: a few calls that each
// double a structure, by sharing it, would make the next toJson or print of it run without
// end.
func (e *execution) account(n parse.Node, name string, v any, makes bool) error {
	cost := callCost
	if makes {
		length, items := measure(v)
		if err := within(measured(length)); err != nil {
			return e.fail(n, "error calling %s: %v", name, err)
		}
		cost = sum(cost, length, product(items, itemCost))
	}
	return e.spend(n, cost)
}

func (e *execution) mark() int { return len(e.vars) }
func (e *execution) pop(mark int) {
	e.vars = e.vars[:mark]
}

func (e *execution) walk(dot any, node parse.Node) error {
	switch n := node.(type) {
	case *parse.ActionNode:
		v, err := e.pipeline(dot, n.Pipe)
		if err != nil || len(n.Pipe.Decl) > 0 {
			return err
		}
		return e.print(n, v)
	case *parse.BreakNode:
		return errBreak
	case *parse.ContinueNode:
		return errContinue
	case *parse.CommentNode:
		return nil
	case *parse.IfNode:
		return e.ifOrWith(dot, &n.BranchNode, false)
	case *parse.WithNode:
		return e.ifOrWith(dot, &n.BranchNode, true)
	case *parse.ListNode:
		for _, child := range n.Nodes {
			if err := e.walk(dot, child); err != nil {
				return err
			}
		}
		return nil
	case *parse.RangeNode:
		return e.rangeOver(dot, n)
	case *parse.TemplateNode:
		return e.callTemplate(dot, n)
	case *parse.TextNode:
		_, err := e.out.Write(n.Text)
		return err
	}
	return e.fail(node, "unknown node %s", node)
}

func (e *execution) print(n parse.Node, v any) error {
	if v == nil {
		_, err := io.WriteString(e.out, "<no value>")
		return err
	}
	// As text/template: a pointer prints as what it points to unless it has its own String
	// or Error; channels and functions do not print.
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer && !rv.Type().Implements(stringerType) && !rv.Type().Implements(errorType) {
		if pointee, isNil := indirect(rv); !isNil {
			v = fromValue(pointee)
		}
	}
	switch rv.Kind() {
	case reflect.Chan, reflect.Func:
		return e.fail(n, "can't print %s of type %T", n, v)
	}
	if s, ok := v.(string); ok {
		_, err := io.WriteString(e.out, s) // the writer refuses it whole
		return err
	}
	// fmt builds the whole text before writing it: refuse first what could not fit.
	if out, ok := e.out.(*boundedBuffer); ok && printedLength(v, out.room()) > out.room() {
		return errTooLarge
	}
	if _, err := fmt.Fprint(e.out, v); err != nil {
		if errors.Is(err, errTooLarge) {
			return err
		}
		return e.fail(n, "%v", err)
	}
	return nil
}

func (e *execution) ifOrWith(dot any, b *parse.BranchNode, with bool) error {
	defer e.pop(e.mark())
	v, err := e.pipeline(dot, b.Pipe)
	if err != nil {
		return err
	}
	switch {
	case truth(v) && with:
		return e.walk(v, b.List)
	case truth(v):
		return e.walk(dot, b.List)
	case b.ElseList != nil:
		return e.walk(dot, b.ElseList)
	}
	return nil
}

func (e *execution) rangeOver(dot any, r *parse.RangeNode) error {
	defer e.pop(e.mark())
	v, err := e.pipeline(dot, r.Pipe)
	if err != nil {
		return err
	}
	mark := e.mark()
	loop := &rangeLoop{e: e, r: r}
	if err := loop.over(v); err != nil {
		return err
	}
	e.pop(mark)
	if !loop.ran && r.ElseList != nil {
		// A break in the else list (allowed there inside an outer range) ends this range
		// only, as in text/template.
		if err := e.walk(dot, r.ElseList); !errors.Is(err, errBreak) {
			return err
		}
	}
	return nil
}

// rangeLoop is one range's iterations over its value.
type rangeLoop struct {
	e   *execution
	r   *parse.RangeNode
	ran bool // the body ran at least once: the else list does not
}

// over runs the body for each element of v, as text/template ranges over it: a slice or
// array, a map in key order, or an integer's count; nothing for no value.
func (l *rangeLoop) over(v any) error {
	e, r := l.e, l.r
	val, _ := indirect(reflect.ValueOf(v))
	switch val.Kind() {
	case reflect.Array, reflect.Slice:
		for i := 0; i < val.Len(); i++ {
			if more, err := l.iterate(i, fromValue(val.Index(i))); !more {
				return err
			}
		}
	case reflect.Map:
		keys, err := sortedKeys(val)
		if err != nil {
			return e.fail(r, "%v", err)
		}
		for _, k := range keys {
			if more, err := l.iterate(fromValue(k), fromValue(val.MapIndex(k))); !more {
				return err
			}
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if len(r.Pipe.Decl) > 1 {
			return e.fail(r, "can't use %v to iterate over more than one variable", v)
		}
		for i := range val.Seq() {
			if more, err := l.iterate(nil, fromValue(i)); !more {
				return err
			}
		}
	case reflect.Invalid:
	default:
		if val.Kind() == reflect.Chan || val.Kind() == reflect.Func {
			return e.fail(r, "range over %s is not available in webhook templates", val.Type())
		}
		return e.fail(r, "range can't iterate over %v", v)
	}
	return nil
}

// iterate runs the body once; it reports whether the loop goes on.
func (l *rangeLoop) iterate(index, elem any) (bool, error) {
	e, r := l.e, l.r
	l.ran = true
	if err := e.step(r); err != nil {
		return false, err
	}
	if err := e.setRangeVars(r.Pipe, index, elem); err != nil {
		return false, err
	}
	defer e.pop(e.mark())
	switch err := e.walk(elem, r.List); {
	case errors.Is(err, errBreak):
		return false, nil
	case errors.Is(err, errContinue), err == nil:
		return true, nil
	default:
		return false, err
	}
}

// setRangeVars gives the range's variables this iteration's values: with one variable the
// element, with two the index (or key) and then the element.
func (e *execution) setRangeVars(p *parse.PipeNode, index, elem any) error {
	switch {
	case len(p.Decl) == 1 && p.IsAssign:
		return e.setVar(p, p.Decl[0].Ident[0], elem)
	case len(p.Decl) == 1:
		e.vars[len(e.vars)-1].value = elem
	case len(p.Decl) == 2 && p.IsAssign:
		return errors.Join(e.setVar(p, p.Decl[0].Ident[0], index), e.setVar(p, p.Decl[1].Ident[0], elem))
	case len(p.Decl) == 2:
		e.vars[len(e.vars)-2].value = index
		e.vars[len(e.vars)-1].value = elem
	}
	return nil
}

func (e *execution) callTemplate(dot any, t *parse.TemplateNode) error {
	tree := e.trees[t.Name]
	if tree == nil || tree.Root == nil {
		return e.fail(t, "no such template %q", t.Name)
	}
	if err := e.step(t); err != nil {
		return err
	}
	var newDot any
	if t.Pipe != nil {
		var err error
		if newDot, err = e.pipeline(dot, t.Pipe); err != nil {
			return err
		}
	}
	called := *e
	called.tree, called.vars = tree, []variable{{"$", newDot}}
	err := called.walk(newDot, tree.Root)
	e.steps, e.spent = called.steps, called.spent
	return err
}

func (e *execution) pipeline(dot any, p *parse.PipeNode) (any, error) {
	if p == nil {
		return nil, nil
	}
	var v any = noFinal{}
	for _, cmd := range p.Cmds {
		var err error
		if v, err = e.command(dot, cmd, v); err != nil {
			return nil, err
		}
	}
	for _, d := range p.Decl {
		if p.IsAssign {
			if err := e.setVar(d, d.Ident[0], v); err != nil {
				return nil, err
			}
		} else {
			e.vars = append(e.vars, variable{d.Ident[0], v})
		}
	}
	return v, nil
}

// setVar assigns to the innermost variable called name. The parser knows every name, but a
// declaration that and/or skipped never ran: assigning to it is an error, as in text/template.
func (e *execution) setVar(n parse.Node, name string, v any) error {
	for i := len(e.vars) - 1; i >= 0; i-- {
		if e.vars[i].name == name {
			e.vars[i].value = v
			return nil
		}
	}
	return e.fail(n, "undefined variable: %s", name)
}

func (e *execution) varValue(n parse.Node, name string) (any, error) {
	for i := len(e.vars) - 1; i >= 0; i-- {
		if e.vars[i].name == name {
			return e.vars[i].value, nil
		}
	}
	return nil, e.fail(n, "undefined variable: %s", name)
}

// command evaluates one command of a pipeline; final is the previous command's value.
func (e *execution) command(dot any, cmd *parse.CommandNode, final any) (any, error) {
	if err := e.spend(cmd, commandCost); err != nil {
		return nil, err
	}
	switch n := cmd.Args[0].(type) {
	case *parse.FieldNode:
		return e.fieldChain(dot, dot, n, n.Ident, cmd.Args, final)
	case *parse.ChainNode:
		if _, isNil := n.Node.(*parse.NilNode); isNil {
			return nil, e.fail(n, "indirection through explicit nil in %s", n)
		}
		receiver, err := e.arg(dot, n.Node)
		if err != nil {
			return nil, err
		}
		return e.fieldChain(dot, receiver, n, n.Field, cmd.Args, final)
	case *parse.IdentifierNode:
		return e.callFunction(dot, n, cmd.Args, final)
	case *parse.VariableNode:
		v, err := e.varValue(n, n.Ident[0])
		if err != nil || len(n.Ident) == 1 {
			return v, errors.Join(err, e.notAFunction(n, cmd.Args, final))
		}
		return e.fieldChain(dot, v, n, n.Ident[1:], cmd.Args, final)
	case *parse.PipeNode:
		if err := e.notAFunction(n, cmd.Args, final); err != nil {
			return nil, err
		}
		return e.pipeline(dot, n)
	case *parse.NilNode:
		return nil, e.fail(n, "nil is not a command")
	}
	if err := e.notAFunction(cmd.Args[0], cmd.Args, final); err != nil {
		return nil, err
	}
	return e.arg(dot, cmd.Args[0])
}

func (e *execution) notAFunction(n parse.Node, args []parse.Node, final any) error {
	if len(args) > 1 || final != (noFinal{}) {
		return e.fail(n, "can't give argument to non-function %s", args[0])
	}
	return nil
}

// fieldChain looks up .A.B.C on receiver; the last step gets the command's arguments.
func (e *execution) fieldChain(dot, receiver any, n parse.Node, ident []string, args []parse.Node, final any) (any, error) {
	for _, name := range ident[:len(ident)-1] {
		var err error
		if receiver, err = e.field(dot, receiver, n, name, nil, noFinal{}); err != nil {
			return nil, err
		}
	}
	return e.field(dot, receiver, n, ident[len(ident)-1], args, final)
}

// field is .name on receiver: a method, a struct field or a map key. args[0], when there are
// args, is the command's own first word.
func (e *execution) field(dot, receiver any, n parse.Node, name string, args []parse.Node, final any) (any, error) {
	hasArgs := len(args) > 1 || final != (noFinal{})
	if len(args) > 0 {
		args = args[1:]
	}
	switch r := receiver.(type) {
	case Notification:
		if name == "JSON" {
			return e.call(dot, n, name, jsonMethod(r), args, final)
		}
		f, ok := notificationField(&r, name)
		if !ok {
			return nil, e.fail(n, "can't evaluate field %s in type %T", name, r)
		}
		if hasArgs {
			return nil, e.fail(n, "%s has arguments but cannot be invoked as function", name)
		}
		return f, nil
	case map[string]string:
		if hasArgs {
			return nil, e.fail(n, "%s is not a method but has arguments", name)
		}
		v, ok := r[name]
		if !ok && !e.missingKeyZero {
			return nil, e.fail(n, "map has no entry for key %q", name)
		}
		return v, nil
	case time.Time:
		m, ok := timeMethods[name]
		if !ok {
			return nil, e.fail(n, "method %s of time.Time is not available in webhook templates (available: %s)", name, strings.Join(slices.Sorted(maps.Keys(timeMethods)), ", "))
		}
		return e.call(dot, n, name, m(r), args, final)
	case nil:
		return nil, e.fail(n, "nil data; no entry for key %q", name)
	}
	return e.otherField(receiver, n, name, hasArgs)
}

// otherField is .name on a value an extension function returned: a map's entry. Methods
// and struct fields of other types are not offered: finding a method by name at run time is
// what the evaluator avoids (see the top of this file).
func (e *execution) otherField(receiver any, n parse.Node, name string, hasArgs bool) (any, error) {
	rv, isNil := indirect(reflect.ValueOf(receiver))
	if rv.Kind() == reflect.Map && reflect.TypeFor[string]().AssignableTo(rv.Type().Key()) && rv.Type().NumMethod() == 0 {
		if hasArgs {
			return nil, e.fail(n, "%s is not a method but has arguments", name)
		}
		v := rv.MapIndex(reflect.ValueOf(name))
		if !v.IsValid() {
			if !e.missingKeyZero {
				return nil, e.fail(n, "map has no entry for key %q", name)
			}
			v = reflect.Zero(rv.Type().Elem())
		}
		return fromValue(v), nil
	}
	if isNil {
		return nil, e.fail(n, "nil pointer evaluating %T.%s", receiver, name)
	}
	if reflect.TypeOf(receiver).NumMethod() > 0 || rv.Kind() == reflect.Struct {
		return nil, e.fail(n, "field or method %s of %T is not available in webhook templates", name, receiver)
	}
	return nil, e.fail(n, "can't evaluate field %s in type %T", name, receiver)
}

var (
	stringerType = reflect.TypeFor[fmt.Stringer]()
	errorType    = reflect.TypeFor[error]()
)

func (e *execution) callFunction(dot any, id *parse.IdentifierNode, args []parse.Node, final any) (any, error) {
	if f, ok := builtins[id.Ident]; ok {
		return e.call(dot, id, id.Ident, f, args[1:], final)
	}
	if fn, ok := extensions()[id.Ident]; ok {
		return e.callGo(dot, id, id.Ident, fn, args[1:], final)
	}
	return nil, e.fail(id, "%q is not a defined function", id.Ident)
}

// call checks the argument count against f, evaluates the arguments and calls f.
func (e *execution) call(dot any, n parse.Node, name string, f function, args []parse.Node, final any) (any, error) {
	count := len(args)
	if final != (noFinal{}) {
		count++
	}
	fixed := len(f.params)
	if f.variadic {
		fixed--
		if count < fixed {
			return nil, e.fail(n, "wrong number of args for %s: want at least %d got %d", name, fixed, count)
		}
	} else if count != fixed {
		return nil, e.fail(n, "wrong number of args for %s: want %d got %d", name, fixed, count)
	}
	paramOf := func(i int) paramKind { return f.params[min(i, len(f.params)-1)] }
	if f.lazy != nil { // and, or: stop at the first argument that decides
		var v any
		for _, a := range args {
			var err error
			if v, err = e.typedArg(dot, a, valueParam); err != nil {
				return nil, err
			}
			if f.lazy(v) {
				return v, nil
			}
		}
		if final != (noFinal{}) {
			v = final
		}
		return v, nil
	}
	values := make([]any, 0, count)
	for i, a := range args {
		v, err := e.typedArg(dot, a, paramOf(i))
		if err != nil {
			return nil, err
		}
		values = append(values, v)
	}
	if final != (noFinal{}) {
		if paramOf(len(args)) == stringParam {
			if _, ok := final.(string); !ok {
				return nil, e.fail(n, "wrong type for value; expected string; got %T", final)
			}
		}
		values = append(values, final)
	}
	v, err := f.call(values)
	if err != nil {
		return nil, e.fail(n, "error calling %s: %v", name, err)
	}
	return v, e.account(n, name, v, f.makes)
}

// typedArg evaluates an argument for a parameter of kind p.
func (e *execution) typedArg(dot any, n parse.Node, p paramKind) (any, error) {
	switch _, isNil := n.(*parse.NilNode); {
	case isNil && p != stringParam:
		return nil, nil
	case p != stringParam:
		return e.arg(dot, n)
	}
	switch n := n.(type) {
	case *parse.StringNode:
		return n.Text, nil
	case *parse.BoolNode, *parse.NumberNode, *parse.DotNode:
		if _, isDot := n.(*parse.DotNode); !isDot {
			return nil, e.fail(n, "expected string; found %s", n)
		}
	case *parse.NilNode:
		return nil, e.fail(n, "cannot assign nil to string")
	}
	v, err := e.arg(dot, n)
	if err != nil {
		return nil, err
	}
	if _, ok := v.(string); !ok {
		return nil, e.fail(n, "wrong type for value; expected string; got %T", v)
	}
	return v, nil
}

// arg evaluates an argument of a command.
func (e *execution) arg(dot any, n parse.Node) (any, error) {
	switch n := n.(type) {
	case *parse.DotNode:
		return dot, nil
	case *parse.BoolNode:
		return n.True, nil
	case *parse.StringNode:
		return n.Text, nil
	case *parse.NumberNode:
		return e.constant(n)
	case *parse.NilNode:
		return nil, e.fail(n, "cannot assign nil to an argument")
	case *parse.FieldNode:
		return e.fieldChain(dot, dot, n, n.Ident, []parse.Node{n}, noFinal{})
	case *parse.VariableNode:
		v, err := e.varValue(n, n.Ident[0])
		if err != nil || len(n.Ident) == 1 {
			return v, err
		}
		return e.fieldChain(dot, v, n, n.Ident[1:], nil, noFinal{})
	case *parse.ChainNode:
		return e.command(dot, &parse.CommandNode{NodeType: parse.NodeCommand, Pos: n.Pos, Args: []parse.Node{n}}, noFinal{})
	case *parse.IdentifierNode:
		return e.callFunction(dot, n, []parse.Node{n}, noFinal{})
	case *parse.PipeNode:
		return e.pipeline(dot, n)
	}
	return nil, e.fail(n, "can't handle %s as an argument", n)
}

// constant gives a number literal the type Go would: int, float64 or complex128.
func (e *execution) constant(n *parse.NumberNode) (any, error) {
	switch {
	case n.IsComplex:
		return n.Complex128, nil
	case n.IsFloat && !isHexInt(n.Text) && !isRuneInt(n.Text) && strings.ContainsAny(n.Text, ".eEpP"):
		return n.Float64, nil
	case n.IsInt:
		if int64(int(n.Int64)) != n.Int64 {
			return nil, e.fail(n, "%s overflows int", n.Text)
		}
		return int(n.Int64), nil
	}
	return nil, e.fail(n, "%s overflows int", n.Text)
}

func isRuneInt(s string) bool { return len(s) > 0 && s[0] == '\'' }

func isHexInt(s string) bool {
	return len(s) > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') && !strings.ContainsAny(s, "pP")
}

// truth is text/template's idea of true: non-zero, non-empty, non-nil, or any struct.
func truth(v any) bool {
	if _, none := v.(noFinal); none {
		return false
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Invalid:
		return false
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return rv.Len() > 0
	case reflect.Bool:
		return rv.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rv.Int() != 0
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return rv.Uint() != 0
	case reflect.Float32, reflect.Float64:
		return rv.Float() != 0
	case reflect.Complex64, reflect.Complex128:
		return rv.Complex() != 0
	case reflect.Chan, reflect.Func, reflect.Pointer, reflect.Interface, reflect.UnsafePointer:
		return !rv.IsNil()
	}
	return true
}

// sortedKeys are a map's keys in the order text/template ranges over them, for the key
// types a template can meet (strings, numbers, booleans).
func sortedKeys(m reflect.Value) ([]reflect.Value, error) {
	keys := m.MapKeys()
	var compare func(a, b reflect.Value) int
	switch m.Type().Key().Kind() {
	case reflect.String:
		compare = func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) }
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		compare = func(a, b reflect.Value) int { return cmp.Compare(a.Int(), b.Int()) }
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		compare = func(a, b reflect.Value) int { return cmp.Compare(a.Uint(), b.Uint()) }
	case reflect.Float32, reflect.Float64:
		compare = func(a, b reflect.Value) int { return cmp.Compare(a.Float(), b.Float()) }
	case reflect.Bool:
		compare = func(a, b reflect.Value) int {
			switch {
			case a.Bool() == b.Bool():
				return 0
			case b.Bool():
				return -1
			}
			return 1
		}
	default:
		return nil, fmt.Errorf("range over a map with %s keys is not available in webhook templates", m.Type().Key())
	}
	slices.SortStableFunc(keys, compare)
	return keys, nil
}
