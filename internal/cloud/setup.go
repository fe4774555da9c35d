// SPDX-License-Identifier: Apache-2.0

package cloud

import "context"

// Rule is an EventBridge rule that targets the queue.
type Rule struct {
	Name         string
	State        string // ENABLED, DISABLED, ENABLED_WITH_ALL_CLOUDTRAIL_MANAGEMENT_EVENTS
	EventPattern string // JSON; "" for a scheduled rule
}

// Setup reads the AWS set-up that feeds the queue: the EventBridge rules that target it and
// the queue's own ARN and policy. Its AWS implementation is controlleronly.AWSSetup.
type Setup interface {
	// RulesTargeting lists the rules on the default event bus whose targets include targetARN.
	RulesTargeting(ctx context.Context, targetARN string) ([]Rule, error)
	// QueueARNAndPolicy is the queue's ARN and its access policy ("" when it has none).
	QueueARNAndPolicy(ctx context.Context, queueURL string) (arn, policy string, err error)
	// GroupsOf are the Auto Scaling groups of the instances (those in none left out).
	GroupsOf(ctx context.Context, instanceIDs []string) ([]string, error)
	// TerminateHooks are each group's lifecycle hooks on the terminating transition.
	TerminateHooks(ctx context.Context, group string) ([]Hook, error)
}

// Hook is a lifecycle hook, as the set-up check reads it.
type Hook struct {
	Name string
	// NotificationTarget is where the hook sends its notifications itself ("" when only
	// EventBridge carries them).
	NotificationTarget string
}
