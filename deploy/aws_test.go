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
	"sync"
	"testing"
	"time"

	"lifeboat.dev/lifeboat/deploy"
	"lifeboat.dev/lifeboat/internal/ownership"
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
	"github.com/aws/aws-sdk-go-v2/service/eks":                    "eks",
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
// binary's code calls, and nothing more, bar those another service makes on its behalf.
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
		_, called := calls[p.Action]
		switch {
		case p.Via == "" && !called:
			t.Errorf("deploy.AWSPermissions allows %s, which the binary never calls", p.Action)
		case p.Via != "" && called:
			t.Errorf("%s: the binary calls it itself, not %s on its behalf", p.Action, p.Via)
		}
		if !slices.Contains([]string{"queue", "key", "group", "instance", "nodegroup", "*"}, p.Scope) {
			t.Errorf("%s: scope %q", p.Action, p.Scope)
		}
	}
	for action, at := range calls {
		if !listed[action] {
			t.Errorf("the binary calls %s (%s) and deploy.AWSPermissions does not allow it", action, at[0])
		}
	}
}

// granted reports whether the inputs grant the permission: it needs none, or its input is
// on or set.
func granted(p deploy.AWSPermission, inputs map[string]any) bool {
	switch v := inputs[p.Grant].(type) {
	case bool:
		return v
	case string:
		return v != ""
	}
	return p.Grant == ""
}

// clusterTagCondition is the condition on every statement that acts on groups or instances:
// the resource carries this cluster's tag (internal/ownership.ClusterTagPrefix), owned or
// shared, as the binary requires of the instances it acts on.
func clusterTagCondition(cluster string) string {
	return `{"StringEquals":{"aws:ResourceTag/` + ownership.ClusterTagPrefix + cluster + `":["owned","shared"]}}`
}

// scopeOf names the resource a statement allows its actions on, in deploy.AWSPermission's terms.
func scopeOf(resource any, queueARN, key, cluster string) string {
	switch r := fmt.Sprint(resource); r {
	case "*":
		return "*"
	case queueARN:
		return "queue"
	case key:
		return "key"
	case "arn:" + testPartition + ":autoscaling:" + testRegion + ":" + testAccount + ":autoScalingGroup:*:autoScalingGroupName/*":
		return "group"
	case "arn:" + testPartition + ":ec2:" + testRegion + ":" + testAccount + ":instance/*":
		return "instance"
	case "arn:" + testPartition + ":eks:" + testRegion + ":" + testAccount + ":nodegroup/" + cluster + "/*":
		return "nodegroup" // the cluster's managed node groups: nodegroup/<cluster>/<name>/<id>
	default:
		return "an unknown resource " + r
	}
}

