// SPDX-License-Identifier: Apache-2.0

package deploy_test

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// The account, region and stack the AWS set-up's tests deploy into, in both CloudFormation
// and Terraform.
const (
	testAccount   = "111122223333"
	testRegion    = "eu-west-1"
	testPartition = "aws"
	testURLSuffix = "amazonaws.com"
)

var cfnPseudo = map[string]string{
	"AWS::AccountId": testAccount, "AWS::Region": testRegion, "AWS::Partition": testPartition,
	"AWS::URLSuffix": testURLSuffix, "AWS::StackName": "lifeboat-prod",
}

// cfnResource is one resource of a deployed stack, its properties resolved.
type cfnResource struct {
	Type       string
	Properties map[string]any
}

// cfnStack is what CloudFormation would create from a template and its parameters: the
// resources whose conditions hold, their intrinsic functions resolved. A reference to another
// resource of the stack stays a token: {ref:Name} for Ref, {att:Name.Attribute} for GetAtt.
type cfnStack struct {
	Resources map[string]cfnResource
	Outputs   map[string]any
}

// cfnNoValue is AWS::NoValue: the property or list element it is given for is left out.
type cfnNoValue struct{}

// cfnAttrOfProperty are the GetAtt attributes that are the value of a property when the
// template sets it (a queue's name is the QueueName given).
var cfnAttrOfProperty = map[string]map[string]string{
	"AWS::SQS::Queue": {"QueueName": "QueueName"},
}

type cfnEval struct {
	params     map[string]string
	conditions map[string]any
	memo       map[string]bool
	resources  map[string]map[string]any
	included   map[string]bool
}

// cfnDeploy resolves the template with the parameters given (the others at their defaults)
// as CloudFormation does before it creates anything: the parameters' constraints, the Rules
// section's assertions, the conditions and the intrinsic functions. An error is a refusal
// (or a template this evaluator cannot read, which it names).
func cfnDeploy(tpl map[string]any, given map[string]string) (*cfnStack, error) {
	e := &cfnEval{conditions: asMap(tpl["Conditions"]), memo: map[string]bool{}, resources: map[string]map[string]any{}, included: map[string]bool{}}
	var err error
	if e.params, err = cfnParams(asMap(tpl["Parameters"]), given); err != nil {
		return nil, err
	}
	if err := e.rules(asMap(tpl["Rules"])); err != nil {
		return nil, err
	}
	for name, r := range asMap(tpl["Resources"]) {
		e.resources[name] = asMap(r)
	}
	for _, name := range sortedKeys(e.resources) {
		ok, err := e.holds(e.resources[name]["Condition"])
		if err != nil {
			return nil, fmt.Errorf("resource %s: %w", name, err)
		}
		e.included[name] = ok
	}
	stack := &cfnStack{Resources: map[string]cfnResource{}, Outputs: map[string]any{}}
	for _, name := range sortedKeys(e.resources) {
		if !e.included[name] {
			continue
		}
		props, err := e.resolve(e.resources[name]["Properties"])
		if err != nil {
			return nil, fmt.Errorf("resource %s: %w", name, err)
		}
		if _, ok := props.(cfnNoValue); ok || props == nil {
			props = map[string]any{}
		}
		stack.Resources[name] = cfnResource{Type: fmt.Sprint(e.resources[name]["Type"]), Properties: asMap(props)}
	}
	for name, o := range asMap(tpl["Outputs"]) {
		out := asMap(o)
		if ok, err := e.holds(out["Condition"]); err != nil || !ok {
			if err != nil {
				return nil, fmt.Errorf("output %s: %w", name, err)
			}
			continue
		}
		v, err := e.resolve(out["Value"])
		if err != nil {
			return nil, fmt.Errorf("output %s: %w", name, err)
		}
		stack.Outputs[name] = v
	}
	return stack, nil
}

