// SPDX-License-Identifier: Apache-2.0

package deploy_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/tryfunc"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
	ctyjson "github.com/zclconf/go-cty/cty/json"
)

// tfFunctions are the Terraform functions the module may call, as go-cty implements them
// (Terraform's own are these, bar a few it extends; a call to one not listed fails the test).
var tfFunctions = map[string]function.Function{
	"can": tryfunc.CanFunc, "try": tryfunc.TryFunc,
	"compact": stdlib.CompactFunc, "concat": stdlib.ConcatFunc, "contains": stdlib.ContainsFunc,
	"element": stdlib.ElementFunc, "format": stdlib.FormatFunc, "join": stdlib.JoinFunc,
	"jsondecode": stdlib.JSONDecodeFunc, "jsonencode": stdlib.JSONEncodeFunc, "keys": stdlib.KeysFunc, "length": stdlib.LengthFunc,
	"lookup": stdlib.LookupFunc, "merge": stdlib.MergeFunc, "regex": stdlib.RegexFunc,
	"replace": stdlib.ReplaceFunc, "split": stdlib.SplitFunc, "values": stdlib.ValuesFunc,
}

// tfData are the data sources the module reads, as the tests' account and region give them.
var tfData = map[string]map[string]cty.Value{
	"aws_caller_identity": {"account_id": cty.StringVal(testAccount)},
	"aws_partition":       {"partition": cty.StringVal(testPartition), "dns_suffix": cty.StringVal(testURLSuffix)},
	"aws_region":          {"name": cty.StringVal(testRegion)},
}

// tfComputed are the attributes each resource type computes, which the module may read
// before they exist: each stands as a token, {att:<address>.<attribute>}.
var tfComputed = map[string][]string{
	"aws_sqs_queue":                    {"arn", "id", "url"},
	"aws_sqs_queue_policy":             {"id"},
	"aws_cloudwatch_event_rule":        {"arn", "id"},
	"aws_cloudwatch_event_target":      {"id"},
	"aws_iam_role":                     {"arn", "id", "unique_id"},
	"aws_iam_role_policy":              {"id"},
	"aws_eks_pod_identity_association": {"association_arn", "id"},
	"aws_cloudwatch_metric_alarm":      {"arn", "id"},
}

// tfBlock is one variable, local, data source, resource or output of the module.
type tfBlock struct {
	kind  string // "var", "local", "data", "resource", "output"
	name  string // var.x, local.x, data.t.n, t.n, output.x
	body  *hclsyntax.Body
	expr  hclsyntax.Expression // a local's or an output's value
	block *hclsyntax.Block
}

// tfModule is the parsed Terraform module under aws/terraform.
type tfModule struct {
	blocks   []*tfBlock
	required string      // terraform.required_version
	moved    [][2]string // from, to
}

// tfPlan is what the module would create for some variables: each resource instance's
// attributes by its address (aws_sqs_queue.notices[0], aws_cloudwatch_event_rule.notices["x"]).
type tfPlan struct {
	Resources map[string]map[string]any
	Types     map[string]string // address → resource type
	Outputs   map[string]any
}

// readTerraform parses the module in dir with HashiCorp's HCL library.
func readTerraform(t *testing.T, dir string) *tfModule {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.tf"))
	if err != nil || len(files) == 0 {
		t.Fatalf("Terraform module %s: %v %v", dir, files, err)
	}
	p := hclparse.NewParser()
	m := &tfModule{}
	for _, path := range files {
		f, diags := p.ParseHCLFile(path)
		if diags.HasErrors() {
			t.Fatalf("%s: %s", path, diags.Error())
		}
		for _, b := range f.Body.(*hclsyntax.Body).Blocks {
			if err := m.add(b); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
		}
	}
	return m
}

func (m *tfModule) add(b *hclsyntax.Block) error {
	switch b.Type {
	case "variable":
		m.blocks = append(m.blocks, &tfBlock{kind: "var", name: "var." + b.Labels[0], body: b.Body, block: b})
	case "locals":
		for name, a := range b.Body.Attributes {
			m.blocks = append(m.blocks, &tfBlock{kind: "local", name: "local." + name, expr: a.Expr})
		}
	case "data":
		m.blocks = append(m.blocks, &tfBlock{kind: "data", name: "data." + b.Labels[0] + "." + b.Labels[1], body: b.Body, block: b})
	case "resource":
		m.blocks = append(m.blocks, &tfBlock{kind: "resource", name: b.Labels[0] + "." + b.Labels[1], body: b.Body, block: b})
	case "output":
		m.blocks = append(m.blocks, &tfBlock{kind: "output", name: "output." + b.Labels[0], expr: b.Body.Attributes["value"].Expr, block: b})
	case "moved":
		m.moved = append(m.moved, [2]string{exprText(b.Body.Attributes["from"].Expr), exprText(b.Body.Attributes["to"].Expr)})
	case "terraform":
		if a, ok := b.Body.Attributes["required_version"]; ok {
			v, _ := a.Expr.Value(nil)
			m.required = v.AsString()
		}
	default:
		return fmt.Errorf("block %s is not read by this test", b.Type)
	}
	return nil
}