// checkPolicy holds one shipped policy to deploy.AWSPermissions for the inputs: the same
// actions, each once, each on the resources of its scope, those on groups and instances only
// where they carry the cluster's tag.
func checkPolicy(t *testing.T, where string, stmts []map[string]any, inputs map[string]any, queueARN string) {
	t.Helper()
	want := map[string]string{}
	for _, p := range deploy.AWSPermissions {
		if granted(p, inputs) {
			want[p.Action] = p.Scope
		}
	}
	key, _ := inputs["kms_key_arn"].(string)
	got := map[string]string{}
	for _, st := range stmts {
		if st["Effect"] != "Allow" {
			t.Errorf("%s: statement %s is not an Allow", where, asJSON(st))
		}
		resources := asList(st["Resource"])
		if len(resources) != 1 {
			t.Errorf("%s: statement %v names %d resources, want one", where, st["Sid"], len(resources))
			continue
		}
		scope := scopeOf(resources[0], queueARN, key, fmt.Sprint(inputs["cluster_name"]))
		cond := asJSON(st["Condition"])
		if (scope == "group" || scope == "instance") && cond != clusterTagCondition(fmt.Sprint(inputs["cluster_name"])) {
			t.Errorf("%s: statement %v acts on %ss with the condition %s, want them tagged for the cluster: %s", where, st["Sid"], scope, cond, clusterTagCondition(fmt.Sprint(inputs["cluster_name"])))
		}
		for _, a := range asList(st["Action"]) {
			if _, twice := got[fmt.Sprint(a)]; twice {
				t.Errorf("%s: %v is allowed twice", where, a)
			}
			got[fmt.Sprint(a)] = scope
		}
	}
	for a, scope := range want {
		if g, ok := got[a]; !ok {
			t.Errorf("%s does not allow %s, which the binary calls with these inputs", where, a)
		} else if g != scope {
			t.Errorf("%s allows %s on %s, want %s", where, a, g, scope)
		}
	}
	for a := range got {
		if _, ok := want[a]; !ok {
			t.Errorf("%s allows %s, which the binary does not call with these inputs", where, a)
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

// A running instance and another service's Health event: messages of types Lifeboat acts on,
// with nothing to act on, which no rule may send.
var noticeNonSamples = []string{"state-running.json", "health-other.json"}

// noticeSamples maps each EventBridge detail-type to a message of the parser's testdata (its
// documented samples and corpus) that the parser acts on, the first by name; a kind added
// with its sample needs no line here.
var noticeSamples = sync.OnceValues(func() (map[string]string, error) {
	dir := filepath.Join("..", "internal", "source", "sqs", "messages", "testdata")
	var files []string
	for _, pattern := range []string{"*.json", "corpus/*.json"} {
		found, err := filepath.Glob(filepath.Join(dir, pattern))
		if err != nil {
			return nil, err
		}
		files = append(files, found...)
	}
	out := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var envelope struct {
			DetailType string `json:"detail-type"`
		}
		res, err := messages.Parse(string(b), time.Now())
		if json.Unmarshal(b, &envelope) != nil || envelope.DetailType == "" || err != nil || res.Ignore ||
			len(res.Notices)+len(res.Reservations) == 0 {
			continue // not an EventBridge event the parser acts on
		}
		if _, seen := out[envelope.DetailType]; !seen {
			out[envelope.DetailType], _ = filepath.Rel(dir, f)
		}
	}
	return out, nil
})

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
// detail-type of every kind has a rule whose pattern matches its documented sample (those in
// off none), every rule sends some kind, and no rule sends the messages of those types there
// is nothing to act on.
func checkRules(t *testing.T, where string, rules map[string]any, off map[string]bool) {
	t.Helper()
	used := map[string]bool{}
	for _, kind := range messages.EventKinds() {
		for _, dt := range kind.DetailTypes {
			samples, err := noticeSamples()
			if err != nil {
				t.Fatal(err)
			}
			file, ok := samples[dt]
			if !ok {
				t.Errorf("kind %s (%s): no sample the parser acts on in its testdata", kind.Name, dt)
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
			want := 1
			if off[dt] {
				want = 0
			}
			if len(hit) != want {
				t.Errorf("%s: %d rules (%v) send %s (%s), want %d", where, len(hit), hit, dt, file, want)
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

// optionalRules are the detail-types the set-up sends unless an input leaves them out.
var optionalRules = map[string]string{
	"launch_lifecycle_actions":  "EC2 Instance-launch Lifecycle Action",
	"rebalance_recommendations": "EC2 Instance Rebalance Recommendation",
}

// checkSetup holds one rendering of the set-up to the binary: its rules send exactly the
// notices it acts on (bar those the inputs leave out) to the queue it reads, the queue takes
// messages from these rules only, of this account, and the role allows exactly the calls
// the binary makes with these inputs.
func checkSetup(t *testing.T, where string, s *awsSetup, inputs map[string]any) {
	t.Helper()
	queueARN := "QUEUE_ARN"
	if a, _ := inputs["existing_queue_arn"].(string); a != "" {
		queueARN = a
	}
	rules := map[string]any{}
	var tokens []string
	for tok, r := range s.Rules {
		rules[tok] = r.Pattern
		tokens = append(tokens, tok)
		if r.Target != queueARN {
			t.Errorf("%s: rule %s sends to %s, not the queue %s", where, tok, r.Target, queueARN)
		}
	}
	off := map[string]bool{}
	for input, dt := range optionalRules {
		if on, set := inputs[input].(bool); set && !on {
			off[dt] = true
		}
	}
	checkRules(t, where, rules, off)
	if s.Queue != nil {
		i := slices.IndexFunc(s.QueuePolicy, func(st map[string]any) bool {
			return st["Effect"] == "Allow" && asJSON(st["Principal"]) == `{"Service":"events.amazonaws.com"}`
		})
		if i < 0 {
			t.Fatalf("%s: no statement of the queue policy lets EventBridge send: %s", where, asJSON(s.QueuePolicy))
		}
		cond := asMap(s.QueuePolicy[i]["Condition"])
		var sources []string
		for _, a := range asList(lookupOr(cond, "ArnEquals.aws:SourceArn")) {
			sources = append(sources, fmt.Sprint(a))
		}
		sort.Strings(sources)
		sort.Strings(tokens)
		if !slices.Equal(sources, tokens) {
			t.Errorf("%s: the queue accepts messages from %v; the rules are %v", where, sources, tokens)
		}
		if got := asJSON(lookupOr(cond, "StringEquals.aws:SourceAccount")); got != `["`+testAccount+`"]` {
			t.Errorf("%s: the queue policy holds senders to the accounts %s, want this one", where, got)
		}
	}
	checkPolicy(t, where+" role", s.Policy, inputs, queueARN)
}

// Inputs for the tests: a key, a topic, a boundary, an OIDC issuer and NTH's queue.
const (
	testKey      = "arn:aws:kms:" + testRegion + ":" + testAccount + ":key/1234abcd-12ab-34cd-56ef-1234567890ab"
	testTopic    = "arn:aws:sns:" + testRegion + ":" + testAccount + ":oncall"
	testBoundary = "arn:aws:iam::" + testAccount + ":policy/platform-boundary"
	testIssuer   = "oidc.eks." + testRegion + ".amazonaws.com/id/EXAMPLED539D4633E53DE1B71EXAMPLE"
	testNTHQueue = "arn:aws:sqs:" + testRegion + ":" + testAccount + ":nth-queue"
)

// setupMatrix are the renderings every set-up test covers: the defaults, and each group of inputs.
var setupMatrix = []map[string]any{
	{},
	{"credential_mode": "irsa", "oidc_provider": testIssuer},
	{"kms_key_arn": testKey, "alarm_topic_arn": testTopic, "max_receive_count": 5, "oldest_message_alarm_seconds": 120},
	{"mark_instances_unhealthy": true, "abandon_on_incomplete_drain": true, "terminate_repaired_instances": true, "reboot_repaired_instances": true, "describe_eks_nodegroups": true, "setup_check": true},
	{"mark_instances_unhealthy": true},
	{"existing_queue_arn": testNTHQueue},
	{"existing_queue_arn": testNTHQueue, "kms_key_arn": testKey},
	{"launch_lifecycle_actions": false, "rebalance_recommendations": false},
	{"rebalance_recommendations": false},
	{"role_name": "lifeboat", "role_path": "/controllers/", "permissions_boundary_arn": testBoundary},
}

// cfnTemplate is deploy/aws/cloudformation.yaml.
func cfnTemplate(t *testing.T) map[string]any {
	t.Helper()
	var tpl map[string]any
	readYAML(t, filepath.Join(awsDir, "cloudformation.yaml"), &tpl)
	return tpl
}

// cfnSpec is the excerpt of AWS's CloudFormation resource specification in aws/testdata.
type cfnSpec struct {
	ResourceTypes map[string]map[string]bool
	PropertyTypes map[string]map[string]bool
}

// checkProps holds properties to the specification: each known, each required one present.
// A property or list element given through Fn::If is checked in both branches.
func (spec cfnSpec) checkProps(t *testing.T, where, typ string, props map[string]any, known map[string]bool) {
	t.Helper()
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
	nested := map[string]string{"Targets": "AWS::Events::Rule.Target", "Policies": "AWS::IAM::Role.Policy", "Dimensions": "AWS::CloudWatch::Alarm.Dimension"}
	for p, v := range props {
		pt, ok := nested[p]
		if !ok {
			continue
		}
		if _, ok := spec.PropertyTypes[pt]; !ok {
			t.Errorf("%s: property type %s is not in the specification's excerpt", where, pt)
		}
		for _, el := range branches(v) {
			for _, item := range branches(el) {
				if m, ok := item.(map[string]any); ok {
					spec.checkProps(t, where+" "+p, pt, m, spec.PropertyTypes[pt])
				}
			}
		}
	}
}

// branches are the values v may take: both of an Fn::If (AWS::NoValue left out), the
// elements of a list, or v.
func branches(v any) []any {
	if fn, arg, ok := intrinsic(v); ok && fn == "Fn::If" {
		var out []any
		for _, b := range asList(arg)[1:] {
			if asJSON(b) != `{"Ref":"AWS::NoValue"}` {
				out = append(out, branches(b)...)
			}
		}
		return out
	}
	if l, ok := v.([]any); ok {
		return l
	}
	return []any{v}
}

// TestCloudFormationTemplate: the template's resources and properties are those of AWS's
// resource specification (the excerpt in aws/testdata), every parameter is described and
// used, and every rendering of setupMatrix holds to the binary (checkSetup).
func TestCloudFormationTemplate(t *testing.T) {
	var spec cfnSpec
	readYAML(t, filepath.Join(awsDir, "testdata", "cfn-resource-spec.json"), &spec)
	tpl := cfnTemplate(t)
	for name, r := range asMap(tpl["Resources"]) {
		res := asMap(r)
		typ := fmt.Sprint(res["Type"])
		known, ok := spec.ResourceTypes[typ]
		if !ok {
			t.Errorf("%s: resource type %s is not in the specification's excerpt", name, typ)
			continue
		}
		spec.checkProps(t, name, typ, asMap(res["Properties"]), known)
	}
	text := asJSON(tpl["Resources"]) + asJSON(tpl["Conditions"]) + asJSON(tpl["Outputs"]) + asJSON(tpl["Rules"])
	for name, p := range asMap(tpl["Parameters"]) {
		if asMap(p)["Description"] == nil {
			t.Errorf("parameter %s has no description", name)
		}
		if !strings.Contains(text, `"`+name+`"`) && !strings.Contains(text, "${"+name+"}") {
			t.Errorf("parameter %s is never used", name)
		}
	}
	for _, inputs := range setupMatrix {
		inputs = withInputs(inputs)
		s, err := renderCFN(t, inputs)
		if err != nil {
			t.Errorf("%v: %v", inputs, err)
			continue
		}
		checkSetup(t, fmt.Sprintf("cloudformation.yaml %v", inputs), s, inputs)
	}
}

// tfSchema is the excerpt of the AWS provider's schema in aws/testdata: for each resource
// type, its arguments (name: required) and its block types.
type tfSchema struct {
	ResourceTypes map[string]struct {
		Arguments map[string]bool
		Blocks    []string
	}
}

// TestTerraformModule: the module parses; its resources' arguments and blocks are those of
// the AWS provider's schema (the excerpt in aws/testdata); a resource whose address changed
// since 0.1.0 is moved; and every rendering of setupMatrix holds to the binary (checkSetup).
func TestTerraformModule(t *testing.T) {
	var schema tfSchema
	readYAML(t, filepath.Join(awsDir, "testdata", "tf-provider-schema.json"), &schema)
	m := readTerraform(t, filepath.Join(awsDir, "terraform"))
	for _, b := range m.blocks {
		if b.kind != "resource" {
			continue
		}
		typ := b.block.Labels[0]
		s, ok := schema.ResourceTypes[typ]
		if !ok {
			t.Errorf("%s: resource type %s is not in the schema's excerpt", b.name, typ)
			continue
		}
		for name := range b.body.Attributes {
			if _, ok := s.Arguments[name]; !ok && !slices.Contains([]string{"count", "for_each", "depends_on", "provider"}, name) {
				t.Errorf("%s: %s has no argument %s", b.name, typ, name)
			}
		}
		for name, required := range s.Arguments {
			if _, ok := b.body.Attributes[name]; required && !ok {
				t.Errorf("%s: %s requires %s", b.name, typ, name)
			}
		}
		for _, nb := range b.body.Blocks {
			if nb.Type != "lifecycle" && !slices.Contains(s.Blocks, nb.Type) {
				t.Errorf("%s: %s has no block %s", b.name, typ, nb.Type)
			}
		}
	}
	// The evaluator holds the module to Terraform 1.3's rules (a validation names only its own variable).
	if m.required != ">= 1.3" {
		t.Errorf("the module requires Terraform %q; the evaluator reads it as 1.3 does: update both", m.required)
	}
	// Resources that had no count in 0.1.0 keep their state at [0].
	for _, addr := range []string{"aws_sqs_queue.notices", "aws_sqs_queue_policy.notices"} {
		if !slices.Contains(m.moved, [2]string{addr, addr + "[0]"}) {
			t.Errorf("no moved block takes %s to %s[0]: an upgrade would replace it", addr, addr)
		}
	}
	for _, mv := range m.moved {
		to := strings.SplitN(mv[1], "[", 2)[0]
		if !slices.ContainsFunc(m.blocks, func(b *tfBlock) bool { return b.name == to }) {
			t.Errorf("moved block to %s, which the module does not make", mv[1])
		}
	}
	for _, inputs := range setupMatrix {
		inputs = withInputs(inputs)
		s, err := renderTF(t, inputs)
		if err != nil {
			t.Errorf("%v: %v", inputs, err)
			continue
		}
		checkSetup(t, fmt.Sprintf("terraform %v", inputs), s, inputs)
	}
}

// TestAWSSetupsAgree: CloudFormation and Terraform take the same inputs, with the same
// defaults, and make the same set-up from each rendering of setupMatrix: the same queues,
// policies, rules, role, alarms and outputs.
func TestAWSSetupsAgree(t *testing.T) {
	tfVars := map[string]string{}
	for _, b := range readTerraform(t, filepath.Join(awsDir, "terraform")).blocks {
		if b.kind != "var" || b.name == "var.tags" {
			continue
		}
		d := ""
		if a, ok := b.body.Attributes["default"]; ok {
			v, _ := a.Expr.Value(nil)
			d = scalar(ctyToGo(v))
		}
		tfVars[cfnParamName(strings.TrimPrefix(b.name, "var."))] = d
	}
	cfnParams := map[string]string{}
	for name, p := range asMap(cfnTemplate(t)["Parameters"]) {
		d := ""
		if v, ok := asMap(p)["Default"]; ok {
			d = scalar(v)
		}
		cfnParams[name] = d
	}
	if !reflect.DeepEqual(tfVars, cfnParams) {
		t.Errorf("the inputs differ (name: default):\ncloudformation %v\nterraform      %v", cfnParams, tfVars)
	}
	for _, inputs := range setupMatrix {
		inputs = withInputs(inputs)
		c, err := renderCFN(t, inputs)
		if err != nil {
			t.Errorf("cloudformation %v: %v", inputs, err)
			continue
		}
		tf, err := renderTF(t, inputs)
		if err != nil {
			t.Errorf("terraform %v: %v", inputs, err)
			continue
		}
		cs, ts := c.shared(), tf.shared()
		for _, k := range sortedKeys(cs) {
			if a, b := asJSON(cs[k]), asJSON(ts[k]); a != b {
				t.Errorf("%v: the %s differ:\ncloudformation %s\nterraform      %s", inputs, k, a, b)
			}
		}
	}
}

// TestEksctlSnippet: the eksctl Pod Identity association allows exactly the binary's calls
// with the opt-in features off, its group actions only on the cluster's tagged groups, with
// the role named per region as the other set-ups name it.
func TestEksctlSnippet(t *testing.T) {
	var cfg map[string]any
	readYAML(t, filepath.Join(awsDir, "eksctl.yaml"), &cfg)
	assocs, _ := lookupOr(cfg, "iam.podIdentityAssociations").([]any)
	if len(assocs) != 1 {
		t.Fatalf("%d Pod Identity associations, want 1", len(assocs))
	}
	a := asMap(assocs[0])
	cluster, region := fmt.Sprint(lookupOr(cfg, "metadata.name")), fmt.Sprint(lookupOr(cfg, "metadata.region"))
	if cluster != "prod" || region != testRegion {
		t.Fatalf("eksctl.yaml names cluster %s in %s; this test reads prod in %s", cluster, region, testRegion)
	}
	if a["roleName"] != "lifeboat-prod-"+testRegion {
		t.Errorf("eksctl.yaml: role %v, want lifeboat-prod-%s (unique per region)", a["roleName"], testRegion)
	}
	checkPolicy(t, "eksctl.yaml", policyDoc(t, "eksctl.yaml", a["permissionPolicy"]), map[string]any{"cluster_name": "prod"},
		"arn:aws:sqs:"+testRegion+":"+testAccount+":lifeboat-prod")
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
