// SPDX-License-Identifier: Apache-2.0

package deploy_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"unicode"
)

// The set-up's inputs are Terraform's variables; each has a CloudFormation parameter of the
// same name in CamelCase (cfnParamName), bar Terraform's tags, which a stack takes from its
// own tags.
var cfnParamSpelling = map[string]string{"oidc_provider": "OIDCProvider", "describe_eks_nodegroups": "DescribeEKSNodegroups"}

func cfnParamName(tf string) string {
	if n, ok := cfnParamSpelling[tf]; ok {
		return n
	}
	var b strings.Builder
	for _, w := range strings.Split(tf, "_") {
		r := []rune(w)
		b.WriteString(string(unicode.ToUpper(r[0])) + string(r[1:]))
	}
	return b.String()
}

// awsRule is one EventBridge rule: its pattern and the ARN it sends to.
type awsRule struct {
	Pattern any
	Target  string
}

// awsSetup is what one rendering of the AWS set-up creates, in the terms CloudFormation and
// Terraform share. The ARNs and URLs of what it creates read QUEUE_ARN, QUEUE_URL, DLQ_ARN,
// DLQ_URL and ROLE_ARN; each rule's ARN stays its dialect's token (the key of Rules).
type awsSetup struct {
	Queue, DeadLetters map[string]string // nil when not created: name, retention, kms_key, sse, dead_letters, max_receive_count
	QueuePolicy        []map[string]any  // statements; nil without a policy
	DeadLetterPolicy   []map[string]any
	Rules              map[string]awsRule
	Role               map[string]string // name, path, permissions_boundary
	Trust              []map[string]any
	Policy             []map[string]any // the statements of all its inline policies, by Sid
	Alarms             map[string]map[string]any
	Association        map[string]string // nil without one
	Outputs            map[string]any
}

// setupInputs are the inputs every rendering gets unless a test says otherwise.
var setupInputs = map[string]any{"cluster_name": "prod"}

func withInputs(more map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range setupInputs {
		out[k] = v
	}
	for k, v := range more {
		out[k] = v
	}
	return out
}

// renderCFN deploys cloudformation.yaml with the inputs (Terraform's names).
func renderCFN(t *testing.T, inputs map[string]any) (*awsSetup, error) {
	t.Helper()
	params := map[string]string{}
	for k, v := range inputs {
		if k == "tags" {
			continue
		}
		params[cfnParamName(k)] = scalar(v)
	}
	stack, err := cfnDeploy(cfnTemplate(t), params)
	if err != nil {
		return nil, err
	}
	return cfnSetup(t, stack), nil
}

// renderTF plans the Terraform module with the inputs.
func renderTF(t *testing.T, inputs map[string]any) (*awsSetup, error) {
	t.Helper()
	plan, err := readTerraform(t, filepath.Join(awsDir, "terraform")).apply(inputs)
	if err != nil {
		return nil, err
	}
	return tfSetup(t, plan), nil
}

// eachDialect renders the set-up with the inputs in CloudFormation and in Terraform, and
// runs check on each.
func eachDialect(t *testing.T, inputs map[string]any, check func(t *testing.T, s *awsSetup)) {
	t.Helper()
	inputs = withInputs(inputs)
	for name, render := range map[string]func(*testing.T, map[string]any) (*awsSetup, error){"cloudformation": renderCFN, "terraform": renderTF} {
		t.Run(name, func(t *testing.T) {
			s, err := render(t, inputs)
			if err != nil {
				t.Fatalf("%v: %v", inputs, err)
			}
			check(t, s)
		})
	}
}

// refusedByBoth: CloudFormation and Terraform refuse the inputs, naming the input (as each
// spells it) and saying want.
func refusedByBoth(t *testing.T, inputs map[string]any, input, want string) {
	t.Helper()
	inputs = withInputs(inputs)
	for dialect, render := range map[string]func(*testing.T, map[string]any) (*awsSetup, error){"cloudformation": renderCFN, "terraform": renderTF} {
		name := input
		if dialect == "cloudformation" {
			name = cfnParamName(input)
		}
		_, err := render(t, inputs)
		if err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), want) ||
			strings.Contains(err.Error(), "has no parameter") || strings.Contains(err.Error(), "has no variable") {
			t.Errorf("%s, %v: %v, want a refusal naming %s and saying %q", dialect, inputs, err, name, want)
		}
	}
}