// cfnParams checks each parameter's value (given, else its default) against its constraints.
func cfnParams(decl map[string]any, given map[string]string) (map[string]string, error) {
	for name := range given {
		if _, ok := decl[name]; !ok {
			return nil, fmt.Errorf("the template has no parameter %s", name)
		}
	}
	out := map[string]string{}
	for _, name := range sortedKeys(decl) {
		p := asMap(decl[name])
		v, ok := given[name]
		if !ok {
			d, has := p["Default"]
			if !has {
				return nil, fmt.Errorf("parameter %s: no value and no default", name)
			}
			v = scalar(d)
		}
		if err := cfnParamConstraints(p, v); err != nil {
			return nil, fmt.Errorf("parameter %s=%q: %w", name, v, err)
		}
		out[name] = v
	}
	return out, nil
}

func cfnParamConstraints(p map[string]any, v string) error {
	if allowed, ok := p["AllowedValues"].([]any); ok && !slices.ContainsFunc(allowed, func(a any) bool { return scalar(a) == v }) {
		return fmt.Errorf("not one of %v", allowed)
	}
	if pat, ok := p["AllowedPattern"].(string); ok && !regexp.MustCompile(`^(?:`+pat+`)$`).MatchString(v) {
		return fmt.Errorf("does not match %s", pat)
	}
	if n, ok := p["MaxLength"]; ok && len(v) > int(toFloat(n)) {
		return fmt.Errorf("longer than %v", n)
	}
	if p["Type"] != "Number" {
		return nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return errors.New("not a number")
	}
	if m, ok := p["MinValue"]; ok && f < toFloat(m) {
		return fmt.Errorf("below %v", m)
	}
	if m, ok := p["MaxValue"]; ok && f > toFloat(m) {
		return fmt.Errorf("above %v", m)
	}
	return nil
}

// rules checks the Rules section: each rule whose RuleCondition holds needs every assertion.
func (e *cfnEval) rules(rules map[string]any) error {
	for _, name := range sortedKeys(rules) {
		r := asMap(rules[name])
		if c, ok := r["RuleCondition"]; ok {
			holds, err := e.ruleFn(c)
			if err != nil {
				return fmt.Errorf("rule %s: %w", name, err)
			}
			if !holds {
				continue
			}
		}
		for _, a := range asList(r["Assertions"]) {
			am := asMap(a)
			holds, err := e.ruleFn(am["Assert"])
			if err != nil {
				return fmt.Errorf("rule %s: %w", name, err)
			}
			if !holds {
				return fmt.Errorf("rule %s: %v", name, am["AssertDescription"])
			}
		}
	}
	return nil
}

// ruleFn evaluates a rule function (the Rules section has its own set).
func (e *cfnEval) ruleFn(v any) (bool, error) {
	fn, arg, ok := intrinsic(v)
	if !ok {
		return false, fmt.Errorf("%s is not a rule function", asJSON(v))
	}
	switch fn {
	case "Fn::Equals", "Fn::Not", "Fn::And", "Fn::Or":
		return e.boolFn(fn, arg, e.ruleFn)
	case "Fn::Contains":
		args := asList(arg)
		if len(args) != 2 {
			return false, fmt.Errorf("Fn::Contains takes a list and a value: %s", asJSON(arg))
		}
		list, err := e.resolve(args[0])
		if err != nil {
			return false, err
		}
		val, err := e.resolve(args[1])
		if err != nil {
			return false, err
		}
		return slices.ContainsFunc(asList(list), func(x any) bool { return scalar(x) == scalar(val) }), nil
	}
	return false, fmt.Errorf("rule function %s is not read by this test", fn)
}

// holds evaluates a resource's or an output's Condition (a condition's name, or none).
func (e *cfnEval) holds(c any) (bool, error) {
	if c == nil {
		return true, nil
	}
	name, ok := c.(string)
	if !ok {
		return false, fmt.Errorf("condition %s is not a name", asJSON(c))
	}
	if v, ok := e.memo[name]; ok {
		return v, nil
	}
	def, ok := e.conditions[name]
	if !ok {
		return false, fmt.Errorf("no condition %s", name)
	}
	v, err := e.condFn(def)
	if err != nil {
		return false, fmt.Errorf("condition %s: %w", name, err)
	}
	e.memo[name] = v
	return v, nil
}

