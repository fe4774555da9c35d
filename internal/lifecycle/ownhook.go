// SPDX-License-Identifier: Apache-2.0

package lifecycle

import (
	"context"
	"sync"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/instancegate"
	"lifeboat.dev/lifeboat/internal/notice"
)

// InstanceGroup is one instance's Auto Scaling group, asked once: an instance never changes
// group while it runs.
type InstanceGroup struct {
	AutoScaling cloud.AutoScaling
	InstanceID  string

	mu    sync.Mutex
	name  string // once known
	known bool
}

// Name is the instance's group ("" when it is in none).
func (g *InstanceGroup) Name(ctx context.Context) (string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.known {
		return g.name, nil
	}
	name, err := g.AutoScaling.GroupOf(ctx, g.InstanceID)
	if err != nil {
		return "", err
	}
	g.name, g.known = name, true
	return name, nil
}

// OwnHook completes the termination hook (ASG_LIFECYCLE_HOOK_NAME) of the agent's own
// instance once its node is drained. Until Use gives it a completer (the agent learns its
// instance from instance metadata when it starts), or without a hook name, the hook is left
// to its own timeout.
type OwnHook struct {
	mu        sync.Mutex
	completer *Completer
	group     *InstanceGroup
	hook      string
}

// Use makes the hook of group's instance the one completed, by c.
func (o *OwnHook) Use(c Completer, group *InstanceGroup, hook string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.completer, o.group, o.hook = &c, group, hook
}

// Complete completes the hook for a drained node's termination notice. A notice naming
// another instance than the agent's own is refused: a record on this Node names it, and
// nothing is completed for it.
func (o *OwnHook) Complete(ctx context.Context, nodeName string, n notice.Notice) (*Completed, error) {
	o.mu.Lock()
	c, group, hook := o.completer, o.group, o.hook
	o.mu.Unlock()
	if c == nil || n.Kind.Ends() != notice.EndsHookCompleted {
		return nil, nil
	}
	instanceID := group.InstanceID
	if n.InstanceID != instanceID {
		return nil, &instancegate.Refusal{
			Request:      instancegate.Request{Call: instancegate.CallCompleteLifecycleAction, Node: nodeName, InstanceID: n.InstanceID},
			NodeInstance: instanceID, Reason: "instance metadata names the node's instance " + instanceID,
		}
	}
	log := c.Log.With("notice", n.ID, "hook", hook, "instance", instanceID)
	name, err := group.Name(ctx)
	switch {
	case err != nil && cloud.IsPermanent(err):
		log.Error("cannot learn the instance's Auto Scaling group; the instance terminates when the hook times out", "err", err)
		return nil, nil
	case err != nil:
		return nil, err // transient: the notice is retried
	case name == "":
		log.Warn("the instance is in no Auto Scaling group; nothing to complete")
		return nil, nil
	}
	done, err := c.Complete(ctx, nodeName, cloud.LifecycleAction{Group: name, Hook: hook, InstanceID: instanceID}, n.ID)
	if !done {
		return nil, err
	}
	return &Completed{Hook: hook, Result: cloud.ResultContinue}, nil
}
