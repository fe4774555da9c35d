// SPDX-License-Identifier: Apache-2.0

package deploy_test

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"lifeboat.dev/lifeboat/deploy"
	"lifeboat.dev/lifeboat/internal/source/sqs/messages"
)

var awsDir = "aws"

// awsServices are the AWS SDK's service packages the binary may import, by IAM's prefix.
var awsServices = map[string]string{
	"github.com/aws/aws-sdk-go-v2/service/sqs":                    "sqs",
	"github.com/aws/aws-sdk-go-v2/service/ec2":                    "ec2",
	"github.com/aws/aws-sdk-go-v2/service/autoscaling":            "autoscaling",
	"github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2": "elasticloadbalancing",
	"github.com/aws/aws-sdk-go-v2/service/eventbridge":            "events",
}

// binaryAWSCalls are the AWS operations the binary's code names (each call takes its
// <Operation>Input), found in every non-test Go file of cmd/ and internal/. An SDK service
// the binary imports that is not in awsServices fails the test: its calls would go unseen.
func binaryAWSCalls(t *testing.T) map[string][]string {
	t.Helper()
	calls := map[string][]string{}
	fset := token.NewFileSet()
	for _, dir := range []string{"../cmd", "../internal"} {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			names := map[string]string{}
			for _, imp := range f.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				if !strings.HasPrefix(p, "github.com/aws/aws-sdk-go-v2/service/") || strings.Count(p, "/") != 4 {
					continue
				}
				prefix, ok := awsServices[p]
				if !ok {
					t.Errorf("%s imports %s, whose calls this test does not read: add it to awsServices", path, p)
					continue
				}
				name := filepath.Base(p)
				if imp.Name != nil {
					name = imp.Name.Name
				}
				names[name] = prefix
			}
			ast.Inspect(f, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				x, ok := sel.X.(*ast.Ident)
				if !ok {
					return true
				}
				if prefix, known := names[x.Name]; known && strings.HasSuffix(sel.Sel.Name, "Input") && sel.Sel.Name != "Input" {
					action := prefix + ":" + strings.TrimSuffix(sel.Sel.Name, "Input")
					calls[action] = append(calls[action], fset.Position(sel.Pos()).String())
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return calls
}

// TestAWSPermissionsAreTheBinarysCalls: deploy.AWSPermissions lists every AWS operation the
// binary's code calls, and nothing more.
func TestAWSPermissionsAreTheBinarysCalls(t *testing.T) {
	calls := binaryAWSCalls(t)
	if len(calls) < 10 {
		t.Fatalf("found only %d AWS calls in the binary: %v", len(calls), keysOf(calls))
	}
	listed := map[string]bool{}
	for _, p := range deploy.AWSPermissions {
		if listed[p.Action] {
			t.Errorf("%s is listed twice", p.Action)
		}
		listed[p.Action] = true
		if _, ok := calls[p.Action]; !ok {
			t.Errorf("deploy.AWSPermissions allows %s, which the binary never calls", p.Action)
		}
		if !slices.Contains([]string{"queue", "group", "*"}, p.Scope) {
			t.Errorf("%s: scope %q", p.Action, p.Scope)
		}
	}
	for action, at := range calls {
		if !listed[action] {
			t.Errorf("the binary calls %s (%s) and deploy.AWSPermissions does not allow it", action, at[0])
		}
	}
}

// policyActions reads the Allow statements of an IAM policy document: each action, and the
// scope of the resource it is allowed on.
func policyActions(t *testing.T, where string, doc any) map[string]string {
	t.Helper()
	out := map[string]string{}
	m, ok := doc.(map[string]any)
	if !ok {
		t.Fatalf("%s: policy %s is not an object", where, asJSON(doc))
	}
	stmts, _ := m["Statement"].([]any)
	for _, s := range stmts {
		st := s.(map[string]any)
		if st["Effect"] != "Allow" {
			t.Errorf("%s: statement %s is not an Allow", where, asJSON(st))
		}
		scope := "queue"
		switch r := asJSON(st["Resource"]); {
		case r == `"*"`:
			scope = "*"
		case strings.Contains(r, "autoScalingGroup"):
			scope = "group"
		}
		var actions []any
		switch a := st["Action"].(type) {
		case string:
			actions = []any{a}
		case []any:
			actions = a
		}
		for _, a := range actions {
			out[fmt.Sprint(a)] = scope
		}
	}
	return out
}

// checkPolicy holds one shipped policy to deploy.AWSPermissions: the same actions, each on
// the resources of its scope.
func checkPolicy(t *testing.T, where string, got map[string]string) {
	t.Helper()
	want := map[string]string{}
	for _, p := range deploy.AWSPermissions {
		if !p.OptIn {
			want[p.Action] = p.Scope
		}
	}
	for a, scope := range want {
		if g, ok := got[a]; !ok {
			t.Errorf("%s does not allow %s, which the binary calls", where, a)
		} else if g != scope {
			t.Errorf("%s allows %s on %s resources, want %s", where, a, g, scope)
		}
	}
	for a := range got {
		if _, ok := want[a]; !ok {
			t.Errorf("%s allows %s, which the binary never calls", where, a)
		}
	}
}

// matches is EventBridge's matching for the pattern features the shipped rules use: every
// key of the pattern must be in the event; an object matches field by field; a list of
// values matches a value (or any element of a list value) equal to one of them.
func matches(t *testing.T, pattern, event any) bool {
	t.Helper()
	switch p := pattern.(type) {
	case map[string]any:
		e, ok := event.(map[string]any)
		if !ok {
			return false
		}
		for k, pv := range p {
			ev, ok := e[k]
			if !ok || !matches(t, pv, ev) {
				return false
			}
		}
		return true
	case []any:
		values := []any{event}
		if list, ok := event.([]any); ok {
			values = list
		}
		for _, want := range p {
			if _, ok := want.(map[string]any); ok {
				t.Fatalf("pattern %s uses a content filter this test's matcher does not read", asJSON(p))
			}
			for _, v := range values {
				if reflect.DeepEqual(want, v) {
					return true
				}
			}
		}
		return false
	}
	t.Fatalf("pattern %s: a leaf must be a list of values", asJSON(pattern))
	return false
}

// noticeSamples are the documented messages of each detail-type Lifeboat acts on
// (internal/source/sqs/messages/testdata), and messages of those types no rule may send.
var (
	noticeSamples = map[string]string{
		"EC2 Spot Instance Interruption Warning":                               "spot.json",
		"EC2 Capacity Reservation Instance Interruption Warning":               "capacity-reservation.json",
		"EC2 Interruptible Capacity Reservation Instance Interruption Warning": "corpus/aws-capacity-reservation-interruption-interruptible-spelling.json",
		"Capacity Block Expiration Warning":                                    "capacity-block.json",
		"Capacity Block Reservation Expiration Warning":                        "capacity-block-reservation-spelling.json",
		"EC2 Instance Rebalance Recommendation":                                "rebalance.json",
		"EC2 Instance State-change Notification":                               "state-stopping.json",
		"EC2 Instance-terminate Lifecycle Action":                              "asg-terminate.json",
		"EC2 Instance-launch Lifecycle Action":                                 "asg-launch.json",
		"AWS Health Event":                                                     "health-ec2.json",
	}
	// A running instance and another service's Health event: nothing to act on.
	noticeNonSamples = []string{"state-running.json", "health-other.json"}
)

func readSample(t *testing.T, name string) map[string]any {
	t.Helper()
	var m map[string]any
	b, err := os.ReadFile(filepath.Join("..", "internal", "source", "sqs", "messages", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return m
}

// checkRules holds one set of shipped rules to the notice kinds the binary acts on: every
// detail-type of every kind has a rule whose pattern matches its documented sample, every
// rule sends some kind, and no rule sends the messages of those types there is nothing to
// act on.
func checkRules(t *testing.T, where string, rules map[string]any) {
	t.Helper()
	used := map[string]bool{}
	for _, kind := range messages.EventKinds() {
		for _, dt := range kind.DetailTypes {
			file, ok := noticeSamples[dt]
			if !ok {
				t.Errorf("kind %s (%s): no sample in noticeSamples", kind.Name, dt)
				continue
			}
			sample := readSample(t, file)
			if sample["source"] != kind.Source || sample["detail-type"] != dt {
				t.Errorf("%s is not a %s / %s event", file, kind.Source, dt)
			}
			var hit []string
			for name, p := range rules {
				if matches(t, p, sample) {
					hit = append(hit, name)
					used[name] = true
				}
			}
			if len(hit) != 1 {
				t.Errorf("%s: %d rules (%v) send %s (%s), want 1", where, len(hit), hit, dt, file)
			}
		}
	}
	for name := range rules {
		if !used[name] {
			t.Errorf("%s: rule %s matches no notice Lifeboat acts on", where, name)
		}
	}
	for _, file := range noticeNonSamples {
		for name, p := range rules {
			if matches(t, p, readSample(t, file)) {
				t.Errorf("%s: rule %s sends %s, which Lifeboat has nothing to do with", where, name, file)
			}
		}
	}
}

// TestRuleMatcher: the matcher refuses what EventBridge refuses, so that the rule tests can fail.
func TestRuleMatcher(t *testing.T) {
	spot := readSample(t, "spot.json")
	for _, tc := range []struct {
		pattern string
		want    bool
	}{
		{`{"source":["aws.ec2"],"detail-type":["EC2 Spot Instance Interruption Warning"]}`, true},
		{`{"source":["aws.ec2"],"detail-type":["EC2 Spot Instance Interruption"]}`, false},
		{`{"source":["aws.health"]}`, false},
		{`{"detail":{"instance-action":["terminate","stop"]}}`, true},
		{`{"detail":{"state":["stopping"]}}`, false},
		{`{"resources":["arn:aws:ec2:us-east-2:123456789012:instance/i-1234567890abcdef0"]}`, asJSON(spot["resources"]) == `["arn:aws:ec2:us-east-2:123456789012:instance/i-1234567890abcdef0"]`},
	} {
		var p any
		if err := json.Unmarshal([]byte(tc.pattern), &p); err != nil {
			t.Fatal(err)
		}
		if got := matches(t, p, spot); got != tc.want {
			t.Errorf("%s on spot.json: %v, want %v", tc.pattern, got, tc.want)
		}
	}
}

// cfnTemplate is deploy/aws/cloudformation.yaml.
func cfnTemplate(t *testing.T) map[string]any {
	t.Helper()
	var tpl map[string]any
	readYAML(t, filepath.Join(awsDir, "cloudformation.yaml"), &tpl)
	return tpl
}

// TestCloudFormationTemplate: the template's resources and properties are those of AWS's
// resource specification (the excerpt in aws/testdata), its rules send exactly the notices
// Lifeboat acts on, the queue accepts only those rules, and the role allows exactly the
// binary's calls.
func TestCloudFormationTemplate(t *testing.T) {
	var spec struct {
		ResourceTypes map[string]map[string]bool
		PropertyTypes map[string]map[string]bool
	}
	readYAML(t, filepath.Join(awsDir, "testdata", "cfn-resource-spec.json"), &spec)
	checkProps := func(where, typ string, props map[string]any, known map[string]bool) {
		for p := range props {
			if _, ok := known[p]; !ok {
				t.Errorf("%s: %s has no property %s", where, typ, p)
			}
		}
		for p, required := range known {
			if _, ok := props[p]; required && !ok {
				t.Errorf("%s: %s requires %s", where, typ, p)
			}
		}
	}
	tpl := cfnTemplate(t)
	resources, _ := tpl["Resources"].(map[string]any)
	rules := map[string]any{}
	var ruleNames []string
	for name, r := range resources {
		res := r.(map[string]any)
		typ := fmt.Sprint(res["Type"])
		known, ok := spec.ResourceTypes[typ]
		if !ok {
			t.Errorf("%s: resource type %s is not in the specification's excerpt", name, typ)
			continue
		}
		props, _ := res["Properties"].(map[string]any)
		checkProps(name, typ, props, known)
		switch typ {
		case "AWS::Events::Rule":
			rules[name] = props["EventPattern"]
			ruleNames = append(ruleNames, name)
			targets, _ := props["Targets"].([]any)
			if len(targets) != 1 || asJSON(targets[0].(map[string]any)["Arn"]) != `{"Fn::GetAtt":["Queue","Arn"]}` {
				t.Errorf("%s: targets %s, want the queue", name, asJSON(targets))
			}
			for _, tg := range targets {
				checkProps(name+" target", "AWS::Events::Rule.Target", tg.(map[string]any), spec.PropertyTypes["AWS::Events::Rule.Target"])
			}
		case "AWS::IAM::Role":
			policies, _ := props["Policies"].([]any)
			if len(policies) != 1 {
				t.Fatalf("%s: %d policies, want 1", name, len(policies))
			}
			pol := policies[0].(map[string]any)
			checkProps(name+" policy", "AWS::IAM::Role.Policy", pol, spec.PropertyTypes["AWS::IAM::Role.Policy"])
			checkPolicy(t, "cloudformation.yaml "+name, policyActions(t, name, pol["PolicyDocument"]))
		}
	}
	checkRules(t, "cloudformation.yaml", rules)

	// The queue takes messages from these rules only, of this account.
	policy := lookupOr(resources["QueuePolicy"].(map[string]any), "Properties.PolicyDocument.Statement").([]any)
	cond := policy[0].(map[string]any)["Condition"].(map[string]any)
	var sources []string
	for _, s := range lookupOr(cond, "ArnEquals.aws:SourceArn").([]any) {
		sources = append(sources, fmt.Sprint(lookupOr(s.(map[string]any), "Fn::GetAtt").([]any)[0]))
	}
	sort.Strings(sources)
	sort.Strings(ruleNames)
	if !slices.Equal(sources, ruleNames) {
		t.Errorf("the queue accepts messages from %v; the rules are %v", sources, ruleNames)
	}
	if asJSON(lookupOr(cond, "StringEquals.aws:SourceAccount")) != `{"Ref":"AWS::AccountId"}` {
		t.Errorf("the queue policy does not hold senders to this account: %s", asJSON(cond))
	}
}

// tfLocals evaluates the literal locals of the Terraform module (those that name no
// variable or resource), parsed with HashiCorp's HCL library.
func tfLocals(t *testing.T) map[string]any {
	t.Helper()
	p := hclparse.NewParser()
	files, err := filepath.Glob(filepath.Join(awsDir, "terraform", "*.tf"))
	if err != nil || len(files) < 3 {
		t.Fatalf("Terraform module: %v %v", files, err)
	}
	out := map[string]any{}
	for _, path := range files {
		f, diags := p.ParseHCLFile(path)
		if diags.HasErrors() {
			t.Fatalf("%s: %s", path, diags.Error())
		}
		body := f.Body.(*hclsyntax.Body)
		for _, block := range body.Blocks {
			if block.Type != "locals" {
				continue
			}
			for name, attr := range block.Body.Attributes {
				if len(attr.Expr.Variables()) > 0 || len(functionCalls(attr.Expr)) > 0 {
					continue
				}
				v, diags := attr.Expr.Value(&hcl.EvalContext{})
				if diags.HasErrors() {
					t.Fatalf("%s: local.%s: %s", path, name, diags.Error())
				}
				b, err := ctyjson.Marshal(v, v.Type())
				if err != nil {
					t.Fatal(err)
				}
				var decoded any
				if err := json.Unmarshal(b, &decoded); err != nil {
					t.Fatal(err)
				}
				out[name] = decoded
			}
		}
	}
	return out
}

// functionCalls lists the functions an expression calls.
func functionCalls(expr hclsyntax.Expression) []string {
	var out []string
	_ = hclsyntax.VisitAll(expr, func(n hclsyntax.Node) hcl.Diagnostics {
		if c, ok := n.(*hclsyntax.FunctionCallExpr); ok {
			out = append(out, c.Name)
		}
		return nil
	})
	return out
}

// TestTerraformModule: the module parses; its rules send exactly the notices Lifeboat acts
// on; and the role's policy allows exactly the binary's calls, each on its scope.
func TestTerraformModule(t *testing.T) {
	locals := tfLocals(t)
	rules, ok := locals["rules"].(map[string]any)
	if !ok {
		t.Fatalf("the module has no literal local.rules: %v", keysOf(locals))
	}
	checkRules(t, "terraform", rules)
	got := map[string]string{}
	for local, scope := range map[string]string{"queue_actions": "queue", "describe_actions": "*", "group_actions": "group"} {
		list, ok := locals[local].([]any)
		if !ok {
			t.Fatalf("the module has no literal local.%s", local)
		}
		for _, a := range list {
			got[fmt.Sprint(a)] = scope
		}
	}
	checkPolicy(t, "terraform", got)

	main, err := os.ReadFile(filepath.Join(awsDir, "terraform", "main.tf"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`Action = local.queue_actions, Resource = aws_sqs_queue.notices.arn`,
		`Action = local.describe_actions, Resource = "*"`,
		`Action   = local.group_actions`,
		`"aws:SourceArn" = [for r in aws_cloudwatch_event_rule.notices : r.arn]`,
		`"aws:SourceAccount" = local.account`,
		`for_each      = local.rules`,
	} {
		if !strings.Contains(string(main), want) {
			t.Errorf("main.tf no longer says %q", want)
		}
	}
}

// TestEksctlSnippet: the eksctl Pod Identity association allows exactly the binary's calls.
func TestEksctlSnippet(t *testing.T) {
	var cfg map[string]any
	readYAML(t, filepath.Join(awsDir, "eksctl.yaml"), &cfg)
	assocs, _ := lookupOr(cfg, "iam.podIdentityAssociations").([]any)
	if len(assocs) != 1 {
		t.Fatalf("%d Pod Identity associations, want 1", len(assocs))
	}
	checkPolicy(t, "eksctl.yaml", policyActions(t, "eksctl.yaml", assocs[0].(map[string]any)["permissionPolicy"]))
}
