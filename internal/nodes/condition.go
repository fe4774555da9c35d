// SPDX-License-Identifier: Apache-2.0

package nodes

import (
	"context"
	"encoding/json"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ConditionInterruption is Lifeboat's own Node condition: True while an interruption episode
// holds the node (its reason is the episode's phase, its message what the phase waits for),
// False once the episode is over. A condition type of Lifeboat's own, under its domain, so it
// never collides with the kubelet's or another agent's conditions.
const ConditionInterruption corev1.NodeConditionType = AnnotationPrefix + "Interruption"

// LabelPhase is the phase of the node's open episode (cordoned, draining, drained), for
// `kubectl get nodes -L lifeboat.dev/phase`; absent when the node has none.
const LabelPhase = AnnotationPrefix + "phase"

// SetCondition sets one condition of the node's status, leaving every other condition and
// status field as it is: a strategic merge patch of the status subresource that names only
// this condition (conditions merge by type), with the resourceVersion it was computed from,
// re-read and recomputed on conflict. The transition time moves only when the status
// changes. hint, when not nil, is a recent copy used for a first attempt (or the informer's,
// when newer: UseCache); "nothing to change" is decided on a fresh read only.
func (w *Writer) SetCondition(ctx context.Context, name string, hint *corev1.Node, c corev1.NodeCondition) (Result, error) {
	return w.patchStatus(ctx, name, hint, "set condition "+string(c.Type), func(current *corev1.Node) ([]byte, error) {
		if !conditionDiffers(current, c) {
			return nil, nil
		}
		now := time.Now()
		if w.Clock != nil {
			now = w.Clock.Now()
		}
		return conditionPatch(current, c, now)
	})
}

// RemoveCondition deletes the node's condition of type t from its status, every other
// condition and status field left as they are: a strategic merge patch of the status
// subresource that deletes only that entry (conditions merge by type), with the
// resourceVersion it was computed from, re-read and recomputed on conflict. hint, when not
// nil, is a recent copy used for a first attempt; "nothing to remove" is decided on a fresh
// read only.
func (w *Writer) RemoveCondition(ctx context.Context, name string, hint *corev1.Node, t corev1.NodeConditionType) (Result, error) {
	return w.patchStatus(ctx, name, hint, "remove condition "+string(t), func(current *corev1.Node) ([]byte, error) {
		if ConditionOf(current, t) == nil {
			return nil, nil
		}
		return json.Marshal(map[string]any{
			"metadata": map[string]any{"resourceVersion": current.ResourceVersion},
			"status":   map[string]any{"conditions": []map[string]any{{"type": t, "$patch": "delete"}}},
		})
	})
}

// patchStatus patches the node's status with what plan computes from a copy of the node (nil:
// nothing to change), retried on conflict from a fresh read. "Nothing to change" is decided
// on a fresh read only, never on the hint or the cache.
func (w *Writer) patchStatus(ctx context.Context, name string, hint *corev1.Node, what string, plan func(*corev1.Node) ([]byte, error)) (Result, error) {
	current, fresh := w.startFrom(name, hint), false
	var res Result
	attempt := func() error {
		for {
			if current == nil {
				n, err := w.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				current, fresh = n, true
			}
			patch, err := plan(current)
			switch {
			case err != nil:
				return err
			case patch == nil && !fresh:
				current = nil
				continue
			case patch == nil:
				res = Result{Node: current}
				return nil
			case w.DryRun:
				res = Result{Node: current, Changed: true, Patch: patch}
				return nil
			}
			updated, err := w.client.CoreV1().Nodes().Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
			if err != nil {
				return err
			}
			res = Result{Node: updated, Changed: true, Patch: patch}
			return nil
		}
	}
	if err := w.retry(ctx, name, what, attempt, func() { current = nil }); err != nil {
		return Result{}, err
	}
	return res, nil
}

// ConditionOf returns the node's condition of type t, or nil.
func ConditionOf(n *corev1.Node, t corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == t {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// conditionDiffers reports whether the node's condition of c's type differs from c in status,
// reason or message (or is missing).
func conditionDiffers(n *corev1.Node, c corev1.NodeCondition) bool {
	old := ConditionOf(n, c.Type)
	return old == nil || old.Status != c.Status || old.Reason != c.Reason || old.Message != c.Message
}

// conditionPatch is the strategic merge patch that sets c on current's status at now.
func conditionPatch(current *corev1.Node, c corev1.NodeCondition, now time.Time) ([]byte, error) {
	at := metav1.NewTime(now.UTC().Truncate(time.Second))
	c.LastHeartbeatTime, c.LastTransitionTime = at, at
	if old := ConditionOf(current, c.Type); old != nil && old.Status == c.Status {
		c.LastTransitionTime = old.LastTransitionTime
	}
	return json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": current.ResourceVersion},
		"status":   map[string]any{"conditions": []corev1.NodeCondition{c}},
	})
}