// tokens names what the set-up creates in each dialect's references.
var (
	cfnTokens = map[string]string{"{att:Queue.Arn}": "QUEUE_ARN", "{ref:Queue}": "QUEUE_URL", "{att:DeadLetterQueue.Arn}": "DLQ_ARN",
		"{ref:DeadLetterQueue}": "DLQ_URL", "{att:Role.Arn}": "ROLE_ARN", "{ref:Role}": "ROLE_NAME"}
	tfToken = regexp.MustCompile(`\{att:([a-z_]+)\.([a-z_]+)(\[[^\]]*\])?\.([a-z_]+)\}`)
	tfNames = map[string]string{"aws_sqs_queue.notices.arn": "QUEUE_ARN", "aws_sqs_queue.notices.url": "QUEUE_URL", "aws_sqs_queue.notices.id": "QUEUE_URL",
		"aws_sqs_queue.dead_letters.arn": "DLQ_ARN", "aws_sqs_queue.dead_letters.url": "DLQ_URL", "aws_sqs_queue.dead_letters.id": "DLQ_URL",
		"aws_iam_role.controller.arn": "ROLE_ARN", "aws_iam_role.controller.id": "ROLE_NAME"}
)

// named replaces, in every string of v, the tokens of what the set-up creates by their names.
func named(v any, name func(string) string) any {
	switch x := v.(type) {
	case string:
		return name(x)
	case map[string]any:
		out := map[string]any{}
		for k, val := range x {
			out[name(k)] = named(val, name)
		}
		return out
	case []any:
		out := []any{}
		for _, val := range x {
			out = append(out, named(val, name))
		}
		return out
	}
	return v
}

func cfnName(s string) string {
	for tok, n := range cfnTokens {
		s = strings.ReplaceAll(s, tok, n)
	}
	return s
}

func tfName(s string) string {
	return tfToken.ReplaceAllStringFunc(s, func(m string) string {
		p := tfToken.FindStringSubmatch(m)
		if n, ok := tfNames[p[1]+"."+p[2]+"."+p[4]]; ok {
			return n
		}
		return m
	})
}

// policyDoc reads a policy document given as an object or as JSON text, its statements
// normalised: Action, Resource and Condition values as sorted lists.
func policyDoc(t *testing.T, where string, doc any) []map[string]any {
	t.Helper()
	if s, ok := doc.(string); ok {
		if err := json.Unmarshal([]byte(s), &doc); err != nil {
			t.Fatalf("%s: the policy is not JSON: %v\n%s", where, err, s)
		}
	}
	m := asMap(doc)
	if m["Version"] != "2012-10-17" {
		t.Errorf("%s: policy version %v", where, m["Version"])
	}
	var out []map[string]any
	stmts := asList(m["Statement"])
	if one, ok := m["Statement"].(map[string]any); ok {
		stmts = []any{one}
	}
	for _, s := range stmts {
		st := map[string]any{}
		for k, v := range asMap(s) {
			switch k {
			case "Action", "Resource":
				st[k] = sortedList(v)
			case "Condition":
				cond := map[string]any{}
				for op, kv := range asMap(v) {
					vals := map[string]any{}
					for key, val := range asMap(kv) {
						vals[key] = sortedList(val)
					}
					cond[op] = vals
				}
				st[k] = cond
			default:
				st[k] = v
			}
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return fmt.Sprint(out[i]["Sid"]) < fmt.Sprint(out[j]["Sid"]) })
	return out
}

func sortedList(v any) []any {
	var out []any
	if l, ok := v.([]any); ok {
		out = append(out, l...)
	} else {
		out = []any{v}
	}
	sort.Slice(out, func(i, j int) bool { return scalar(out[i]) < scalar(out[j]) })
	return out
}

func jsonOrObject(t *testing.T, where string, v any) any {
	t.Helper()
	s, ok := v.(string)
	if !ok {
		return v
	}
	var out any
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		t.Fatalf("%s: not JSON: %v\n%s", where, err, s)
	}
	return out
}

// scalars keeps the named keys of m, each spelled as a scalar.
func scalars(m map[string]any, keys map[string]string) map[string]string {
	out := map[string]string{}
	for from, to := range keys {
		if v, ok := m[from]; ok && v != nil {
			out[to] = scalar(v)
		}
	}
	return out
}

// alarm is a CloudWatch alarm in shared terms.
func alarm(m map[string]any, keys map[string]string, dims map[string]any) map[string]any {
	out := map[string]any{}
	for from, to := range keys {
		if v, ok := m[from]; ok && v != nil {
			if l, isList := v.([]any); isList {
				if len(l) > 0 { // an empty list of actions is none
					out[to] = sortedList(l)
				}
			} else {
				out[to] = scalar(v)
			}
		}
	}
	out["dimensions"] = dims
	return out
}

