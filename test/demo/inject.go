// SPDX-License-Identifier: Apache-2.0

package demo

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
)

// Lifecycle action tokens of the two terminate hooks the scenario sends.
const (
	tokenB       = "5d2f6a1e-0b7c-4a9e-9c1d-demo0000000b"
	tokenForeign = "5d2f6a1e-0b7c-4a9e-9c1d-demo000000ff"
)

// awsConfig points the SDK at the fake endpoint with static credentials, so it never looks
// for any on the network.
func awsConfig(endpoint string) aws.Config {
	return aws.Config{
		Region:           "us-east-1",
		Credentials:      credentials.NewStaticCredentialsProvider("AKIDSANDBOX", "sandbox-secret", ""),
		BaseEndpoint:     aws.String(endpoint),
		RetryMaxAttempts: 1,
	}
}

// terminateHookMessage is what Auto Scaling sends to a lifecycle hook's queue when an
// instance starts terminating.
func terminateHookMessage(group, instance, token string, at time.Time) string {
	return fmt.Sprintf(`{"Origin":"AutoScalingGroup","Destination":"EC2","Service":"AWS Auto Scaling","Time":%q,"AccountId":"000000000000","RequestId":"req-%s","LifecycleActionToken":%q,"AutoScalingGroupName":%q,"LifecycleHookName":%q,"EC2InstanceId":%q,"LifecycleTransition":"autoscaling:EC2_INSTANCE_TERMINATING"}`,
		at.UTC().Format(time.RFC3339), token[len(token)-4:], token, group, hookName, instance)
}

// inject shows the spot notice to node A's agent and sends the two terminate hooks (node B's
// and the foreign instance's) to the queue, recording each as it goes out.
func inject(ctx context.Context, e *env, w *watcher, cases []lane) error {
	a, b, foreign := cases[0], cases[1], cases[2]
	e.imdsA.Show(spotPath)
	w.record(a.name, EventNotice, "", "", "spot interruption warning visible in instance metadata")

	queue := awssqs.NewFromConfig(awsConfig(e.aws.URL()))
	for _, c := range []struct {
		l     lane
		group string
		what  string
	}{
		{b, ourGroup, "Auto Scaling terminate hook sent to the queue"},
		{foreign, foreignGroup, "terminate hook for " + foreignID + " (another cluster's instance) sent to the queue"},
	} {
		// Auto Scaling holds the instance in Terminating:Wait from now until the action is
		// completed or the hook times out, and takes it out of its load balancer's target
		// group, where it drains for the group's deregistration delay.
		e.aws.BeginLifecycleAction(hookName, c.group, c.l.instance, c.l.token)
		if c.l.targetGroup != "" {
			if err := e.leaveTargetGroup(c.l.instance); err != nil {
				return fmt.Errorf("deregister %s from target group %s: %w", c.l.instance, c.l.targetGroup, err)
			}
		}
		body := terminateHookMessage(c.group, c.l.instance, c.l.token, time.Now())
		if _, err := queue.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: aws.String(e.queueURL), MessageBody: aws.String(body)}); err != nil {
			return fmt.Errorf("send the terminate hook for %s: %w", c.l.instance, err)
		}
		w.record(c.l.name, EventNotice, "", "", c.what)
	}
	return nil
}
