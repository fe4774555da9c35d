// SPDX-License-Identifier: Apache-2.0

package lifecycle

import (
	"context"
	"time"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/events"
	"lifeboat.dev/lifeboat/internal/instancegate"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/nodes"
	"lifeboat.dev/lifeboat/internal/notice"
	"lifeboat.dev/lifeboat/internal/record"
	"lifeboat.dev/lifeboat/internal/text"
)

// Repairs is what a repaired node's instance is given once its node is drained
// (NODE_REPAIR_ACTION).
type Repairs struct {
	// Action is config.RepairMarkUnhealthy or config.RepairTerminate; "" asks nothing of AWS
	// (DRY_RUN).
	Action string
	// Terminator terminates the instance with config.RepairTerminate.
	Terminator cloud.Terminator
	// Rebooter reboots the instance of a repair whose policy reboots (its notice's action is
	// config.PolicyReboot); RebootWait is NODE_REPAIR_REBOOT_WAIT, for the Event.
	Rebooter   cloud.Rebooter
	RebootWait time.Duration
	// Nodes records the reboot in the node's repair memory (record.Repair), which outlives
	// the episode the reboot ends.
	Nodes *nodes.Writer
}

// repair hands a repaired node's instance back: marked Unhealthy in its group, or
// terminated; or, for a repair whose policy reboots, reboots it. Each goes through the
// instance gate first.
func (c Completer) repair(ctx context.Context, nodeName string, n notice.Notice, r Repairs) error {
	if n.Action == config.PolicyReboot {
		if r.Action == "" {
			return nil // DRY_RUN: nothing is asked of AWS
		}
		return c.reboot(ctx, nodeName, n, r)
	}
	switch r.Action {
	case config.RepairMarkUnhealthy:
		return c.markUnhealthy(ctx, nodeName, n)
	case config.RepairTerminate:
		return c.terminate(ctx, nodeName, n, r.Terminator)
	}
	return nil
}

// terminate terminates a repaired node's instance once the gate has confirmed it is the
// node's. A permanent failure is logged and counted; the node stays drained.
func (c Completer) terminate(ctx context.Context, nodeName string, n notice.Notice, t cloud.Terminator) error {
	log := c.Log.With("notice", n.ID, "node", nodeName, "instance", n.InstanceID)
	if t == nil {
		log.Error("no EC2 client to terminate the repaired instance with; its node stays drained")
		c.Metrics.Action(metrics.ActionTerminateInstance, metrics.ResultError)
		return nil
	}
	if err := c.Gate.Check(ctx, instancegate.Request{Call: instancegate.CallTerminateInstances, Node: nodeName, InstanceID: n.InstanceID}); err != nil {
		if _, refused := instancegate.IsRefusal(err); refused {
			c.Metrics.Action(metrics.ActionTerminateInstance, metrics.ResultRefused)
		}
		return err
	}
	err := t.TerminateInstance(ctx, n.InstanceID)
	c.Metrics.AWSCall("TerminateInstances", err, nil)
	switch {
	case err == nil:
		c.Metrics.Action(metrics.ActionTerminateInstance, metrics.ResultOK)
		log.Info("repaired instance terminated")
		c.Events.RepairTerminated(events.Node{Name: nodeName}, n.InstanceID, titleOf(n.Kind))
	case cloud.IsPermanent(err):
		c.Metrics.Action(metrics.ActionTerminateInstance, metrics.ResultError)
		log.Error("cannot terminate the repaired instance; its node stays drained", "err", err)
	default:
		return err
	}
	return nil
}

// reboot reboots a repaired node's instance once the gate has confirmed it is the node's,
// and records it in the node's repair memory: the watcher then waits for the condition to
// clear, and replaces the node if it does not. A reboot that cannot be asked for (no EC2
// client, a permanent failure, the gate's refusal) is recorded as failed, so the next step
// follows at once.
func (c Completer) reboot(ctx context.Context, nodeName string, n notice.Notice, r Repairs) error {
	log := c.Log.With("notice", n.ID, "node", nodeName, "instance", n.InstanceID)
	if r.Rebooter == nil {
		log.Error("no EC2 client to reboot the repaired instance with; it is replaced instead")
		c.Metrics.Action(metrics.ActionRebootInstance, metrics.ResultError)
		return c.rebootFailed(ctx, nodeName, n, r, "no EC2 client")
	}
	if err := c.Gate.Check(ctx, instancegate.Request{Call: instancegate.CallRebootInstances, Node: nodeName, InstanceID: n.InstanceID}); err != nil {
		if ref, refused := instancegate.IsRefusal(err); refused {
			c.Metrics.Action(metrics.ActionRebootInstance, metrics.ResultRefused)
			_ = c.rebootFailed(ctx, nodeName, n, r, "the instance gate refused it: "+ref.Reason)
		}
		return err
	}
	err := r.Rebooter.RebootInstance(ctx, n.InstanceID)
	c.Metrics.AWSCall("RebootInstances", err, nil)
	switch {
	case err == nil:
		c.Metrics.Action(metrics.ActionRebootInstance, metrics.ResultOK)
		log.Info("repaired instance rebooted; it is replaced if its condition does not clear", "wait", r.RebootWait)
		c.Events.RepairRebooted(events.Node{Name: nodeName}, n.InstanceID, titleOf(n.Kind), r.RebootWait)
		c.rememberReboot(ctx, r.Nodes, nodeName, func(b *record.RepairReboot) { b.Rebooted = time.Now().UTC().Truncate(time.Second) })
		return nil
	case cloud.IsPermanent(err):
		c.Metrics.Action(metrics.ActionRebootInstance, metrics.ResultError)
		log.Error("cannot reboot the repaired instance; it is replaced instead", "err", err)
		return c.rebootFailed(ctx, nodeName, n, r, err.Error())
	}
	return err
}

// rebootFailed says and records that the repair's reboot could not be asked for.
func (c Completer) rebootFailed(ctx context.Context, nodeName string, n notice.Notice, r Repairs, why string) error {
	c.Events.RepairRebootFailed(events.Node{Name: nodeName}, n.InstanceID, titleOf(n.Kind), why)
	c.rememberReboot(ctx, r.Nodes, nodeName, func(b *record.RepairReboot) { b.Failed = text.Clip(why, 512, "…") })
	return nil
}

// rememberReboot changes the reboot step the watcher recorded on the node before the repair
// started. A failed write is logged: the node's repair then waits for the episode to end.
func (c Completer) rememberReboot(ctx context.Context, w *nodes.Writer, nodeName string, change func(*record.RepairReboot)) {
	if w == nil {
		return
	}
	_, err := w.Apply(ctx, nodeName, nil, "record the repair's reboot", record.RepairEdit(func(m *record.Repair) {
		if m.Reboot != nil {
			change(m.Reboot)
		}
	}))
	if err != nil {
		c.Log.Error("cannot record the repair's reboot on the node", "node", nodeName, "err", err)
	}
}

// titleOf names a kind in Events ("Node repair").
func titleOf(k notice.Kind) string {
	if r, ok := notice.RulesOf(k); ok {
		return r.Title
	}
	return string(k)
}