// condFn evaluates a condition function.
func (e *cfnEval) condFn(v any) (bool, error) {
	if m := asMap(v); len(m) == 1 {
		if name, ok := m["Condition"]; ok {
			return e.holds(name)
		}
	}
	fn, arg, ok := intrinsic(v)
	if !ok {
		return false, fmt.Errorf("%s is not a condition function", asJSON(v))
	}
	return e.boolFn(fn, arg, e.condFn)
}

// boolFn is Fn::Equals, Fn::Not, Fn::And or Fn::Or, its operands read by sub.
func (e *cfnEval) boolFn(fn string, arg any, sub func(any) (bool, error)) (bool, error) {
	args := asList(arg)
	switch fn {
	case "Fn::Equals":
		if len(args) != 2 {
			return false, fmt.Errorf("Fn::Equals takes two values: %s", asJSON(arg))
		}
		a, err := e.resolve(args[0])
		if err != nil {
			return false, err
		}
		b, err := e.resolve(args[1])
		if err != nil {
			return false, err
		}
		return scalar(a) == scalar(b), nil
	case "Fn::Not":
		if len(args) != 1 {
			return false, fmt.Errorf("Fn::Not takes one condition: %s", asJSON(arg))
		}
		v, err := sub(args[0])
		return !v, err
	case "Fn::And", "Fn::Or":
		if len(args) < 2 || len(args) > 10 {
			return false, fmt.Errorf("%s takes 2 to 10 conditions: %s", fn, asJSON(arg))
		}
		all, anyOf := true, false
		for _, a := range args {
			v, err := sub(a)
			if err != nil {
				return false, err
			}
			all, anyOf = all && v, anyOf || v
		}
		if fn == "Fn::And" {
			return all, nil
		}
		return anyOf, nil
	}
	return false, fmt.Errorf("%s is not a condition function", fn)
}

// intrinsic splits {"Ref": x} or {"Fn::Name": x} into the function and its argument.
func intrinsic(v any) (string, any, bool) {
	m, ok := v.(map[string]any)
	if !ok || len(m) != 1 {
		return "", nil, false
	}
	for k, arg := range m {
		if k == "Ref" || strings.HasPrefix(k, "Fn::") {
			return k, arg, true
		}
	}
	return "", nil, false
}

// resolve resolves the intrinsic functions in v; AWS::NoValue leaves out the key or element.
func (e *cfnEval) resolve(v any) (any, error) {
	if fn, arg, ok := intrinsic(v); ok {
		return e.fn(fn, arg)
	}
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, val := range x {
			r, err := e.resolve(val)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			if _, no := r.(cfnNoValue); !no {
				out[k] = r
			}
		}
		return out, nil
	case []any:
		out := []any{}
		for i, val := range x {
			r, err := e.resolve(val)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			if _, no := r.(cfnNoValue); !no {
				out = append(out, r)
			}
		}
		return out, nil
	}
	return v, nil
}

func (e *cfnEval) fn(fn string, arg any) (any, error) {
	switch fn {
	case "Ref":
		return e.ref(fmt.Sprint(arg))
	case "Fn::GetAtt":
		parts := asList(arg)
		if s, ok := arg.(string); ok {
			parts = []any{}
			for _, p := range strings.SplitN(s, ".", 2) {
				parts = append(parts, p)
			}
		}
		if len(parts) != 2 {
			return nil, fmt.Errorf("Fn::GetAtt %s", asJSON(arg))
		}
		return e.getAtt(fmt.Sprint(parts[0]), fmt.Sprint(parts[1]))
	case "Fn::If":
		args := asList(arg)
		if len(args) != 3 {
			return nil, fmt.Errorf("Fn::If takes a condition and two values: %s", asJSON(arg))
		}
		ok, err := e.holds(args[0])
		if err != nil {
			return nil, err
		}
		if ok {
			return e.resolve(args[1])
		}
		return e.resolve(args[2])
	case "Fn::Sub":
		return e.sub(arg)
	case "Fn::Join", "Fn::Select", "Fn::Split":
		return e.listFn(fn, arg)
	}
	return nil, fmt.Errorf("function %s is not read by this test", fn)
}