// exprText is an address as written (moved blocks): its traversal, indexes included.
func exprText(e hclsyntax.Expression) string { return traversalText(e.Variables()[0]) }

func traversalText(tr hcl.Traversal) string {
	var b strings.Builder
	for _, step := range tr {
		switch s := step.(type) {
		case hcl.TraverseRoot:
			b.WriteString(s.Name)
		case hcl.TraverseAttr:
			b.WriteString("." + s.Name)
		case hcl.TraverseIndex:
			b.WriteString("[" + asJSON(ctyToGo(s.Key)) + "]")
		}
	}
	return b.String()
}

// variables are the module's variables: their type, and their value with the inputs given.
func (m *tfModule) variables(given map[string]any) (map[string]cty.Value, error) {
	for name := range given {
		if !slices.ContainsFunc(m.blocks, func(b *tfBlock) bool { return b.name == "var."+name }) {
			return nil, fmt.Errorf("the module has no variable %s", name)
		}
	}
	out := map[string]cty.Value{}
	for _, b := range m.blocks {
		if b.kind != "var" {
			continue
		}
		name := strings.TrimPrefix(b.name, "var.")
		ty := cty.DynamicPseudoType
		if a, ok := b.body.Attributes["type"]; ok {
			var diags hcl.Diagnostics
			if ty, diags = typeexpr.TypeConstraint(a.Expr); diags.HasErrors() {
				return nil, fmt.Errorf("variable %s: %s", name, diags.Error())
			}
		}
		var v cty.Value
		if g, ok := given[name]; ok {
			raw, _ := json.Marshal(g)
			var err error
			if v, err = ctyjson.Unmarshal(raw, ty); err != nil {
				return nil, fmt.Errorf("variable %s = %s: %w", name, raw, err)
			}
		} else if a, ok := b.body.Attributes["default"]; ok {
			d, diags := a.Expr.Value(nil)
			if diags.HasErrors() {
				return nil, fmt.Errorf("variable %s: %s", name, diags.Error())
			}
			var err error
			if v, err = convert.Convert(d, ty); err != nil {
				return nil, fmt.Errorf("variable %s: default: %w", name, err)
			}
		} else {
			return nil, fmt.Errorf("variable %s: no value and no default", name)
		}
		out[name] = v
		if err := validate(name, v, b.body); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// validate runs a variable's validation blocks. Before Terraform 1.9 a validation may name
// only its own variable: it is given nothing else.
func validate(name string, v cty.Value, body *hclsyntax.Body) error {
	ctx := &hcl.EvalContext{Variables: map[string]cty.Value{"var": cty.ObjectVal(map[string]cty.Value{name: v})}, Functions: tfFunctions}
	for _, vb := range body.Blocks {
		if vb.Type != "validation" {
			continue
		}
		for _, tr := range vb.Body.Attributes["condition"].Expr.Variables() {
			if len(tr) < 2 || tr.RootName() != "var" || tr[1].(hcl.TraverseAttr).Name != name {
				return fmt.Errorf("variable %s: validation: names %s, and a validation may name only its own variable", name, traversalText(tr))
			}
		}
		ok, diags := vb.Body.Attributes["condition"].Expr.Value(ctx)
		if diags.HasErrors() {
			return fmt.Errorf("variable %s: validation: %s", name, diags.Error())
		}
		if ok.False() {
			msg, _ := vb.Body.Attributes["error_message"].Expr.Value(ctx)
			return fmt.Errorf("variable %s: %s", name, msg.AsString())
		}
	}
	return nil
}

// tfApply evaluates the module with the variables given (the others at their defaults) as
// `terraform plan` would: variable validations, locals, data sources (tfData), each
// resource's count or for_each and attributes, preconditions, outputs. Attributes a resource
// computes stand as tokens (tfComputed). An error is a refusal, or a module this evaluator
// cannot read, which it names.
func (m *tfModule) apply(given map[string]any) (*tfPlan, error) {
	vars, err := m.variables(given)
	if err != nil {
		return nil, err
	}
	done := map[string]cty.Value{}
	plan := &tfPlan{Resources: map[string]map[string]any{}, Types: map[string]string{}, Outputs: map[string]any{}}
	pending := slices.DeleteFunc(slices.Clone(m.blocks), func(b *tfBlock) bool { return b.kind == "var" })
	for len(pending) > 0 {
		progress := false
		for i := 0; i < len(pending); i++ {
			b := pending[i]
			if !m.ready(b, done) {
				continue
			}
			v, err := m.eval(b, vars, done, plan)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", b.name, err)
			}
			done[b.name] = v
			pending = slices.Delete(pending, i, i+1)
			i--
			progress = true
		}
		if !progress {
			var names []string
			for _, b := range pending {
				names = append(names, b.name)
			}
			return nil, fmt.Errorf("cannot evaluate %v: a reference to nothing the module defines, or a cycle", names)
		}
	}
	return plan, nil
}

// refs are the blocks b names (local.x, data.t.n, t.n).
func (b *tfBlock) refs() []string {
	var trs []hcl.Traversal
	if b.expr != nil {
		trs = b.expr.Variables()
	} else {
		trs = bodyTraversals(b.body)
	}
	var out []string
	for _, tr := range trs {
		root := tr.RootName()
		var attrs []string
		for _, s := range tr[1:] {
			if a, ok := s.(hcl.TraverseAttr); ok {
				attrs = append(attrs, a.Name)
			} else {
				break
			}
		}
		switch {
		case root == "var" || root == "each" || root == "count" || root == "self" || root == "path" || root == "terraform":
		case root == "local" && len(attrs) > 0:
			out = append(out, "local."+attrs[0])
		case root == "data" && len(attrs) > 1:
			out = append(out, "data."+attrs[0]+"."+attrs[1])
		case len(attrs) > 0:
			out = append(out, root+"."+attrs[0])
		}
	}
	return out
}

// bodyTraversals are the references of a body's arguments, its nested blocks' included
// (each expression's own, so that a for expression's names are not taken for references).
func bodyTraversals(body *hclsyntax.Body) []hcl.Traversal {
	var out []hcl.Traversal
	for _, a := range body.Attributes {
		out = append(out, a.Expr.Variables()...)
	}
	for _, nb := range body.Blocks {
		out = append(out, bodyTraversals(nb.Body)...)
	}
	return out
}

func (m *tfModule) ready(b *tfBlock, done map[string]cty.Value) bool {
	for _, r := range b.refs() {
		if _, ok := done[r]; !ok {
			return false
		}
	}
	return true
}

// evalContext is the evaluation context of what is evaluated so far.
func evalContext(vars, done map[string]cty.Value) *hcl.EvalContext {
	root := map[string]map[string]cty.Value{"local": {}, "data": {}}
	data := map[string]map[string]cty.Value{}
	for name, v := range done {
		parts := strings.Split(name, ".")
		switch parts[0] {
		case "local":
			root["local"][parts[1]] = v
		case "data":
			if data[parts[1]] == nil {
				data[parts[1]] = map[string]cty.Value{}
			}
			data[parts[1]][parts[2]] = v
		case "output":
		default:
			if root[parts[0]] == nil {
				root[parts[0]] = map[string]cty.Value{}
			}
			root[parts[0]][parts[1]] = v
		}
	}
	for typ, byName := range data {
		root["data"][typ] = cty.ObjectVal(byName)
	}
	c := &hcl.EvalContext{Variables: map[string]cty.Value{"var": cty.ObjectVal(vars)}, Functions: tfFunctions}
	for k, v := range root {
		c.Variables[k] = cty.ObjectVal(v)
	}
	return c
}

func (m *tfModule) eval(b *tfBlock, vars, done map[string]cty.Value, plan *tfPlan) (cty.Value, error) {
	c := evalContext(vars, done)
	switch b.kind {
	case "local", "output":
		v, diags := b.expr.Value(c)
		if diags.HasErrors() {
			return cty.NilVal, diags
		}
		if b.kind == "output" {
			plan.Outputs[strings.TrimPrefix(b.name, "output.")] = ctyToGo(v)
		}
		return v, nil
	case "data":
		attrs, ok := tfData[b.block.Labels[0]]
		if !ok {
			return cty.NilVal, fmt.Errorf("data source %s is not read by this test", b.block.Labels[0])
		}
		return cty.ObjectVal(attrs), nil
	}
	return m.resource(b, c, plan)
}

// resource evaluates each instance of a resource: one, count of them, or one per for_each key.
func (m *tfModule) resource(b *tfBlock, c *hcl.EvalContext, plan *tfPlan) (cty.Value, error) {
	typ := b.block.Labels[0]
	if a, ok := b.body.Attributes["count"]; ok {
		n, diags := a.Expr.Value(c)
		if diags.HasErrors() {
			return cty.NilVal, diags
		}
		count, _ := n.AsBigFloat().Int64()
		insts := []cty.Value{}
		for i := range count {
			ic := c.NewChild()
			ic.Variables = map[string]cty.Value{"count": cty.ObjectVal(map[string]cty.Value{"index": cty.NumberIntVal(i)})}
			v, err := m.instance(b, typ, fmt.Sprintf("%s[%d]", b.name, i), ic, plan)
			if err != nil {
				return cty.NilVal, err
			}
			insts = append(insts, v)
		}
		return cty.TupleVal(insts), nil
	}
	if a, ok := b.body.Attributes["for_each"]; ok {
		each, diags := a.Expr.Value(c)
		if diags.HasErrors() {
			return cty.NilVal, diags
		}
		if !each.CanIterateElements() || each.Type().IsListType() || each.Type().IsTupleType() {
			return cty.NilVal, fmt.Errorf("for_each needs a map or a set of strings, not %s", each.Type().FriendlyName())
		}
		insts := map[string]cty.Value{}
		for it := each.ElementIterator(); it.Next(); {
			k, v := it.Element()
			if each.Type().IsSetType() {
				k = v
			}
			ic := c.NewChild()
			ic.Variables = map[string]cty.Value{"each": cty.ObjectVal(map[string]cty.Value{"key": k, "value": v})}
			inst, err := m.instance(b, typ, fmt.Sprintf("%s[%q]", b.name, k.AsString()), ic, plan)
			if err != nil {
				return cty.NilVal, err
			}
			insts[k.AsString()] = inst
		}
		return cty.ObjectVal(insts), nil
	}
	return m.instance(b, typ, b.name, c, plan)
}

// instance evaluates one resource instance: its arguments, nested blocks, and preconditions.
func (m *tfModule) instance(b *tfBlock, typ, addr string, c *hcl.EvalContext, plan *tfPlan) (cty.Value, error) {
	attrs, err := bodyValues(b.body, c, true)
	if err != nil {
		return cty.NilVal, err
	}
	for _, lb := range b.body.Blocks {
		if lb.Type != "lifecycle" {
			continue
		}
		for _, pre := range lb.Body.Blocks {
			if pre.Type != "precondition" {
				continue
			}
			ok, diags := pre.Body.Attributes["condition"].Expr.Value(c)
			if diags.HasErrors() {
				return cty.NilVal, diags
			}
			if ok.False() {
				msg, _ := pre.Body.Attributes["error_message"].Expr.Value(c)
				return cty.NilVal, fmt.Errorf("precondition: %s", msg.AsString())
			}
		}
	}
	plan.Resources[addr] = ctyToGo(cty.ObjectVal(attrs)).(map[string]any)
	plan.Types[addr] = typ
	for _, name := range tfComputed[typ] {
		if _, set := attrs[name]; !set {
			attrs[name] = cty.StringVal("{att:" + addr + "." + name + "}")
		}
	}
	return cty.ObjectVal(attrs), nil
}

// bodyValues evaluates a body's arguments and nested blocks (each block type a list of
// objects); top leaves out the meta-arguments and lifecycle of a resource.
func bodyValues(body *hclsyntax.Body, c *hcl.EvalContext, top bool) (map[string]cty.Value, error) {
	out := map[string]cty.Value{}
	for name, a := range body.Attributes {
		if top && (name == "count" || name == "for_each" || name == "depends_on" || name == "provider") {
			continue
		}
		v, diags := a.Expr.Value(c)
		if diags.HasErrors() {
			return nil, fmt.Errorf("%s: %s", name, diags.Error())
		}
		if !v.IsNull() {
			out[name] = v
		}
	}
	blocks := map[string][]cty.Value{}
	for _, nb := range body.Blocks {
		if top && nb.Type == "lifecycle" {
			continue
		}
		if nb.Type == "dynamic" {
			return nil, fmt.Errorf("dynamic blocks are not read by this test")
		}
		v, err := bodyValues(nb.Body, c, false)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", nb.Type, err)
		}
		blocks[nb.Type] = append(blocks[nb.Type], cty.ObjectVal(v))
	}
	for name, list := range blocks {
		out[name] = cty.TupleVal(list)
	}
	return out, nil
}

