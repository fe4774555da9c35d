// SPDX-License-Identifier: Apache-2.0

package lifecycle

import (
	"context"

	"lifeboat.dev/lifeboat/internal/cloud"
	"lifeboat.dev/lifeboat/internal/config"
	"lifeboat.dev/lifeboat/internal/events"
	"lifeboat.dev/lifeboat/internal/instancegate"
	"lifeboat.dev/lifeboat/internal/metrics"
	"lifeboat.dev/lifeboat/internal/notice"
)

// Repairs is what a repaired node's instance is given once its node is drained
// (NODE_REPAIR_ACTION).
type Repairs struct {
	// Action is config.RepairMarkUnhealthy or config.RepairTerminate; "" asks nothing of AWS
	// (DRY_RUN).
	Action string
	// Terminator terminates the instance with config.RepairTerminate.
	Terminator cloud.Terminator
}

// repair hands a repaired node's instance back: marked Unhealthy in its group, or
// terminated. Both go through the instance gate first.
func (c Completer) repair(ctx context.Context, nodeName string, n notice.Notice, r Repairs) error {
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

// titleOf names a kind in Events ("Node repair").
func titleOf(k notice.Kind) string {
	if r, ok := notice.RulesOf(k); ok {
		return r.Title
	}
	return string(k)
}
