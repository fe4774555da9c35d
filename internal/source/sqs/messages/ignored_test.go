// SPDX-License-Identifier: Apache-2.0

package messages

import (
	"strings"
	"testing"
)

// An event of a kind Lifeboat does not know is ignored, never an error, and names the rule
// pattern that sent it, clipped when it is garbage.
func TestUnknownKindNamesItsRule(t *testing.T) {
	long := strings.Repeat("x", 5000)
	for _, tt := range []struct{ body, rule string }{
		{`{"detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.health","account":"` + fixtureAccount + `","detail":{}}`, `{"detail-type":["EC2 Spot Instance Interruption Warning"],"source":["aws.health"]}`},
		{`{"detail-type":"EBS Snapshot Notification","source":"aws.ec2","account":"` + fixtureAccount + `","resources":"arn","detail":7}`, `{"detail-type":["EBS Snapshot Notification"],"source":["aws.ec2"]}`},
		{`{"detail-type":"` + long + `","source":"aws.ec2","account":"` + fixtureAccount + `"}`, `…"],"source":["aws.ec2"]}`},
	} {
		r, err := Parser{QueueAccount: fixtureAccount}.Parse(tt.body, received)
		if err != nil || !r.Ignore || r.Unknown == nil || r.IgnoredKind != IgnoreUnknown || r.IgnoredReason != ReasonUnknownKind {
			t.Fatalf("%s: %+v %v", clip(tt.body), r, err)
		}
		if rule := r.Unknown.Rule(); !strings.Contains(rule, tt.rule) || len(rule) > 400 || !strings.Contains(r.Reason, rule) {
			t.Errorf("rule %s, want %s", rule, tt.rule)
		}
	}
}

// Every ignored result names a kind and reason the counter knows.
func TestIgnoredLabelsAreKnown(t *testing.T) {
	known := map[[2]string]bool{}
	for _, l := range IgnoredLabels() {
		known[l] = true
	}
	for _, body := range []string{
		fixture(t, "test-notification.json"), fixture(t, "health-other.json"), fixture(t, "health-network-maintenance.json"),
		fixture(t, "state-running.json"), fixture(t, "capacity-reservation-reclaimed.json"), fixture(t, "unknown-detail-type.json"),
		`{"Type":"SubscriptionConfirmation","MessageId":"m","Message":"x"}`,
	} {
		r, err := Parse(body, received)
		if err != nil || !r.Ignore || !known[[2]string{r.IgnoredKind, r.IgnoredReason}] {
			t.Errorf("%s: %+v %v", clip(body), r, err)
		}
	}
}
