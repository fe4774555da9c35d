// SPDX-License-Identifier: Apache-2.0

package messages

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// The fixtures name account 111122223333.
const (
	fixtureAccount = "111122223333"
	otherAccount   = "444455556666"
)

// A message from an account the queue does not accept is refused, whether it is an
// EventBridge event, an Auto Scaling message sent straight to the queue, or either wrapped by
// SNS; the queue's own account and the allowed ones are accepted.
func TestParserAccounts(t *testing.T) {
	own := Parser{QueueAccount: fixtureAccount}
	allowing := Parser{QueueAccount: "777788889999", AllowedAccounts: []string{"000011112222", fixtureAccount}}
	strict := Parser{QueueAccount: otherAccount}
	strictWithAllowed := Parser{QueueAccount: otherAccount, AllowedAccounts: []string{"000011112222"}}
	for _, file := range []string{"spot.json", "asg-terminate.json", "health-ec2.json", "asg-hook-direct.json", "sns-asg-hook.json", "sns-spot.json", "test-notification.json"} {
		t.Run(file, func(t *testing.T) {
			body := fixture(t, file)
			want, err := Parse(body, received)
			if err != nil {
				t.Fatal(err)
			}
			for name, p := range map[string]Parser{"own account": own, "allowed account": allowing, "no queue account": {}} {
				got, err := p.Parse(body, received)
				if err != nil || len(got.Notices) != len(want.Notices) || got.Ignore != want.Ignore {
					t.Errorf("%s: %+v %v; want it accepted", name, got, err)
				}
			}
			for name, p := range map[string]Parser{"another account": strict, "another account, others allowed": strictWithAllowed} {
				got, err := p.Parse(body, received)
				if !errors.Is(err, ErrForeignAccount) {
					t.Fatalf("%s: %+v %v; want ErrForeignAccount", name, got, err)
				}
				if got.Notices != nil || got.Ignore {
					t.Errorf("%s: a result with the refusal: %+v", name, got)
				}
				// The reason names both accounts.
				for _, s := range []string{fixtureAccount, otherAccount, "is not the queue's account"} {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("%s: %q does not contain %q", name, err, s)
					}
				}
				if len(p.AllowedAccounts) > 0 && !strings.Contains(err.Error(), "000011112222") {
					t.Errorf("%s: %q does not name the allowed accounts", name, err)
				}
			}
		})
	}
}

// A message that names no account at all is refused when the queue's account is known.
func TestParserMissingAccount(t *testing.T) {
	p := Parser{QueueAccount: fixtureAccount}
	for _, body := range []string{
		`{"version":"0","id":"x","detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","time":"2026-11-21T10:00:00Z","detail":{"instance-id":"i-0123456789abcdef0","instance-action":"terminate"}}`,
		`{"Time":"2026-11-21T12:10:27Z","LifecycleTransition":"autoscaling:EC2_INSTANCE_TERMINATING","LifecycleActionToken":"t","AutoScalingGroupName":"g","LifecycleHookName":"h","EC2InstanceId":"i-0123456789abcdef0"}`,
	} {
		_, err := p.Parse(body, received)
		if !errors.Is(err, ErrForeignAccount) || !strings.Contains(err.Error(), "names no") || !strings.Contains(err.Error(), fixtureAccount) {
			t.Errorf("%s: %v", clip(body), err)
		}
	}
}

// hookBody is a lifecycle message sent straight to the queue, with fields replaced.
func hookBody(t *testing.T, set map[string]string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(fixture(t, "asg-hook-direct.json")), &m); err != nil {
		t.Fatal(err)
	}
	for k, v := range set {
		m[k] = v
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func healthBody(id string, entities []string) string {
	ents := make([]string, len(entities))
	for i, e := range entities {
		ents[i] = `{"entityValue":"` + e + `"}`
	}
	return `{"version":"0","id":"` + id + `","detail-type":"AWS Health Event","source":"aws.health","account":"` + fixtureAccount + `","time":"2026-11-21T10:00:00Z","detail":{"eventArn":"arn:aws:health:us-east-1::event/EC2/AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED/` + id + `","service":"EC2","eventTypeCategory":"scheduledChange","eventTypeCode":"AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED","startTime":"Wed, 2 Dec 2026 03:00:00 GMT","affectedEntities":[` + strings.Join(ents, ",") + `]}}`
}

func manyInstances(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("i-%017x", i+1)
	}
	return ids
}