// ctyToGo is a value as encoding/json would decode its JSON.
func ctyToGo(v cty.Value) any {
	if v.IsNull() {
		return nil
	}
	raw, err := ctyjson.Marshal(v, v.Type())
	if err != nil {
		panic(err)
	}
	var out any
	if err := json.Unmarshal(raw, &out); err != nil {
		panic(err)
	}
	return out
}

// TestTerraformEvaluator: the evaluator refuses what Terraform refuses (a failed validation or
// precondition, an unknown variable, a validation naming another variable, which Terraform
// before 1.9 rejects) and counts instances as Terraform does, so that the tests built on it
// can fail.
func TestTerraformEvaluator(t *testing.T) {
	dir := t.TempDir()
	src := `
variable "mode" {
  type    = string
  default = "a"
  validation {
    condition     = contains(["a", "b"], var.mode)
    error_message = "mode must be a or b."
  }
}
variable "other" {
  type    = string
  default = ""
  validation {
    condition     = var.other == "" || var.mode == "b"
    error_message = "other needs mode b."
  }
}
variable "n" {
  type    = number
  default = 2
}
locals {
  names = { x = "1", y = "2" }
}
data "aws_region" "current" {}
resource "aws_sqs_queue" "q" {
  count = var.mode == "a" ? var.n : 0
  name  = "q-${count.index}-${data.aws_region.current.name}"
}
resource "aws_cloudwatch_event_rule" "r" {
  for_each = local.names
  name     = "r-${each.key}-${each.value}"
  description = length(aws_sqs_queue.q) > 0 ? aws_sqs_queue.q[0].arn : "none"
  lifecycle {
    precondition {
      condition     = var.n < 5
      error_message = "n must stay below 5."
    }
  }
}
output "first" { value = length(aws_sqs_queue.q) > 0 ? aws_sqs_queue.q[0].url : "" }
`
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	m := readTerraform(t, dir)
	for _, tc := range []struct {
		vars map[string]any
		err  string
		want string
	}{
		{vars: nil, err: "variable other: validation"}, // names var.mode: refused however it evaluates
		{vars: map[string]any{"mode": "c"}, err: "mode must be a or b"},
		{vars: map[string]any{"nope": 1}, err: "no variable nope"},
	} {
		_, err := m.apply(tc.vars)
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%v: %v, want an error saying %q", tc.vars, err, tc.err)
		}
	}
	// Without the validation that names another variable.
	m.blocks = slices.DeleteFunc(m.blocks, func(b *tfBlock) bool { return b.name == "var.other" })
	if _, err := m.apply(map[string]any{"n": 7}); err == nil || !strings.Contains(err.Error(), "n must stay below 5") {
		t.Errorf("n=7: %v, want the precondition's error", err)
	}
	p, err := m.apply(map[string]any{"n": 3})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"aws_cloudwatch_event_rule.r[\"x\"]":{"description":"{att:aws_sqs_queue.q[0].arn}","name":"r-x-1"},` +
		`"aws_cloudwatch_event_rule.r[\"y\"]":{"description":"{att:aws_sqs_queue.q[0].arn}","name":"r-y-2"},` +
		`"aws_sqs_queue.q[0]":{"name":"q-0-eu-west-1"},"aws_sqs_queue.q[1]":{"name":"q-1-eu-west-1"},"aws_sqs_queue.q[2]":{"name":"q-2-eu-west-1"}}`
	if got := asJSON(p.Resources); got != want {
		t.Errorf("n=3: resources %s\nwant %s", got, want)
	}
	if got := asJSON(p.Outputs); got != `{"first":"{att:aws_sqs_queue.q[0].url}"}` {
		t.Errorf("n=3: outputs %s", got)
	}
	p, err = m.apply(map[string]any{"mode": "b"})
	if err != nil {
		t.Fatal(err)
	}
	if got := asJSON(p.Outputs); got != `{"first":""}` || len(p.Resources) != 2 {
		t.Errorf("mode=b: outputs %s, %d resources, want no queue", got, len(p.Resources))
	}
}
