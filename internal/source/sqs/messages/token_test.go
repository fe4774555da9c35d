// SPDX-License-Identifier: Apache-2.0

package messages

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"lifeboat.dev/lifeboat/internal/notice"
)

// A lifecycle action's token completes the action for whoever holds it: it must not reach a
// notice id (taints, Events, logs and webhooks carry ids) nor an error message about the
// message, in any of the forms a hook arrives in.
func TestLifecycleTokenStaysSecret(t *testing.T) {
	const token = "6f1d3c2a-9b8e-4d7f-a1c0-5e4b3a2f1d0c"
	hook := `{"Origin":"AutoScalingGroup","Destination":"EC2","Service":"AWS Auto Scaling","Time":"2026-11-21T12:10:27.914Z","AccountId":"000000000000",` +
		`"LifecycleActionToken":"` + token + `","AutoScalingGroupName":"workers","LifecycleHookName":"drain","EC2InstanceId":"i-0badc0ffee1234567","LifecycleTransition":"autoscaling:EC2_INSTANCE_TERMINATING"}`
	envelope := `{"version":"0","id":"e1","detail-type":"EC2 Instance-terminate Lifecycle Action","source":"aws.autoscaling","account":"000000000000",` +
		`"time":"2026-11-21T12:10:27Z","region":"us-east-1","resources":[],"detail":{"LifecycleActionToken":"` + token +
		`","AutoScalingGroupName":"workers","LifecycleHookName":"drain","EC2InstanceId":"i-0badc0ffee1234567","LifecycleTransition":"autoscaling:EC2_INSTANCE_TERMINATING"}}`
	sns := `{"Type":"Notification","MessageId":"m1","Message":` + quote(hook) + `}`
	for name, body := range map[string]string{"direct": hook, "eventbridge": envelope, "sns": sns} {
		t.Run(name, func(t *testing.T) {
			res, err := Parse(body, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Notices) != 1 {
				t.Fatalf("%d notices, want 1", len(res.Notices))
			}
			n := res.Notices[0]
			if strings.Contains(n.ID, token[:8]) || strings.Contains(n.Description, token[:8]) {
				t.Errorf("notice %q (%q) carries the token", n.ID, n.Description)
			}
			if want := notice.ID(notice.ASGTermination, "i-0badc0ffee1234567", notice.TokenDigest(token)); n.ID != want {
				t.Errorf("id %q, want %q", n.ID, want)
			}
			// Records and messages from before the change are matched on the older form.
			if want := notice.Digest(notice.ID(notice.ASGTermination, "i-0badc0ffee1234567", token)); n.LegacyIDDigest != want {
				t.Errorf("legacy id digest %q, want %q", n.LegacyIDDigest, want)
			}
			if raw := fmt.Sprintf("%+v", n); strings.Contains(raw, token[:8]) {
				t.Errorf("the notice carries the token in a field: %s", raw)
			}
			// Another token (the next action of the same instance) is another notice.
			other, err := Parse(strings.ReplaceAll(body, token, "0e2d4c6b-8a9f-4e1d-b3c5-7a9b1d3f5e7a"), time.Now())
			if err != nil || len(other.Notices) != 1 || other.Notices[0].ID == n.ID {
				t.Errorf("another token gave %+v, %v: want a notice of another id", other.Notices, err)
			}
			// A message that cannot be used names what is wrong, not the token.
			_, err = Parse(strings.ReplaceAll(body, "drain", ""), time.Now())
			if err == nil {
				t.Fatal("a hook without its hook name was accepted")
			}
			if strings.Contains(err.Error(), token[:8]) {
				t.Errorf("the error shows the token: %v", err)
			}
		})
	}
}

func quote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}
