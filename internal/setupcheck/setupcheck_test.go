// SPDX-License-Identifier: Apache-2.0

package setupcheck

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/aws/smithy-go"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/source/sqs/messages"
)

const queueARN = "arn:aws:sqs:us-east-1:123456789012:lifeboat"

const allowEvents = `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"events.amazonaws.com"},"Action":"sqs:SendMessage","Resource":"` + queueARN + `"}]}`

type setup struct {
	rules          []cloud.Rule
	policy         string
	rulesErr, qErr error
	hooks          map[string][]cloud.Hook // by group
}

func (s setup) GroupsOf(context.Context, []string) ([]string, error) {
	return slices.Sorted(maps.Keys(s.hooks)), nil
}
func (s setup) TerminateHooks(_ context.Context, g string) ([]cloud.Hook, error) {
	return s.hooks[g], nil
}

func (s setup) RulesTargeting(context.Context, string) ([]cloud.Rule, error) {
	return s.rules, s.rulesErr
}
func (s setup) QueueARNAndPolicy(context.Context, string) (string, string, error) {
	return queueARN, s.policy, s.qErr
}

// rulesFor are one enabled rule per kind, as deploy/aws ships them.
func rulesFor(kinds []messages.EventKind) []cloud.Rule {
	var out []cloud.Rule
	for _, k := range kinds {
		out = append(out, cloud.Rule{Name: "lifeboat-" + strings.ReplaceAll(strings.ToLower(k.Name), " ", "-"), State: "ENABLED",
			EventPattern: `{"source":["` + k.Source + `"],"detail-type":["` + strings.Join(k.DetailTypes, `","`) + `"]}`})
	}
	return out
}

func checks(t *testing.T, s setup) []Finding {
	t.Helper()
	got, err := Check(context.Background(), Options{Setup: s, QueueURL: "https://sqs.us-east-1.amazonaws.com/123456789012/lifeboat", Kinds: messages.EventKinds(),
		Instances: []string{"i-0123456789abcdef0"}})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestCheck(t *testing.T) {
	t.Parallel()
	kinds := messages.EventKinds()
	all := rulesFor(kinds)
	if got := checks(t, setup{rules: all, policy: allowEvents}); len(got) != 0 {
		t.Errorf("the shipped set-up: %v, want nothing", got)
	}

	// The Spot rule deleted; the rebalance rule disabled.
	var spot, rebalance int
	for i, k := range kinds {
		switch {
		case strings.Contains(strings.Join(k.DetailTypes, ","), "Spot Instance Interruption"):
			spot = i
		case strings.Contains(strings.Join(k.DetailTypes, ","), "Rebalance"):
			rebalance = i
		}
	}
	broken := append([]cloud.Rule(nil), all...)
	broken[rebalance].State = "DISABLED"
	broken = append(broken[:spot], broken[spot+1:]...)
	got := checks(t, setup{rules: broken, policy: allowEvents})
	if len(got) != 2 || !strings.Contains(got[0].Problem+got[1].Problem, "EC2 Spot Instance Interruption Warning") ||
		!strings.Contains(got[0].Problem+got[1].Problem, "is disabled") {
		t.Errorf("a deleted and a disabled rule: %v", got)
	}

	// One rule for every EC2 event, by prefix, and one for the rest: nothing missing.
	wide := []cloud.Rule{{Name: "ec2", State: "ENABLED", EventPattern: `{"source":["aws.ec2"]}`},
		{Name: "rest", State: "ENABLED", EventPattern: `{"source":["aws.autoscaling","aws.health"],"detail-type":[{"prefix":"EC2 Instance-"},"AWS Health Event"]}`}}
	if got := checks(t, setup{rules: wide, policy: allowEvents}); len(got) != 0 {
		t.Errorf("wide rules: %v, want nothing", got)
	}

	for _, policy := range []string{"", `{"Statement":[{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::123456789012:root"},"Action":"sqs:*"}]}`} {
		got := checks(t, setup{rules: all, policy: policy})
		if len(got) != 1 || got[0].Check != CheckQueuePolicy {
			t.Errorf("policy %q: %v, want the queue policy's finding", policy, got)
		}
	}

	denied := &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "not authorized to perform: events:ListRuleNamesByTarget"}
	got = checks(t, setup{rulesErr: denied, policy: allowEvents})
	if len(got) != 1 || got[0].Check != CheckPermission || !strings.Contains(got[0].Fix, "events:ListRuleNamesByTarget") {
		t.Errorf("rules not readable: %v, want the permission's finding", got)
	}
}

// Where hooks are in use, a group of this cluster's nodes without a terminate hook is said,
// and so is a hook that reaches neither the queue nor a rule to it.
func TestCheckHooks(t *testing.T) {
	t.Parallel()
	var noLifecycleRule []cloud.Rule
	for _, r := range rulesFor(messages.EventKinds()) {
		if !strings.Contains(r.EventPattern, "aws.autoscaling") {
			noLifecycleRule = append(noLifecycleRule, r)
		}
	}
	hooks := map[string][]cloud.Hook{"workers": {{Name: "drain", NotificationTarget: queueARN}}, "gpu": {{Name: "drain"}}, "batch": nil}
	got := checks(t, setup{rules: noLifecycleRule, policy: allowEvents, hooks: hooks})
	var hookFindings []string
	for _, f := range got {
		if f.Check == CheckHooks {
			hookFindings = append(hookFindings, f.Problem)
		}
	}
	if len(hookFindings) != 2 || !strings.Contains(strings.Join(hookFindings, "|"), "group gpu does not reach") && !strings.Contains(strings.Join(hookFindings, "|"), "hook drain of group gpu") ||
		!strings.Contains(strings.Join(hookFindings, "|"), "group batch") {
		t.Errorf("hook findings %q, want gpu's hook and batch's missing hook", hookFindings)
	}
	// With the lifecycle rule, every hook reaches the queue through EventBridge.
	got = checks(t, setup{rules: rulesFor(messages.EventKinds()), policy: allowEvents, hooks: hooks})
	if len(got) != 1 || !strings.Contains(got[0].Problem, "group batch") {
		t.Errorf("with the lifecycle rule: %v, want only batch's missing hook", got)
	}
	// No group uses hooks: none is expected.
	if got := checks(t, setup{rules: rulesFor(messages.EventKinds()), policy: allowEvents, hooks: map[string][]cloud.Hook{"batch": nil}}); len(got) != 0 {
		t.Errorf("no hooks in use: %v, want nothing", got)
	}
}
