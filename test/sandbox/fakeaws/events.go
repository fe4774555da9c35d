// SPDX-License-Identifier: Apache-2.0

package fakeaws

import (
	"encoding/json"
	"fmt"
	"time"
)

// The messages AWS puts on a cluster's queue, as EventBridge and Auto Scaling write them, for
// tests and the demo to send. Each builder fills the fields Lifeboat reads and the usual
// others, so a message looks like one from a real account.

// Account is the account id the fake's messages name.
const Account = "000000000000"

// envelope builds an EventBridge event around detail.
func envelope(id, source, detailType string, at time.Time, resources []string, detail any) string {
	if resources == nil {
		resources = []string{}
	}
	b, err := json.Marshal(map[string]any{
		"version": "0", "id": id, "detail-type": detailType, "source": source, "account": Account,
		"time": at.UTC().Format(time.RFC3339), "region": "us-east-1", "resources": resources, "detail": detail,
	})
	if err != nil {
		panic(err) // only maps of strings and slices: cannot fail
	}
	return string(b)
}

func instanceARN(instance string) []string {
	return []string{"arn:aws:ec2:us-east-1:" + Account + ":instance/" + instance}
}

// SpotInterruptionWarning is EC2's two-minute Spot warning, sent at at.
func SpotInterruptionWarning(instance, action string, at time.Time) string {
	return envelope("spot-"+instance, "aws.ec2", "EC2 Spot Instance Interruption Warning", at, instanceARN(instance),
		map[string]string{"instance-id": instance, "instance-action": action})
}

// CapacityReservationInterruptionWarning is EC2's two-minute warning that it reclaims an
// instance of a capacity reservation, sent at at; like AWS's, it states the termination time.
func CapacityReservationInterruptionWarning(instance, action string, at time.Time) string {
	return envelope("capres-"+instance, "aws.ec2", "EC2 Capacity Reservation Instance Interruption Warning", at, instanceARN(instance),
		map[string]string{"instance-id": instance, "instance-action": action,
			"instance-termination-time": at.Add(2 * time.Minute).UTC().Format(time.RFC3339), "azId": "use1-az1"})
}

// CapacityReservationInterruptionWarningDocumented is the same warning as the EC2 user guide
// prints it: resources is a string, not a list.
func CapacityReservationInterruptionWarningDocumented(instance string, at time.Time) string {
	var e map[string]any
	if err := json.Unmarshal([]byte(CapacityReservationInterruptionWarning(instance, "terminate", at)), &e); err != nil {
		panic(err)
	}
	e["resources"] = instanceARN(instance)[0]
	b, _ := json.Marshal(e)
	return string(b)
}

// RebalanceRecommendation is EC2's rebalance recommendation for an instance, sent at at.
func RebalanceRecommendation(instance string, at time.Time) string {
	return envelope("rebalance-"+instance, "aws.ec2", "EC2 Instance Rebalance Recommendation", at, instanceARN(instance),
		map[string]string{"instance-id": instance})
}

// HealthScheduledChange is an AWS Health scheduled change for EC2 naming the instances, in
// that order. start and end are written as the Health API writes them (RFC 1123, GMT); an
// empty startText/endText uses them, anything else is written verbatim (to test odd
// spellings).
func HealthScheduledChange(eventID, code string, start, end time.Time, startText, endText string, instances ...string) string {
	return healthEvent(eventID, code, "upcoming", start, end, startText, endText, instances)
}

// HealthScheduledChangeClosed is the same event sent again once the change is over (done or
// canceled).
func HealthScheduledChangeClosed(eventID, code string, start, end time.Time, instances ...string) string {
	return healthEvent(eventID, code, "closed", start, end, "", "", instances)
}

func healthEvent(eventID, code, status string, start, end time.Time, startText, endText string, instances []string) string {
	const layout = "Mon, 2 Jan 2006 15:04:05 GMT"
	if startText == "" && !start.IsZero() {
		startText = start.UTC().Format(layout)
	}
	if endText == "" && !end.IsZero() {
		endText = end.UTC().Format(layout)
	}
	entities := make([]map[string]string, 0, len(instances))
	for _, i := range instances {
		entities = append(entities, map[string]string{"entityValue": i})
	}
	detail := map[string]any{
		"eventArn":          fmt.Sprintf("arn:aws:health:us-east-1::event/EC2/%s/%s", code, eventID),
		"service":           "EC2",
		"eventTypeCode":     code,
		"eventTypeCategory": "scheduledChange",
		"statusCode":        status,
		"affectedEntities":  entities,
		"eventDescription":  []map[string]string{{"language": "en_US", "latestDescription": "Scheduled maintenance of the underlying host."}},
	}
	if startText != "" {
		detail["startTime"] = startText
	}
	if endText != "" {
		detail["endTime"] = endText
	}
	return envelope(eventID, "aws.health", "AWS Health Event", time.Now(), instances, detail)
}

// TerminateLifecycleAction is the EventBridge event of an Auto Scaling termination hook whose
// action began at at.
func TerminateLifecycleAction(group, hook, instance, token string, at time.Time) string {
	return envelope("asg-"+token, "aws.autoscaling", "EC2 Instance-terminate Lifecycle Action", at,
		[]string{"arn:aws:autoscaling:us-east-1:" + Account + ":autoScalingGroup:0:autoScalingGroupName/" + group},
		map[string]string{
			"LifecycleActionToken": token, "AutoScalingGroupName": group, "LifecycleHookName": hook,
			"EC2InstanceId": instance, "LifecycleTransition": "autoscaling:EC2_INSTANCE_TERMINATING",
		})
}
