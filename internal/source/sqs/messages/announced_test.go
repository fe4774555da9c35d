// SPDX-License-Identifier: Apache-2.0

package messages

import (
	"testing"
	"time"
)

// A notice's own time is the message's: the EventBridge envelope's time, or the hook's Time;
// the receipt stands in only when the message states none. It never changes identity.
func TestAnnounced(t *testing.T) {
	received := time.Date(2026, 11, 21, 12, 30, 0, 0, time.UTC)
	sent := time.Date(2026, 11, 21, 12, 10, 27, 0, time.UTC)
	const hookFields = `"LifecycleTransition":"autoscaling:EC2_INSTANCE_TERMINATING","LifecycleActionToken":"t","AutoScalingGroupName":"g",` +
		`"LifecycleHookName":"h","EC2InstanceId":"i-0123456789abcdef0"`
	for _, tt := range []struct {
		name, body string
		want       time.Time
	}{
		{"spot warning", `{"version":"0","id":"e1","detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","account":"1","time":"2026-11-21T12:10:27Z",` +
			`"region":"us-east-1","resources":[],"detail":{"instance-id":"i-0123456789abcdef0","instance-action":"terminate"}}`, sent},
		{"hook", `{"Service":"AWS Auto Scaling","Time":"2026-11-21T12:10:27Z",` + hookFields + `}`, sent},
		{"hook without a time", `{"Service":"AWS Auto Scaling",` + hookFields + `}`, received},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Parse(tt.body, received)
			if err != nil || len(res.Notices) != 1 {
				t.Fatalf("%+v, %v", res, err)
			}
			if got := res.Notices[0].Announced; !got.Equal(tt.want) {
				t.Errorf("announced %v, want %v", got, tt.want)
			}
			again, _ := Parse(tt.body, received.Add(time.Hour))
			if again.Notices[0].ID != res.Notices[0].ID {
				t.Errorf("the id moved with the receipt: %s, then %s", res.Notices[0].ID, again.Notices[0].ID)
			}
		})
	}
}
