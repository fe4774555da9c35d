// SPDX-License-Identifier: Apache-2.0

// Package setupcheck checks the AWS set-up that feeds the controller's queue, which fails
// silently when it is wrong: a rule deleted or disabled, a rule that no longer covers a kind
// of notice, a queue policy that does not let EventBridge send. Nothing arrives, and nothing
// else says so. The controller runs it at start and every hour; what it finds is said as a
// refused permission is (an Event on Lifeboat's pod, a metric, a log line).
package setupcheck

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/source/sqs/messages"
)

// Checks, as findings and the metric name them.
const (
	CheckRules       = "rules"
	CheckQueuePolicy = "queue_policy"
	// CheckHooks: a group of this cluster's nodes whose terminations do not reach the queue.
	CheckHooks = "hooks"
	// CheckPermission: the set-up could not be read for want of permission.
	CheckPermission = "permission"
)

// Checks lists them all.
var Checks = []string{CheckRules, CheckQueuePolicy, CheckHooks, CheckPermission}

// Finding is one thing wrong with the set-up.
type Finding struct {
	Check   string
	Problem string
	Fix     string
}

func (f Finding) String() string { return f.Problem + "; " + f.Fix }

// Options say what to check.
type Options struct {
	Setup    cloud.Setup
	QueueURL string
	// Kinds are the EventBridge events the queue must receive (messages.EventKinds()).
	Kinds []messages.EventKind
	// Instances are this cluster's nodes' instances: their groups' terminate hooks are checked.
	Instances []string
}

// Check reads the set-up once. An error means it could not be read for another reason than
// a refused permission (which is a finding): the next run tries again.
func Check(ctx context.Context, o Options) ([]Finding, error) {
	arn, policy, err := o.Setup.QueueARNAndPolicy(ctx, o.QueueURL)
	if _, denied := cloud.Denied(err); denied {
		return []Finding{{Check: CheckPermission, Problem: "the queue's attributes cannot be read (sqs:GetQueueAttributes refused): its policy and the rules that feed it are not checked",
			Fix: "grant sqs:GetQueueAttributes on the queue"}}, nil
	}
	if err != nil {
		return nil, err
	}
	if arn == "" {
		return nil, fmt.Errorf("the queue %s has no QueueArn attribute", o.QueueURL)
	}
	var out []Finding
	if why := eventBridgeMaySend(policy, arn); why != "" {
		out = append(out, Finding{Check: CheckQueuePolicy, Problem: why,
			Fix: "allow sqs:SendMessage to the service principal events.amazonaws.com in the queue's policy (deploy/aws)"})
	}
	rules, err := o.Setup.RulesTargeting(ctx, arn)
	if code, denied := cloud.Denied(err); denied {
		return append(out, Finding{Check: CheckPermission, Problem: "the EventBridge rules that send to the queue cannot be read (" + code + "): a deleted or disabled rule goes unseen",
			Fix: "grant events:ListRuleNamesByTarget and events:DescribeRule (opt-in, deploy/aws)"}), nil
	}
	if err != nil {
		return nil, err
	}
	out = append(out, uncovered(rules, o.Kinds)...)
	hooks, err := groupHooks(ctx, o, arn, lifecycleRule(rules))
	if err != nil {
		return nil, err
	}
	return append(out, hooks...), nil
}

// lifecycleRule reports whether an enabled rule sends terminate lifecycle actions to the
// queue: every hook's actions then reach it through EventBridge, whatever its own target.
func lifecycleRule(rules []cloud.Rule) bool {
	k := messages.EventKind{Source: "aws.autoscaling", DetailTypes: []string{"EC2 Instance-terminate Lifecycle Action"}}
	return slices.ContainsFunc(rules, func(r cloud.Rule) bool { return strings.HasPrefix(r.State, "ENABLED") && covers(r.EventPattern, k) })
}

// groupHooks checks the groups of this cluster's nodes, where hooks are in use (some group
// has a terminate hook): a group without one terminates its instances without a drain, and a
// hook that reaches neither the queue nor a rule to it leaves its instances waiting for its
// timeout.
func groupHooks(ctx context.Context, o Options, queueARN string, viaRule bool) ([]Finding, error) {
	if len(o.Instances) == 0 {
		return nil, nil
	}
	groups, err := o.Setup.GroupsOf(ctx, o.Instances)
	if code, denied := cloud.Denied(err); denied {
		return []Finding{{Check: CheckPermission, Problem: "the groups of this cluster's nodes cannot be read (" + code + "): their lifecycle hooks are not checked",
			Fix: "grant autoscaling:DescribeAutoScalingInstances"}}, nil
	}
	if err != nil {
		return nil, err
	}
	var without []string
	var out []Finding
	inUse := false
	for _, g := range groups {
		hooks, err := o.Setup.TerminateHooks(ctx, g)
		if _, denied := cloud.Denied(err); denied {
			return append(out, Finding{Check: CheckPermission, Problem: "the lifecycle hooks of group " + g + " cannot be read: they are not checked",
				Fix: "grant autoscaling:DescribeLifecycleHooks"}), nil
		}
		if err != nil {
			return nil, err
		}
		if len(hooks) == 0 {
			without = append(without, g)
			continue
		}
		inUse = true
		for _, h := range hooks {
			if !viaRule && h.NotificationTarget != queueARN {
				out = append(out, Finding{Check: CheckHooks,
					Problem: fmt.Sprintf("the terminate hook %s of group %s does not reach the queue (its notification target is %q, and no enabled rule sends lifecycle actions to the queue): its instances wait for the hook's timeout, undrained", h.Name, g, h.NotificationTarget),
					Fix:     "add the lifecycle-action rule from deploy/aws, or make the queue the hook's notification target"})
			}
		}
	}
	if inUse {
		for _, g := range without {
			out = append(out, Finding{Check: CheckHooks,
				Problem: "group " + g + " of this cluster's nodes has no terminate lifecycle hook, while other groups do: a scale-in or instance refresh terminates its instances without waiting for the drain",
				Fix:     "add a terminate lifecycle hook to the group (deploy/aws)"})
		}
	}
	return out, nil
}