var (
	cfnQueueKeys = map[string]string{"QueueName": "name", "MessageRetentionPeriod": "retention", "KmsMasterKeyId": "kms_key", "SqsManagedSseEnabled": "sse"}
	tfQueueKeys  = map[string]string{"name": "name", "message_retention_seconds": "retention", "kms_master_key_id": "kms_key", "sqs_managed_sse_enabled": "sse"}
	cfnAlarmKeys = map[string]string{"AlarmName": "name", "Namespace": "namespace", "MetricName": "metric", "Statistic": "statistic", "Period": "period",
		"EvaluationPeriods": "evaluation_periods", "Threshold": "threshold", "ComparisonOperator": "comparison", "TreatMissingData": "treat_missing_data",
		"AlarmActions": "alarm_actions", "OKActions": "ok_actions"}
	tfAlarmKeys = map[string]string{"alarm_name": "name", "namespace": "namespace", "metric_name": "metric", "statistic": "statistic", "period": "period",
		"evaluation_periods": "evaluation_periods", "threshold": "threshold", "comparison_operator": "comparison", "treat_missing_data": "treat_missing_data",
		"alarm_actions": "alarm_actions", "ok_actions": "ok_actions"}
)

// redrive adds a queue's redrive policy (an object, or JSON text) to its attributes.
func redrive(t *testing.T, q map[string]string, policy any) {
	t.Helper()
	if policy == nil {
		return
	}
	p := asMap(jsonOrObject(t, "redrive policy", policy))
	q["dead_letters"], q["max_receive_count"] = scalar(p["deadLetterTargetArn"]), scalar(p["maxReceiveCount"])
}

// cfnSetup reads a deployed stack in shared terms.
func cfnSetup(t *testing.T, stack *cfnStack) *awsSetup {
	t.Helper()
	s := &awsSetup{Rules: map[string]awsRule{}, Alarms: map[string]map[string]any{}}
	for _, name := range sortedKeys(stack.Resources) {
		r := stack.Resources[name]
		p := asMap(named(r.Properties, cfnName))
		switch r.Type {
		case "AWS::SQS::Queue":
			q := scalars(p, cfnQueueKeys)
			redrive(t, q, p["RedrivePolicy"])
			if name == "Queue" {
				s.Queue = q
			} else {
				s.DeadLetters = q
			}
		case "AWS::SQS::QueuePolicy":
			doc := policyDoc(t, name, p["PolicyDocument"])
			for _, q := range asList(p["Queues"]) {
				switch q {
				case "QUEUE_URL":
					s.QueuePolicy = doc
				case "DLQ_URL":
					s.DeadLetterPolicy = doc
				default:
					t.Errorf("%s: policy of queue %v, not one the set-up makes", name, q)
				}
			}
		case "AWS::Events::Rule":
			targets := asList(p["Targets"])
			if len(targets) != 1 {
				t.Errorf("%s: %d targets, want 1", name, len(targets))
				continue
			}
			s.Rules["{att:"+name+".Arn}"] = awsRule{Pattern: jsonOrObject(t, name, p["EventPattern"]), Target: scalar(asMap(targets[0])["Arn"])}
		case "AWS::IAM::Role":
			s.Role = scalars(p, map[string]string{"RoleName": "name", "Path": "path", "PermissionsBoundary": "permissions_boundary"})
			s.Trust = policyDoc(t, name+" trust", p["AssumeRolePolicyDocument"])
			for _, pol := range asList(p["Policies"]) {
				s.Policy = append(s.Policy, policyDoc(t, name+" policy "+scalar(asMap(pol)["PolicyName"]), asMap(pol)["PolicyDocument"])...)
			}
		case "AWS::CloudWatch::Alarm":
			dims := map[string]any{}
			for _, d := range asList(p["Dimensions"]) {
				dims[scalar(asMap(d)["Name"])] = scalar(asMap(d)["Value"])
			}
			s.Alarms[scalar(p["MetricName"])] = alarm(p, cfnAlarmKeys, dims)
		case "AWS::EKS::PodIdentityAssociation":
			s.Association = scalars(p, map[string]string{"ClusterName": "cluster", "Namespace": "namespace", "ServiceAccount": "service_account", "RoleArn": "role"})
		default:
			t.Errorf("%s: resource type %s is not read by this test", name, r.Type)
		}
	}
	s.Outputs = map[string]any{}
	for k, v := range asMap(named(stack.Outputs, cfnName)) {
		s.Outputs[strings.ToLower(k)] = v
	}
	sortPolicy(s)
	return s
}

