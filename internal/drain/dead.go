// SPDX-License-Identifier: Apache-2.0

package drain

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// deleteDead is the drain of a node whose instance is dead (Terms.Dead): nothing runs its
// pods any more, so no eviction, budget or grace period can be honoured by them. Every
// selected pod, and every pod already terminating (its kubelet will never confirm it), is
// deleted with grace 0, so that its controller recreates it elsewhere at once. Selection is
// the usual one (invariant 1): mirror pods, Lifeboat's own, DaemonSet pods when ignored stay.
func (r *drainRun) deleteDead(ctx context.Context, pods []*Pod, candidates []Candidate, terminating []types.UID) error {
	r.d.opts.Logger.Warn("the node's instance is dead: its pods are deleted with grace 0, without eviction or budget",
		"node", r.node, "why", r.terms.Dead, "pods", len(candidates), "terminating", len(terminating))
	var errs []error
	for _, c := range candidates {
		out := outcomeOf(c)
		out.Forced = true
		if err := r.deleteNow(ctx, c.Pod); err != nil {
			out.Error = err.Error()
			errs = append(errs, err)
		} else {
			out.EvictedAt, out.GoneAt = time.Now(), time.Now()
		}
		r.res.Pods = append(r.res.Pods, out)
	}
	for _, p := range pods {
		if slices.Contains(terminating, p.UID) {
			if err := r.deleteNow(ctx, p); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("drain %s (instance dead): %w", r.node, err)
	}
	return nil
}

// deleteNow deletes one pod with grace 0; a pod already gone (or replaced under its name) is
// no error.
func (r *drainRun) deleteNow(ctx context.Context, p *Pod) error {
	grace := int64(0)
	err := r.d.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &p.UID}, GracePeriodSeconds: &grace,
	})
	if err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return fmt.Errorf("delete pod %s/%s: %w", p.Namespace, p.Name, err)
}