func (e *cfnEval) ref(name string) (any, error) {
	if name == "AWS::NoValue" {
		return cfnNoValue{}, nil
	}
	if v, ok := cfnPseudo[name]; ok {
		return v, nil
	}
	if v, ok := e.params[name]; ok {
		return v, nil
	}
	if _, ok := e.resources[name]; ok {
		if !e.included[name] {
			return nil, fmt.Errorf("Ref %s: its condition leaves it out", name)
		}
		return "{ref:" + name + "}", nil
	}
	return nil, fmt.Errorf("Ref %s: no such parameter or resource", name)
}

func (e *cfnEval) getAtt(name, attr string) (any, error) {
	r, ok := e.resources[name]
	if !ok {
		return nil, fmt.Errorf("Fn::GetAtt %s.%s: no such resource", name, attr)
	}
	if !e.included[name] {
		return nil, fmt.Errorf("Fn::GetAtt %s.%s: its condition leaves it out", name, attr)
	}
	if prop, ok := cfnAttrOfProperty[fmt.Sprint(r["Type"])][attr]; ok {
		if v, set := asMap(r["Properties"])[prop]; set {
			return e.resolve(v)
		}
	}
	return "{att:" + name + "." + attr + "}", nil
}

var subVar = regexp.MustCompile(`\$\{([^}]*)\}`)

func (e *cfnEval) sub(arg any) (any, error) {
	s, ok := arg.(string)
	vars := map[string]any{}
	if !ok {
		args := asList(arg)
		if len(args) != 2 {
			return nil, fmt.Errorf("Fn::Sub %s", asJSON(arg))
		}
		s, _ = args[0].(string)
		for k, v := range asMap(args[1]) {
			r, err := e.resolve(v)
			if err != nil {
				return nil, fmt.Errorf("Fn::Sub variable %s: %w", k, err)
			}
			vars[k] = r
		}
	}
	var err error
	out := subVar.ReplaceAllStringFunc(s, func(m string) string {
		name := m[2 : len(m)-1]
		if strings.HasPrefix(name, "!") {
			return "${" + name[1:] + "}"
		}
		var v any
		var verr error
		switch val, isVar := vars[name]; {
		case isVar:
			v = val
		case strings.Contains(name, "."):
			parts := strings.SplitN(name, ".", 2)
			v, verr = e.getAtt(parts[0], parts[1])
		default:
			v, verr = e.ref(name)
		}
		if _, isString := v.(string); verr == nil && !isString {
			verr = fmt.Errorf("Fn::Sub ${%s} is %s, not a string", name, asJSON(v))
		}
		if verr != nil && err == nil {
			err = verr
		}
		s, _ := v.(string)
		return s
	})
	return out, err
}