// tfSetup reads a plan in shared terms.
func tfSetup(t *testing.T, plan *tfPlan) *awsSetup {
	t.Helper()
	s := &awsSetup{Rules: map[string]awsRule{}, Alarms: map[string]map[string]any{}}
	ruleNames := map[string]string{} // rule name → its ARN token
	var targets []map[string]any
	for _, addr := range sortedKeys(plan.Resources) {
		p := asMap(named(plan.Resources[addr], tfName))
		switch plan.Types[addr] {
		case "aws_sqs_queue":
			q := scalars(p, tfQueueKeys)
			redrive(t, q, p["redrive_policy"])
			if strings.HasPrefix(addr, "aws_sqs_queue.notices") {
				s.Queue = q
			} else {
				s.DeadLetters = q
			}
		case "aws_sqs_queue_policy":
			doc := policyDoc(t, addr, p["policy"])
			switch p["queue_url"] {
			case "QUEUE_URL":
				s.QueuePolicy = doc
			case "DLQ_URL":
				s.DeadLetterPolicy = doc
			default:
				t.Errorf("%s: policy of queue %v, not one the set-up makes", addr, p["queue_url"])
			}
		case "aws_cloudwatch_event_rule":
			tok := "{att:" + addr + ".arn}"
			ruleNames[scalar(p["name"])] = tok
			s.Rules[tok] = awsRule{Pattern: jsonOrObject(t, addr, p["event_pattern"])}
		case "aws_cloudwatch_event_target":
			targets = append(targets, p)
		case "aws_iam_role":
			s.Role = scalars(p, map[string]string{"name": "name", "path": "path", "permissions_boundary": "permissions_boundary"})
			s.Trust = policyDoc(t, addr+" trust", p["assume_role_policy"])
		case "aws_iam_role_policy":
			if p["role"] != "ROLE_NAME" {
				t.Errorf("%s: a policy of role %v", addr, p["role"])
			}
			s.Policy = append(s.Policy, policyDoc(t, addr, p["policy"])...)
		case "aws_cloudwatch_metric_alarm":
			s.Alarms[scalar(p["metric_name"])] = alarm(p, tfAlarmKeys, asMap(p["dimensions"]))
		case "aws_eks_pod_identity_association":
			s.Association = scalars(p, map[string]string{"cluster_name": "cluster", "namespace": "namespace", "service_account": "service_account", "role_arn": "role"})
		default:
			t.Errorf("%s: resource type %s is not read by this test", addr, plan.Types[addr])
		}
	}
	for _, tg := range targets {
		tok, ok := ruleNames[scalar(tg["rule"])]
		if !ok {
			t.Errorf("a target of rule %v, which the module does not make", tg["rule"])
			continue
		}
		r := s.Rules[tok]
		if r.Target != "" {
			t.Errorf("rule %v has two targets", tg["rule"])
		}
		r.Target = scalar(tg["arn"])
		s.Rules[tok] = r
	}
	s.Outputs = map[string]any{}
	for k, v := range asMap(named(plan.Outputs, tfName)) {
		if v != nil { // a null output is none
			s.Outputs[strings.ReplaceAll(k, "_", "")] = v
		}
	}
	sortPolicy(s)
	return s
}

func sortPolicy(s *awsSetup) {
	sort.Slice(s.Policy, func(i, j int) bool { return fmt.Sprint(s.Policy[i]["Sid"]) < fmt.Sprint(s.Policy[j]["Sid"]) })
}

// shared is the setup with each rule's ARN, which each dialect spells its own way, as
// RULE_ARN, and the rules listed by pattern: what CloudFormation and Terraform must agree on.
func (s *awsSetup) shared() map[string]any {
	var tokens []string
	for tok := range s.Rules {
		tokens = append(tokens, tok)
	}
	rename := func(v any) any {
		return named(v, func(x string) string {
			for _, tok := range tokens {
				x = strings.ReplaceAll(x, tok, "RULE_ARN")
			}
			return x
		})
	}
	rules := map[string]string{}
	for _, r := range s.Rules {
		rules[asJSON(r.Pattern)] = r.Target
	}
	return map[string]any{
		"queue": s.Queue, "dead_letters": s.DeadLetters, "queue_policy": rename(asJSONValue(s.QueuePolicy)),
		"dead_letter_policy": asJSONValue(s.DeadLetterPolicy), "rules": rules, "role": s.Role, "trust": asJSONValue(s.Trust),
		"policy": asJSONValue(s.Policy), "alarms": asJSONValue(s.Alarms), "association": s.Association, "outputs": s.Outputs,
	}
}

// asJSONValue is v as encoding/json decodes its JSON (maps and lists of any).
func asJSONValue(v any) any {
	var out any
	_ = json.Unmarshal([]byte(asJSON(v)), &out)
	return out
}

// statement is the policy statement with the Sid, or nil.
func statement(stmts []map[string]any, sid string) map[string]any {
	i := slices.IndexFunc(stmts, func(s map[string]any) bool { return s["Sid"] == sid })
	if i < 0 {
		return nil
	}
	return stmts[i]
}