// Fields are bounded as AWS bounds them; an over-long or malformed one is refused with a
// reason that names it (and never repeats a token).
func TestParseBounds(t *testing.T) {
	long := strings.Repeat("g", 256)
	secret := strings.Repeat("s", 256)
	tests := []struct {
		name string
		body string
		want []string // nil: accepted
		not  string   // must not appear in the error
	}{
		{"group of 255", hookBody(t, map[string]string{"AutoScalingGroupName": long[:255]}), nil, ""},
		{"group of 256", hookBody(t, map[string]string{"AutoScalingGroupName": long}), []string{"AutoScalingGroupName", "256 characters long, more than 255"}, ""},
		{"group of 256 characters in 512 bytes", hookBody(t, map[string]string{"AutoScalingGroupName": strings.Repeat("é", 256)}), []string{"AutoScalingGroupName", "256 characters"}, ""},
		{"group of 255 characters in 510 bytes", hookBody(t, map[string]string{"AutoScalingGroupName": strings.Repeat("é", 255)}), nil, ""},
		{"group with a control character", hookBody(t, map[string]string{"AutoScalingGroupName": "workers\x00b"}), []string{"AutoScalingGroupName", "printable"}, ""},
		{"hook of 256", hookBody(t, map[string]string{"LifecycleHookName": long}), []string{"LifecycleHookName", "more than 255"}, ""},
		{"hook with a space", hookBody(t, map[string]string{"LifecycleHookName": "drain me"}), []string{"LifecycleHookName", `"drain me"`, "letters, digits"}, ""},
		{"token of 256", hookBody(t, map[string]string{"LifecycleActionToken": secret}), []string{"LifecycleActionToken is 256 characters long"}, secret[:40]},
		{"instance id of another shape", hookBody(t, map[string]string{"EC2InstanceId": "i-0123456789abcdef0/../x"}), []string{"EC2InstanceId", "not an EC2 instance id"}, ""},
		{"health id of 256", healthBody(long, []string{"i-0123456789abcdef0"}), []string{"health event", "id", "more than 255"}, ""},
		{"health event naming the most instances", healthBody("e-1", manyInstances(MaxHealthEntities)), nil, ""},
		{"health event naming too many", healthBody("e-1", manyInstances(MaxHealthEntities+1)), []string{"health event e-1", "10001 affected entities, more than the 10000"}, ""},
		{"a body larger than SQS takes", `{"detail-type":"` + strings.Repeat("x", MaxBodyBytes) + `"}`, []string{"queue message", "more than the 1048576"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Parser{QueueAccount: fixtureAccount}.Parse(tt.body, received)
			if tt.want == nil {
				if err != nil || len(r.Notices) == 0 {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted: %d notices", len(r.Notices))
			}
			for _, s := range tt.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", clip(err.Error()), s)
				}
			}
			if tt.not != "" && strings.Contains(err.Error(), tt.not) {
				t.Errorf("error repeats the value: %q", clip(err.Error()))
			}
			if len(err.Error()) > 2000 {
				t.Errorf("error of %d bytes", len(err.Error()))
			}
		})
	}
}

// Entities that are not instances are told one by one up to a few, then counted: a message
// naming thousands of them makes a few log lines, not thousands.
func TestHealthEntityWarningsBounded(t *testing.T) {
	entities := []string{"i-0123456789abcdef0"}
	for i := range 500 {
		entities = append(entities, fmt.Sprintf("h-%017x", i))
	}
	r, err := Parse(healthBody("e-2", entities), received)
	if err != nil || len(r.Notices) != 1 {
		t.Fatalf("%d notices, %v", len(r.Notices), err)
	}
	if len(r.Warnings) != maxEntityWarnings+1 || !strings.Contains(r.Warnings[maxEntityWarnings].Detail, "490 more affected entities") {
		t.Errorf("%d warnings, the last %+v", len(r.Warnings), r.Warnings[len(r.Warnings)-1])
	}
}

func BenchmarkParseBigHealthEvent(b *testing.B) {
	body := healthBody("e-big", manyInstances(5000))
	p := Parser{QueueAccount: fixtureAccount}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if r, err := p.Parse(body, received); err != nil || len(r.Notices) != 5000 {
			b.Fatal(err)
		}
	}
}
