// SPDX-License-Identifier: Apache-2.0

package messages

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"lifeboat.dev/lifeboat/internal/notice"
)

// Auto Scaling lifecycle actions, as EventBridge events or as messages a hook sends straight
// to the queue. The action is completed by instance id: the token only identifies it.
const (
	kindLifecycle = "lifecycle action"
	kindHook      = "Auto Scaling hook"

	detailTypeTerminateAction = "EC2 Instance-terminate Lifecycle Action"
	detailTypeLaunchAction    = "EC2 Instance-launch Lifecycle Action"
)

// testNotification is the Event (and, in some shapes, LifecycleTransition) of the message Auto
// Scaling sends when a hook's target is set up.
const testNotification = "autoscaling:TEST_NOTIFICATION"

// Lifecycle transitions.
const (
	TransitionTerminating = "autoscaling:EC2_INSTANCE_TERMINATING"
	TransitionLaunching   = "autoscaling:EC2_INSTANCE_LAUNCHING"
)

// hookFields are the lifecycle-action fields common to the EventBridge detail and the
// message Auto Scaling sends straight to the queue.
type hookFields struct {
	Token      string `json:"LifecycleActionToken"`
	Group      string `json:"AutoScalingGroupName"`
	Hook       string `json:"LifecycleHookName"`
	InstanceID string `json:"EC2InstanceId"`
	Transition string `json:"LifecycleTransition"`
}

func parseLifecycle(body string, e envelope, at time.Time) (Result, error) {
	var d struct {
		hookFields
		Event string `json:"Event"`
	}
	if err := json.Unmarshal(e.Detail, &d); err != nil {
		return Result{}, detailError(kindLifecycle, err, body)
	}
	if d.Event == testNotification || d.Transition == testNotification {
		// Auto Scaling's test notification, forwarded by an EventBridge rule (NTH's tests
		// carry this shape).
		return ignored(IgnoreASGTestNotification, ReasonTestNotification, fmt.Sprintf("Auto Scaling test notification for group %q", clip(d.Group))), nil
	}
	want := TransitionTerminating
	if e.DetailType == detailTypeLaunchAction {
		want = TransitionLaunching
	}
	if d.Transition == "" {
		d.Transition = want
	} else if d.Transition != want {
		return Result{}, fmt.Errorf("%s: detail.LifecycleTransition %q does not match detail-type %q (body %q)", kindLifecycle, clip(d.Transition), e.DetailType, clip(body))
	}
	return lifecycleResult(kindLifecycle, "detail.", d.hookFields, at, body)
}

// parseHook reads a message Auto Scaling sent straight to the queue (no EventBridge).
func (p Parser) parseHook(body string, receivedAt time.Time) (Result, error) {
	var v struct {
		hookFields
		Event     string `json:"Event"`
		Time      string `json:"Time"`
		AccountID string `json:"AccountId"`
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		return Result{}, fmt.Errorf("%s: %v (body %q)", kindHook, err, clip(body))
	}
	if err := p.checkAccount(kindHook, "AccountId", v.AccountID, body); err != nil {
		return Result{}, err
	}
	if v.Event == testNotification {
		return ignored(IgnoreASGTestNotification, ReasonTestNotification, fmt.Sprintf("Auto Scaling test notification for group %q", clip(v.Group))), nil
	}
	if v.Event != "" {
		return Result{}, fmt.Errorf("%s: unknown Event %q (body %q)", kindHook, clip(v.Event), clip(body))
	}
	if v.Transition != TransitionTerminating && v.Transition != TransitionLaunching {
		return Result{}, fmt.Errorf("%s: unknown LifecycleTransition %q (body %q)", kindHook, clip(v.Transition), clip(body))
	}
	at := receivedAt
	if v.Time != "" {
		t, err := time.Parse(time.RFC3339, v.Time)
		if err != nil {
			return Result{}, fmt.Errorf("%s: Time %q is not RFC 3339 (body %q)", kindHook, clip(v.Time), clip(body))
		}
		at = t
	}
	res, err := lifecycleResult(kindHook, "", v.hookFields, at, body)
	return announced(res, at), err
}

// lifecycleResult checks a hook and builds its notice. The token identifies the action. No
// deadline: the caller uses the hook's heartbeat timeout.
func lifecycleResult(kind, prefix string, d hookFields, at time.Time, body string) (Result, error) {
	if err := checkInstance(kind, prefix+"EC2InstanceId", d.InstanceID, body); err != nil {
		return Result{}, err
	}
	for _, f := range []struct {
		name, value string
		valid       func(string) bool
		want        string
		secret      bool // never repeated in an error
	}{
		{"LifecycleActionToken", d.Token, printable, "printable characters", true},
		{"AutoScalingGroupName", d.Group, printable, "printable characters", false},
		{"LifecycleHookName", d.Hook, hookNameChars, "letters, digits, -, _ and /", false},
	} {
		if strings.TrimSpace(f.value) == "" {
			return Result{}, fmt.Errorf("%s: missing %s%s (body %q)", kind, prefix, f.name, clip(body))
		}
		shown := ""
		if !f.secret {
			shown = fmt.Sprintf(" %q", clip(f.value))
		}
		if n := utf8.RuneCountInString(f.value); n > maxNameLength {
			return Result{}, fmt.Errorf("%s: %s%s%s is %d characters long, more than %d (body %q)", kind, prefix, f.name, shown, n, maxNameLength, clip(body))
		}
		if !f.valid(f.value) {
			return Result{}, fmt.Errorf("%s: %s%s%s holds characters other than %s (body %q)", kind, prefix, f.name, shown, f.want, clip(body))
		}
	}
	k, verb := notice.ASGTermination, "terminating"
	if d.Transition == TransitionLaunching {
		k, verb = notice.ASGLaunch, "launching"
	}
	// The id carries a digest of the token, never the token: ids reach taints, Events, logs
	// and webhooks. Earlier releases put the token's start in it; a record they wrote is
	// still matched on that form while messages from before a rollout come back, by its digest
	// (LegacyIDDigest): the token itself goes no further than this function.
	return one(notice.Notice{
		ID: notice.ID(k, d.InstanceID, notice.TokenDigest(d.Token)), LegacyIDDigest: notice.Digest(notice.ID(k, d.InstanceID, d.Token)), Kind: k, Source: notice.SourceQueue,
		InstanceID: d.InstanceID, StartTime: at, Action: d.Transition, Lifecycle: &notice.Lifecycle{Group: d.Group, Hook: d.Hook},
		Description: fmt.Sprintf("Auto Scaling group %s is %s the instance (hook %s)", d.Group, verb, d.Hook),
	}), nil
}

var _ = register(eventKind{source: "aws.autoscaling", detailTypes: []string{detailTypeTerminateAction, detailTypeLaunchAction}, name: kindLifecycle, parse: parseLifecycle})