func (e *cfnEval) listFn(fn string, arg any) (any, error) {
	args := asList(arg)
	if len(args) != 2 {
		return nil, fmt.Errorf("%s takes two arguments: %s", fn, asJSON(arg))
	}
	a, err := e.resolve(args[0])
	if err != nil {
		return nil, err
	}
	if fn == "Fn::Join" {
		// Each element on its own: AWS::NoValue in a Join's list is not relied on.
		var parts []string
		for _, el := range asList(args[1]) {
			v, err := e.resolve(el)
			if err != nil {
				return nil, err
			}
			s, ok := v.(string)
			if !ok {
				return nil, fmt.Errorf("Fn::Join of %s", asJSON(v))
			}
			parts = append(parts, s)
		}
		return strings.Join(parts, fmt.Sprint(a)), nil
	}
	b, err := e.resolve(args[1])
	if err != nil {
		return nil, err
	}
	if fn == "Fn::Split" {
		var out []any
		for _, p := range strings.Split(fmt.Sprint(b), fmt.Sprint(a)) {
			out = append(out, p)
		}
		return out, nil
	}
	i, err := strconv.Atoi(scalar(a))
	list := asList(b)
	if err != nil || i < 0 || i >= len(list) {
		return nil, fmt.Errorf("Fn::Select cannot select index %v of %d value(s)", a, len(list))
	}
	return list[i], nil
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

// scalar spells a YAML or JSON scalar as CloudFormation reads it: numbers without a decimal
// part as integers.
func scalar(v any) string {
	if f, ok := v.(float64); ok && f == float64(int64(f)) {
		return strconv.FormatInt(int64(f), 10)
	}
	return fmt.Sprint(v)
}

func toFloat(v any) float64 {
	f, _ := strconv.ParseFloat(scalar(v), 64)
	return f
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestCloudFormationEvaluator: the evaluator refuses what CloudFormation refuses and leaves
// out what conditions leave out, so that the tests built on it can fail.
func TestCloudFormationEvaluator(t *testing.T) {
	tpl := map[string]any{}
	readYAMLString(t, `
Parameters:
  Mode: {Type: String, AllowedValues: [a, b], Default: a}
  Name: {Type: String, Default: "", AllowedPattern: "^$|^[a-z]+$"}
  Count: {Type: Number, Default: 3, MinValue: 1, MaxValue: 5}
Rules:
  BNeedsName:
    RuleCondition: {"Fn::Equals": [{"Ref": Mode}, b]}
    Assertions:
      - Assert: {"Fn::Not": [{"Fn::Equals": [{"Ref": Name}, ""]}]}
        AssertDescription: mode b needs a name
Conditions:
  IsB: {"Fn::Equals": [{"Ref": Mode}, b]}
  NotB: {"Fn::Not": [{"Condition": IsB}]}
Resources:
  Q:
    Type: AWS::SQS::Queue
    Condition: NotB
    Properties:
      QueueName: {"Fn::Sub": "q-${Name}-${AWS::Region}"}
      Tags:
        - {"Fn::If": [IsB, {Key: b, Value: x}, {"Ref": AWS::NoValue}]}
        - {Key: k, Value: {"Fn::Select": [5, {"Fn::Split": [":", {"Fn::Sub": "${Name}:::::"}]}]}}
  P:
    Type: AWS::SQS::QueuePolicy
    Properties:
      Queues: [{"Fn::If": [NotB, {"Ref": Q}, other]}]
      PolicyDocument: {"Fn::Sub": ["${A}/${Q.QueueName}/${!Literal}", {A: {"Fn::GetAtt": [Q, Arn]}}]}
`, &tpl)
	for _, tc := range []struct {
		params map[string]string
		err    string
		check  func(*cfnStack) string
	}{
		{params: map[string]string{}, check: func(s *cfnStack) string {
			want := `{"P":{"Type":"AWS::SQS::QueuePolicy","Properties":{"PolicyDocument":"{att:Q.Arn}/q--eu-west-1/${Literal}","Queues":["{ref:Q}"]}},` +
				`"Q":{"Type":"AWS::SQS::Queue","Properties":{"QueueName":"q--eu-west-1","Tags":[{"Key":"k","Value":""}]}}}`
			if got := asJSON(s.Resources); got != want {
				return got
			}
			return ""
		}},
		{params: map[string]string{"Mode": "c"}, err: "not one of"},
		{params: map[string]string{"Name": "A1"}, err: "does not match"},
		{params: map[string]string{"Count": "6"}, err: "above 5"},
		{params: map[string]string{"Count": "x"}, err: "not a number"},
		{params: map[string]string{"Nope": "x"}, err: "no parameter Nope"},
		{params: map[string]string{"Mode": "b"}, err: "mode b needs a name"},
		// Mode b leaves Q out, and P still names it through GetAtt in its policy.
		{params: map[string]string{"Mode": "b", "Name": "x"}, err: "its condition leaves it out"},
	} {
		s, err := cfnDeploy(tpl, tc.params)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%v: %v, want an error saying %q", tc.params, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("%v: %v", tc.params, err)
		case tc.err == "":
			if got := tc.check(s); got != "" {
				t.Errorf("%v: resources %s", tc.params, got)
			}
		}
	}
}

func readYAMLString(t *testing.T, s string, into any) {
	t.Helper()
	if err := yaml.Unmarshal([]byte(s), into); err != nil {
		t.Fatal(err)
	}
}