// uncovered are the kinds no enabled rule sends to the queue, naming a disabled rule that would.
func uncovered(rules []cloud.Rule, kinds []messages.EventKind) []Finding {
	var out []Finding
	for _, k := range kinds {
		var enabled, disabled []string
		for _, r := range rules {
			if !covers(r.EventPattern, k) {
				continue
			}
			if strings.HasPrefix(r.State, "ENABLED") {
				enabled = append(enabled, r.Name)
			} else {
				disabled = append(disabled, r.Name)
			}
		}
		if len(enabled) > 0 {
			continue
		}
		problem := fmt.Sprintf("no enabled EventBridge rule sends %s events (%s) to the queue", k.Source, strings.Join(k.DetailTypes, " / "))
		fix := "add the rule from deploy/aws"
		if len(disabled) > 0 {
			problem += ": rule " + strings.Join(disabled, ", ") + " would, but is disabled"
			fix = "enable it"
		}
		if k.Source == "aws.autoscaling" {
			problem += " (a lifecycle hook whose notification target is the queue sends them without a rule)"
		}
		out = append(out, Finding{Check: CheckRules, Problem: problem, Fix: fix})
	}
	return out
}

// covers reports whether the rule's event pattern matches an event of the kind. Pattern
// features this does not read (numeric or exists filters) count as matching: a rule is never
// taken for missing when it may not be.
func covers(pattern string, k messages.EventKind) bool {
	var p map[string]any
	if json.Unmarshal([]byte(pattern), &p) != nil {
		return false
	}
	if !fieldMatches(p["source"], k.Source) {
		return false
	}
	return slices.ContainsFunc(k.DetailTypes, func(dt string) bool { return fieldMatches(p["detail-type"], dt) })
}

// fieldMatches is EventBridge's match of one top-level field: absent matches everything; a
// list matches when one of its values does.
func fieldMatches(field any, value string) bool {
	if field == nil {
		return true
	}
	list, ok := field.([]any)
	if !ok {
		return false
	}
	for _, v := range list {
		switch v := v.(type) {
		case string:
			if v == value {
				return true
			}
		case map[string]any:
			if prefix, ok := v["prefix"].(string); ok {
				if strings.HasPrefix(value, prefix) {
					return true
				}
				continue
			}
			if but, ok := v["anything-but"]; ok {
				if s, isString := but.(string); isString {
					but = []any{s}
				}
				if !fieldMatches(but, value) {
					return true
				}
				continue
			}
			return true
		}
	}
	return false
}

// eventBridgeMaySend is why the queue policy does not let EventBridge send to the queue, ""
// when a statement allows it.
func eventBridgeMaySend(policy, queueARN string) string {
	if policy == "" {
		return "the queue has no access policy: EventBridge cannot send to it"
	}
	var doc struct {
		Statement json.RawMessage
	}
	if err := json.Unmarshal([]byte(policy), &doc); err != nil {
		return "the queue's access policy cannot be read: " + err.Error()
	}
	var stmts []map[string]any
	if json.Unmarshal(doc.Statement, &stmts) != nil {
		var one map[string]any
		if json.Unmarshal(doc.Statement, &one) != nil {
			return "the queue's access policy has no statement"
		}
		stmts = []map[string]any{one}
	}
	for _, s := range stmts {
		if s["Effect"] == "Allow" && principalIsEventBridge(s["Principal"]) && anyOf(s["Action"], "sqs:SendMessage", "sqs:*", "*") &&
			(s["Resource"] == nil || anyOf(s["Resource"], queueARN, "*")) {
			return ""
		}
	}
	return "no statement of the queue's access policy allows events.amazonaws.com to sqs:SendMessage: EventBridge's deliveries are refused"
}

func principalIsEventBridge(p any) bool {
	switch p := p.(type) {
	case string:
		return p == "*"
	case map[string]any:
		return anyOf(p["Service"], "events.amazonaws.com") || anyOf(p["AWS"], "*")
	}
	return false
}

// anyOf reports whether v (a string or a list of strings) holds one of want.
func anyOf(v any, want ...string) bool {
	switch v := v.(type) {
	case string:
		return slices.Contains(want, v)
	case []any:
		for _, e := range v {
			if s, ok := e.(string); ok && slices.Contains(want, s) {
				return true
			}
		}
	}
	return false
}
